"""PPO from rsl-rl-lib over a BatchedEnv, with our own loop for progress, checkpoints and timing.

We use rsl_rl's algorithm (storage, GAE, clipped objective, adaptive KL schedule, empirical
observation normalization) as Isaac Lab and legged_gym users know it, and keep the loop here so
that checkpoints are atomic and carry RNG streams, and so progress shows return and success.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import random
import time
from pathlib import Path

import numpy as np
import torch
from rsl_rl.algorithms import PPO
from tqdm import tqdm

from robot_rl.config import ConfigError
from robot_rl.training.checkpoint import (
    RECORD_KEY,
    CheckpointError,
    load_checkpoint,
    numpy_rng_from_plain,
    numpy_rng_to_plain,
    save_atomic,
    task_record,
)
from robot_rl.training.distributed import Ranks, check_in_sync, gather_objects
from robot_rl.training.episode_stats import EpisodeStats, checkpoint_due, learn_result, write_iteration_scalars
from sim.tasks.base import Task


def rsl_rl_config(algo: dict, task: Task) -> dict:
    """Our algo config group -> the dict rsl_rl's PPO.construct_algorithm expects.

    algo["actor"] (default "mlp"): rsl_rl's MLPModel on the whole observation, or "swarm_attention" /
    "swarm_mlp": a per-drone shared-weight swarm policy (robot_rl.policies.swarm_actor; needs the task).
    """
    actor_dist = {"class_name": "GaussianDistribution", "init_std": float(algo["init_std"])}

    def mlp(hidden_dims) -> dict:
        return {
            "class_name": "MLPModel",
            "hidden_dims": list(hidden_dims),
            "activation": str(algo["activation"]),
            "obs_normalization": True,
        }

    cfg = {
        "num_steps_per_env": int(algo["num_steps_per_env"]),
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": int(algo["num_learning_epochs"]),
            "num_mini_batches": int(algo["num_mini_batches"]),
            "learning_rate": float(algo["learning_rate"]),
            "gamma": float(algo["gamma"]),
            "lam": float(algo["lam"]),
            "entropy_coef": float(algo["entropy_coef"]),
            "desired_kl": float(algo["desired_kl"]),
            "schedule": str(algo["schedule"]),
            "clip_param": float(algo["clip_param"]),
            "max_grad_norm": float(algo["max_grad_norm"]),
            "value_loss_coef": 1.0,
            "use_clipped_value_loss": True,
        },
        "actor": {**mlp(algo["actor_hidden_dims"]), "distribution_cfg": actor_dist},
        "critic": mlp(algo["critic_hidden_dims"]),
        "multi_gpu": None,
    }
    if algo.get("actor", "mlp") != "mlp":
        from robot_rl.policies.swarm_actor import actor_config

        cfg["actor"] = actor_config(algo, task, actor_dist)
    if task.camera_obs is not None:
        # camera observations: rsl_rl's CNNModel encodes the image group, its latent joins the state
        # observation in the actor's MLP; the critic keeps the privileged state
        cfg["obs_groups"]["actor"] = ["policy", "camera"]
        cnn = {
            "output_channels": [16, 32, 32],
            "kernel_size": [5, 3, 3],
            "stride": [2, 2, 2],
            "activation": str(algo["activation"]),
            "global_pool": "avg",
            "flatten": True,
        }
        cfg["actor"] = {**cfg["actor"], "class_name": "CNNModel", "cnn_cfg": cnn}
    return cfg


def rng_state(env) -> dict:
    return {
        "torch": torch.get_rng_state(),
        "numpy": numpy_rng_to_plain(np.random.get_state()),  # tensors and ints: checkpoints are data only
        "python": random.getstate(),
        "env": env.rng.get_state(),
    }


def set_rng_state(env, state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(numpy_rng_from_plain(state["numpy"]))
    random.setstate(state["python"])
    env.rng.set_state(state["env"])


def restore_rngs(env, checkpoint: dict, ranks: Ranks, fine_tune: bool) -> None:
    """The RNG streams of a checkpoint: a rank of a torchrun run resumed by as many ranks continues its own
    (rank_rngs); otherwise rank 0's are restored (robot-rl train refuses to resume a run on another number of
    ranks: distributed.saved_ranks)."""
    rank_rngs = checkpoint.get("rank_rngs") or [checkpoint["rng"]]
    own = not fine_tune and len(rank_rngs) == ranks.world_size
    set_rng_state(env, rank_rngs[ranks.rank] if own else checkpoint["rng"])


def restore_guidance(env, checkpoint: dict, evaluation: bool = False) -> None:
    """Put a guided env where the checkpoint's training left it: its gain schedules at that progress and what
    online correction had learned (planned exploration). Other envs have neither and are left as they are.
    evaluation=True: the schedules hold there (training moves them on)."""
    env.set_progress(int(checkpoint["total_steps"]), hold=evaluation)
    if "guidance" in checkpoint:
        env.load_guidance_state(checkpoint["guidance"])


class PPOTrainer:
    def __init__(
        self,
        env,
        algo: dict,
        run_dir: Path | None = None,
        writer=None,
        config_hash: str | None = None,
        ranks: Ranks | None = None,
    ):
        """config_hash: checkpoint.task_config_hash of the run's task section, recorded in every checkpoint so
        that resume can tell an edited config.yaml. ranks: this process's place in a torchrun run
        (robot_rl.training.distributed; its process group started): gradients and normalizer statistics are
        averaged over the ranks, and the ranks' networks start equal and are checked equal after every update."""
        self.env = env
        self.ranks = ranks or Ranks()
        # what checkpoints record, and what a checkpoint loaded into this trainer must match (task, robot, layout)
        self.record = task_record(env.task, config_hash)
        self.algo_cfg = dict(algo)
        self.cfg = rsl_rl_config(algo, env.task)
        self.cfg["multi_gpu"] = self.ranks.rsl_rl_config()
        self.run_dir = Path(run_dir) if run_dir else None
        self.writer = writer
        # rsl_rl prints its observation groups and both networks: kept for the run's model.txt, not the terminal
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            self.alg: PPO = PPO.construct_algorithm(
                env.get_observations(), env, copy.deepcopy(self.cfg), str(env.device)
            )
        self.model_summary = printed.getvalue()
        if self.run_dir is not None and self.run_dir.is_dir():
            (self.run_dir / "model.txt").write_text(self.model_summary)
        if os.environ.get("ROBOT_RL_VERBOSE"):
            print(self.model_summary, end="")
        self._shrink_output_layer()
        if self.ranks.distributed:
            self.alg.broadcast_parameters()  # rank 0's initial networks on every rank
            check_in_sync([self.alg.actor, self.alg.critic], "the initial broadcast")
        env.value_fn = self.alg.critic  # planned exploration chooses options by the critic's values
        self.iteration = 0  # iterations completed
        self.total_steps = 0
        self.train_time_s = 0.0
        # default: all cores, shared among the ranks of a run on one machine
        cores = max(1, (os.cpu_count() or 1) // self.ranks.world_size)
        self.update_threads = int(algo.get("update_threads") or cores)
        # env steps count simulated worlds: a per-drone env (robot_rl.envs.PerDroneEnv) has N environments per world
        self.worlds = env.num_worlds
        self.anchor_coef = float(algo.get("anchor_coef") or 0.0)
        self.anchor = self._load_anchor(algo.get("anchor")) if self.anchor_coef > 0 else None
        if self.anchor is not None and self.ranks.distributed:
            raise ConfigError("algo.anchor_coef: the anchor's update is not averaged over torchrun's ranks yet")

    def _load_anchor(self, path) -> torch.nn.Module:
        """A frozen copy of the actor with another checkpoint's weights (e.g. an imitation warm start): fine-tuning
        is pulled toward its mean actions so that skills the rollouts rarely reward are not worn away."""
        if not path:
            raise ConfigError("algo.anchor_coef > 0 needs algo.anchor: the checkpoint whose policy anchors it")
        anchor = copy.deepcopy(self.alg.actor)
        anchor.load_state_dict(load_checkpoint(Path(path), expect=self.record)["actor_state_dict"], strict=True)
        anchor.eval()
        for p in anchor.parameters():
            p.requires_grad_(False)
        return anchor

    def _anchor_update(self) -> float:
        """After PPO's update, one pass over this rollout's observations in PPO's mini-batches: the loss
        anchor_coef * |mean action - anchor's mean action|^2 through PPO's own optimizer, so it is weighed against
        the policy gradient in the same Adam statistics (a KL penalty to the anchor for equal Gaussian widths)."""
        alg = self.alg
        obs = alg.storage.observations.flatten(0, 1)
        with torch.no_grad():
            target = self.anchor(obs)
        batches = torch.randperm(target.shape[0], device=target.device).chunk(
            int(self.cfg["algorithm"]["num_mini_batches"])
        )
        total = 0.0
        for idx in batches:
            loss = self.anchor_coef * (alg.actor(obs[idx]) - target[idx]).pow(2).mean()
            alg.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(alg.actor.parameters(), self.cfg["algorithm"]["max_grad_norm"])
            alg.optimizer.step()
            total += loss.item()
        return total / len(batches)

    def _shrink_output_layer(self) -> None:
        """Start from near-zero mean actions: for a drone that is the nominal hover command, so
        early episodes explore around hovering instead of flying off under a random bias."""
        last = [m for m in self.alg.actor.mlp.modules() if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            last.weight.mul_(0.01)
            last.bias.zero_()

    # -- checkpoints ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        d = self.alg.save()
        d.update(
            iteration=self.iteration,
            total_steps=self.total_steps,
            train_time_s=self.train_time_s,
            learning_rate=self.alg.learning_rate,
            rng=rng_state(self.env),
            algo=self.algo_cfg,
            actor_cfg=self.cfg["actor"],
        )
        d[RECORD_KEY] = self.record.to_dict()
        guidance = self.env.guidance_state()  # what a guided env learned online (planned exploration)
        if guidance is not None:
            d["guidance"] = guidance
        return d

    def save(self, path: Path, rank_rngs: list[dict] | None = None) -> None:
        """rank_rngs: every rank's RNG streams in a torchrun run (rank 0 saves them all, so each resumes its own)."""
        d = self.state_dict()
        if rank_rngs is not None:
            d["rank_rngs"] = rank_rngs
        save_atomic(d, path)

    def load(self, path: Path, fine_tune: bool = False) -> None:
        """Continue from a checkpoint. fine_tune (a new run, init_from): a learning rate configured differently
        from the checkpoint's run is the new run's intent and replaces the one training had reached."""
        d = load_checkpoint(path, expect=self.record)  # another task's checkpoint is refused here
        try:
            self.alg.load(d, None, strict=True)
        except (RuntimeError, KeyError, ValueError) as e:  # same task, other networks (algo sizes, actor kind)
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise CheckpointError(f"checkpoint {path} does not fit this run's networks: {first}") from None
        lr = float(d["learning_rate"])
        configured = float(self.algo_cfg["learning_rate"])
        if fine_tune and configured != float(d.get("algo", {}).get("learning_rate", configured)):
            lr = configured
        self.alg.learning_rate = lr
        for g in self.alg.optimizer.param_groups:
            g["lr"] = lr
        self.iteration = int(d["iteration"])
        self.total_steps = int(d["total_steps"])
        self.train_time_s = float(d["train_time_s"])
        restore_rngs(self.env, d, self.ranks, fine_tune)
        restore_guidance(self.env, d)

    # -- training ---------------------------------------------------------------------------------
    def learn(self, iterations: int, save_every: int = 50, progress: bool = True) -> dict:
        env, alg = self.env, self.alg
        steps_per_iter = self.cfg["num_steps_per_env"]
        obs = env.get_observations()
        alg.train_mode()
        episodes = EpisodeStats(env.num_envs, env.device)  # NaN means while a resumed run has no iterations left
        bar = tqdm(range(self.iteration, iterations), desc="train", disable=not progress, unit="it", dynamic_ncols=True)
        for it in bar:
            t0 = time.perf_counter()
            env.task.on_iteration(it)
            episodes.start_iteration()
            with torch.inference_mode():
                for _ in range(steps_per_iter):
                    actions = alg.act(obs)
                    obs, rewards, dones, extras = env.step(actions)
                    alg.process_env_step(obs, rewards, dones, extras)
                    episodes.record(rewards, dones, extras)
                alg.compute_returns(obs)
            collect = time.perf_counter() - t0
            # the simulator's thread pool is idle during the update: let torch use every core
            rollout_threads = torch.get_num_threads()
            torch.set_num_threads(self.update_threads)
            losses = alg.update()
            if self.anchor is not None:
                losses["anchor"] = self._anchor_update()
            torch.set_num_threads(rollout_threads)
            check_in_sync([alg.actor, alg.critic], f"update {it + 1}")
            dt = time.perf_counter() - t0
            self.iteration = it + 1
            self.total_steps += steps_per_iter * self.worlds * self.ranks.world_size
            self.train_time_s += dt
            mean_ret, succ = episodes.mean_return, episodes.success_rate
            bar.set_postfix(
                ret=f"{mean_ret:.1f}", success=f"{succ:.2f}", sps=f"{steps_per_iter * self.worlds / dt:.0f}"
            )
            if self.writer is not None:
                self._log(it, losses, episodes, collect, dt)
            if checkpoint_due(self.iteration, save_every, iterations):
                # every rank hands its RNG streams to rank 0, which writes the checkpoint
                rank_rngs = gather_objects(rng_state(env)) if self.ranks.distributed else None
                if self.run_dir is not None:
                    self.save(self.run_dir / "checkpoints" / f"model_{self.iteration}.pt", rank_rngs)
        return learn_result(self.iteration, self.total_steps, self.train_time_s, episodes)

    def _log(self, it, losses, episodes, collect, dt) -> None:
        w = self.writer
        write_iteration_scalars(w, it, losses, episodes, self.total_steps, self.train_time_s)
        w.add_scalar("Train/learning_rate", self.alg.learning_rate, it)
        w.add_scalar("Perf/steps_per_s", self.cfg["num_steps_per_env"] * self.worlds / dt, it)
        w.add_scalar("Perf/collect_time_s", collect, it)
        w.add_scalar("Perf/learn_time_s", dt - collect, it)

    def inference_policy(self):
        self.alg.eval_mode()
        return self.alg.get_policy()

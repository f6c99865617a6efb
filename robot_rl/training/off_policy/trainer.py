"""OffPolicyTrainer: TD3 / SAC over a BatchedEnv with PPOTrainer's surface (learn, save/load, inference_policy).

Loop (top to bottom in learn): every env step the actor (plus exploration) acts in all num_worlds worlds,
the step's num_worlds transitions go into the replay ring (ended episodes' next observation is the env's
final_observation, so time-outs bootstrap and terminations do not), the running observation statistics
take the step's observations, and once learning_starts transitions are held, updates_per_step gradient
updates run on batches of batch_size n-step transitions. An iteration is steps_per_iteration env steps, so
train.iterations * steps_per_iteration * num_worlds is the run's total of env steps.

Checkpoints: model_<iteration>.pt (via checkpoint.save_atomic, read back with load_checkpoint: data only)
holds the networks, target networks, optimizers, temperature, counters, RNG streams (torch, numpy,
python, the env's, and CUDA's on a GPU) and the task record. With save_replay (the default) the replay
ring is written first, atomically, to checkpoints/replay.pt (one file, the latest save's), tagged with the
iteration it belongs to; resume loads it when its tag matches the checkpoint it resumes, so the learner
continues with exactly the state it saved (the env restarts from fresh episodes, as PPO's resume does).
Otherwise (no replay file, an older one after a kill between the two writes, save_replay false, or a
fine-tune from another run with init_from) it is a warm restart: networks, optimizers and statistics are
restored, the buffer starts empty and updates resume after learning_starts new transitions.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import torch
from tqdm import tqdm

from robot_rl.training.checkpoint import (
    RECORD_KEY,
    CheckpointError,
    load_checkpoint,
    read_data,
    save_atomic,
    task_record,
)
from robot_rl.training.distributed import Ranks, broadcast_from_main, check_in_sync, gather_objects
from robot_rl.training.episode_stats import EpisodeStats, checkpoint_due, learn_result, write_iteration_scalars
from robot_rl.training.off_policy.agents import Agent, make_agent
from robot_rl.training.off_policy.config import OffPolicyConfig
from robot_rl.training.off_policy.prior_data import load_prior
from robot_rl.training.off_policy.replay import ReplayBuffer
from robot_rl.training.ppo_trainer import restore_guidance, restore_rngs, rng_state

REPLAY_FILE = "replay.pt"


def replay_file(rank: int) -> str:
    """Where a rank's replay ring is saved beside the checkpoints: replay.pt for rank 0 (and a one-process run),
    replay_rank<r>.pt for the other ranks of a torchrun run."""
    return REPLAY_FILE if rank == 0 else f"replay_rank{rank}.pt"


def next_observations(next_obs, dones: torch.Tensor, extras: dict, groups: tuple[str, ...]) -> dict:
    """The true next observation of every world: the env's returned one, except for worlds whose episode ended,
    whose returned observation is already the next episode's; theirs is extras["final_observation"]."""
    out = {g: next_obs[g].clone() for g in groups}
    if bool(dones.any()):
        if "final_observation" not in extras:
            raise ValueError("the env gives no final_observation: build it with EnvConfig(final_observation=True)")
        ids = extras["final"]["ids"]
        for g in groups:
            out[g][ids] = extras["final_observation"][g].to(out[g].dtype)
    return out


class OffPolicyTrainer:
    def __init__(
        self,
        env,
        algo: dict,
        run_dir: Path | None = None,
        writer=None,
        config_hash: str | None = None,
        ranks: Ranks | None = None,
    ):
        """algo: the algo section (td3 or sac); bad keys or values raise ValueError naming the key. ranks: this
        process's place in a torchrun run (robot_rl.training.distributed; its process group started); every rank
        is given the run_dir, where it saves its own replay ring, and rank 0 writes the rest."""
        self.cfg = cfg = OffPolicyConfig.from_dict(algo)
        self.algo_cfg = dict(algo)
        if not env.gives_final_observation:
            raise ValueError(
                f"algo={cfg.name} bootstraps time-outs from the env's final_observation: build the env with it on "
                "(make_env(final_observation=True); the per-drone env does not give it yet)"
            )
        self.env = env
        self.record = task_record(env.task, config_hash)
        self.run_dir = Path(run_dir) if run_dir else None
        self.writer = writer
        self.device = torch.device(cfg.device) if cfg.device else env.device  # by default where the env's tensors are
        obs = env.get_observations()
        self.asymmetric = cfg.asymmetric and "critic" in obs.keys()
        self.groups = ("policy", "critic") if self.asymmetric else ("policy",)
        obs_dim = obs["policy"].shape[1]
        critic_dim = obs["critic"].shape[1] if self.asymmetric else obs_dim
        self.agent: Agent = make_agent(cfg, obs_dim, critic_dim, env.num_actions).to(self.device)
        self.ranks = ranks or Ranks()
        if self.ranks.distributed:  # rank 0's networks everywhere; each rank keeps its own replay
            broadcast_from_main([self.agent])
            check_in_sync([self.agent], "the initial broadcast")
        self.dims = (obs_dim, critic_dim)
        self.buffer: ReplayBuffer | None = None  # allocated when training starts (evaluation needs none)
        self.prior: ReplayBuffer | None = None  # algo.prior_data, read when training starts
        self._pending_replay: Path | None = None  # load() found a replay file: learn() restores it
        self.model_summary = f"actor: {self.agent.actor}\ncritic: {self.agent.critic}\n"
        if self.run_dir is not None and self.run_dir.is_dir() and self.ranks.is_main:
            (self.run_dir / "model.txt").write_text(self.model_summary)
        self.iteration = 0
        self.total_steps = 0
        self.train_time_s = 0.0
        self.update_budget = 0.0  # fractional updates_per_step carried from step to step
        self.resume_note = ""  # what load() restored of the replay buffer, for the command to print
        cores = max(1, (os.cpu_count() or 1) // self.ranks.world_size)  # shared among a machine's ranks
        self.update_threads = int(cfg.update_threads or cores)
        self.worlds = env.num_worlds
        env.value_fn = self.state_values  # planned exploration's value_bonus rule scores options with it

    @property
    def normalization_held(self) -> bool:
        """Whether the observation statistics stay the prior data's (algo.hold_prior_normalization)."""
        return bool(self.cfg.prior_data) and self.cfg.hold_prior_normalization

    # -- acting and learning ----------------------------------------------------------------------------------
    def _normalized(self, policy: torch.Tensor, critic: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.agent.actor.obs_normalizer(policy)
        xc = self.agent.critic.obs_normalizer(critic if critic is not None else policy)
        return x, xc

    @torch.no_grad()
    def state_values(self, obs) -> torch.Tensor:
        """V(s) = min over the twin critics of Q(s, actor(s)), per world (n,)."""
        p = obs["policy"].to(self.device, torch.float32)
        c = obs["critic"].to(self.device, torch.float32) if self.asymmetric else None
        x, xc = self._normalized(p, c)
        return self.agent.critic(xc, self.agent.actor.mlp(x)).min(0).values

    def _sample(self, offline: bool = False) -> dict[str, torch.Tensor]:
        """A batch of n-step transitions; with prior data, prior_ratio of it from the prior ring (RLPD), all of it
        when offline (pretraining). b["prior"] marks the prior rows."""
        cfg = self.cfg
        if self.prior is None:
            b = self.buffer.sample(cfg.batch_size, cfg.n_step, cfg.gamma)
            return b | {"prior": torch.zeros(cfg.batch_size, dtype=torch.bool, device=self.device)}
        if offline:
            b = self.prior.sample(cfg.batch_size, cfg.n_step, cfg.gamma)
            return b | {"prior": torch.ones(cfg.batch_size, dtype=torch.bool, device=self.device)}
        n_prior = min(cfg.batch_size - 1, max(1, round(cfg.batch_size * cfg.prior_ratio)))
        online = self.buffer.sample(cfg.batch_size - n_prior, cfg.n_step, cfg.gamma)
        prior = self.prior.sample(n_prior, cfg.n_step, cfg.gamma)
        b = {k: torch.cat([online[k], prior[k]]) for k in online}
        b["prior"] = torch.arange(cfg.batch_size, device=self.device) >= cfg.batch_size - n_prior
        return b

    def _load_prior(self) -> None:
        """algo.prior_data as a second ring; a fresh run's observation statistics start from it (a resumed run's
        checkpoint holds them already)."""
        obs_dim, critic_dim = self.dims
        critic = critic_dim if self.asymmetric else None
        self.prior = load_prior(Path(self.cfg.prior_data), obs_dim, critic, self.env.num_actions, self.device)
        if self.cfg.obs_normalization and self.total_steps == 0 and self.agent.updates == 0:
            d, rows = self.prior.data, slice(0, self.prior.filled)
            self.agent.actor.obs_normalizer.update(d["obs"][rows].flatten(0, 1))
            self.agent.critic.obs_normalizer.update(d["critic_obs" if self.asymmetric else "obs"][rows].flatten(0, 1))
        tqdm.write(f"prior data: {len(self.prior):,} transitions from {self.cfg.prior_data}")

    def _update(self, offline: bool = False) -> dict[str, torch.Tensor]:
        b = self._sample(offline)
        x, xc = self._normalized(b["obs"], b.get("critic_obs"))
        x_next, xc_next = self._normalized(b["next_obs"], b.get("next_critic_obs"))
        batch = {"x": x, "xc": xc, "x_next": x_next, "xc_next": xc_next}
        batch.update(actions=b["actions"], returns=b["returns"], discount=b["discount"], prior=b["prior"])
        return self.agent.update(batch)

    def pretrain(self, progress: bool = True) -> None:
        """algo.pretrain_updates updates on the prior data alone (offline), once per run: a resumed run that
        has done them (agent.updates counts them) goes straight on online."""
        todo = self.cfg.pretrain_updates - self.agent.updates if self.total_steps == 0 else 0
        if todo <= 0:
            return
        t0 = time.perf_counter()
        sim_threads = torch.get_num_threads()
        torch.set_num_threads(self.update_threads)
        losses: dict[str, list[torch.Tensor]] = {}
        for _ in tqdm(range(todo), desc="pretrain", disable=not progress, unit="upd", dynamic_ncols=True):
            for k, v in self._update(offline=True).items():
                losses.setdefault(k, []).append(v)
        torch.set_num_threads(sim_threads)
        dt = time.perf_counter() - t0
        self.train_time_s += dt
        # where pretraining ended: the mean of each loss's last tenth
        mean = {k: float(torch.stack(v[-max(1, len(v) // 10) :]).mean()) for k, v in losses.items()}
        if self.writer is not None:
            for k, v in mean.items():
                self.writer.add_scalar(f"Pretrain/{k}", v, 0)
        means = ", ".join(f"{k} {v:.4g}" for k, v in mean.items())
        tqdm.write(f"pretrained offline: {todo:,} updates on the prior data in {dt:.1f} s (last tenth: {means})")

    def _observe(self, obs) -> tuple[torch.Tensor, torch.Tensor | None]:
        """An observation TensorDict on the learner's device; the running statistics take it."""
        p = obs["policy"].to(self.device, torch.float32)
        c = obs["critic"].to(self.device, torch.float32) if self.asymmetric else None
        if self.cfg.obs_normalization and not self.normalization_held:
            self.agent.actor.obs_normalizer.update(p)
            self.agent.critic.obs_normalizer.update(c if c is not None else p)
        return p, c

    def _ensure_buffer(self) -> ReplayBuffer:
        if self.buffer is None:
            obs_dim, critic_dim = self.dims
            critic = critic_dim if self.asymmetric else None
            n = self.env.num_envs
            self.buffer = ReplayBuffer(self.cfg.buffer_size, n, obs_dim, self.env.num_actions, critic, self.device)
        return self.buffer

    def collect_step(self, obs):
        """One env step with exploration; its transitions go into the buffer. Returns (next obs, rewards,
        dones, extras) as the env gave them."""
        self._ensure_buffer()
        p, c = self._observe(obs)
        with torch.no_grad():
            actions = self.agent.explore(self.agent.actor.obs_normalizer(p))
        next_obs, rewards, dones, extras = self.env.step(actions.cpu())
        true_next = next_observations(next_obs, dones, extras, self.groups)
        step = {
            "obs": p,
            "next_obs": true_next["policy"],
            "actions": actions,
            "rewards": rewards,
            "done": dones,
            "terminated": dones & ~extras["time_outs"],
        }
        if self.asymmetric:
            step.update(critic_obs=c, next_critic_obs=true_next["critic"])
        self.buffer.add(**step)
        return next_obs, rewards, dones, extras

    def learn(self, iterations: int, save_every: int = 50, progress: bool = True) -> dict:
        env, cfg = self.env, self.cfg
        self._ensure_buffer()
        if cfg.prior_data and self.prior is None:
            self._load_prior()
        if self._pending_replay is not None:
            self.resume_note = self._restore_replay(self._pending_replay)
            self._pending_replay = None
            tqdm.write(self.resume_note)  # one line on resume: what came back of the replay ring
        self.pretrain(progress)
        if self.run_dir is not None and self.cfg.pretrain_updates and self.iteration == 0:
            self._checkpoint("model_0.pt")  # the offline policy, before any env step
        obs = env.get_observations()
        episodes = EpisodeStats(env.num_envs, env.device)
        bar = tqdm(range(self.iteration, iterations), desc="train", disable=not progress, unit="it", dynamic_ncols=True)
        for it in bar:
            t0 = time.perf_counter()
            env.task.on_iteration(it)
            episodes.start_iteration()
            losses: dict[str, list[torch.Tensor]] = {}
            learn_s, n_updates = 0.0, 0
            for _ in range(cfg.steps_per_iteration):
                obs, rewards, dones, extras = self.collect_step(obs)
                episodes.record(rewards, dones, extras)
                if len(self.buffer) < cfg.learning_starts:
                    continue
                self.update_budget += cfg.updates_per_step
                n = int(self.update_budget)
                self.update_budget -= n
                t1 = time.perf_counter()
                sim_threads = torch.get_num_threads()
                torch.set_num_threads(self.update_threads)  # the simulator's pool is idle during updates
                for _ in range(n):
                    for k, v in self._update().items():
                        losses.setdefault(k, []).append(v)
                torch.set_num_threads(sim_threads)
                learn_s += time.perf_counter() - t1
                n_updates += n
            check_in_sync([self.agent], f"iteration {it + 1}'s updates")
            dt = time.perf_counter() - t0
            steps = cfg.steps_per_iteration * self.worlds
            self.iteration = it + 1
            self.total_steps += steps * self.ranks.world_size
            self.train_time_s += dt
            mean_ret, succ = episodes.mean_return, episodes.success_rate
            bar.set_postfix(ret=f"{mean_ret:.1f}", success=f"{succ:.2f}", sps=f"{steps / dt:.0f}")
            if self.writer is not None:
                mean = {k: float(torch.stack(v).mean()) for k, v in losses.items()}  # once per iteration
                self._log(it, mean, episodes, dt, learn_s, n_updates)
            if self.run_dir is not None and checkpoint_due(self.iteration, save_every, iterations):
                self._checkpoint(f"model_{self.iteration}.pt")
        return learn_result(self.iteration, self.total_steps, self.train_time_s, episodes)

    def _log(self, it, losses, episodes, dt, learn_s, n_updates) -> None:
        w = self.writer
        write_iteration_scalars(w, it, losses, episodes, self.total_steps, self.train_time_s)
        w.add_scalar("Train/learning_rate", self.cfg.actor_learning_rate, it)
        w.add_scalar("Train/buffer_transitions", len(self.buffer), it)
        if self.cfg.name == "sac":
            w.add_scalar("Train/alpha", float(self.agent.alpha), it)
        w.add_scalar("Perf/steps_per_s", self.cfg.steps_per_iteration * self.worlds / dt, it)
        w.add_scalar("Perf/collect_time_s", dt - learn_s, it)
        w.add_scalar("Perf/learn_time_s", learn_s, it)
        w.add_scalar("Perf/updates_per_s", n_updates / learn_s if learn_s > 0 else 0.0, it)

    def inference_policy(self) -> torch.nn.Module:
        """The deterministic actor (normalizer + MLP; SAC: tanh of the mean) on the CPU, in eval mode."""
        return copy.deepcopy(self.agent.actor).cpu().eval()

    # -- checkpoints ------------------------------------------------------------------------------------------
    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return self.agent.optimizers()

    def state_dict(self) -> dict:
        rng = rng_state(self.env)
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        d = {
            "actor_state_dict": {k: v.cpu() for k, v in self.agent.actor.state_dict().items()},
            "agent_state_dict": {k: v.cpu() for k, v in self.agent.state_dict().items()},
            "optimizer_state_dict": {k: _to_cpu(o.state_dict()) for k, o in self._optimizers().items()},
            "updates": self.agent.updates,
            "update_budget": self.update_budget,
            "iteration": self.iteration,
            "total_steps": self.total_steps,
            "train_time_s": self.train_time_s,
            "rng": rng,
            "algo": self.algo_cfg,
            "replay": {"file": REPLAY_FILE if self.cfg.save_replay else None, "transitions": len(self.buffer or ())},
            # the rings of a torchrun run's other ranks: replay_file(rank) each
            RECORD_KEY: self.record.to_dict(),
        }
        guidance = self.env.guidance_state()
        if guidance is not None:
            d["guidance"] = guidance
        return d

    def save(self, path: Path) -> None:
        """The replay ring first (replay.pt beside it, tagged with this iteration), then the model file."""
        path = Path(path)
        self._save_replay(path.parent)
        save_atomic(self.state_dict(), path)

    def _save_replay(self, folder: Path) -> None:
        if self.cfg.save_replay and self.buffer is not None:
            tag = {"iteration": self.iteration, "total_steps": self.total_steps}
            save_atomic({**tag, "buffer": self.buffer.state_dict()}, folder / replay_file(self.ranks.rank))

    def _checkpoint(self, name: str) -> None:
        """checkpoints/<name>: in a torchrun run every rank writes its own replay ring, then rank 0 the model file
        with every rank's RNG streams (gathering them waits for every ring, so the model file comes last)."""
        path = self.run_dir / "checkpoints" / name
        if not self.ranks.distributed:
            self.save(path)
            return
        self._save_replay(path.parent)
        rank_rngs = gather_objects(rng_state(self.env))
        if self.ranks.is_main:
            save_atomic({**self.state_dict(), "rank_rngs": rank_rngs}, path)

    def load(self, path: Path, fine_tune: bool = False) -> None:
        """Continue from a checkpoint (see the module docstring for what comes back of the replay buffer).
        fine_tune (a new run, init_from): networks and optimizer state come from the checkpoint, the learning
        rates are this run's configured ones, and the buffer starts empty."""
        path = Path(path)
        d = load_checkpoint(path, expect=self.record)
        try:
            self.agent.load_state_dict(d["agent_state_dict"], strict=True)
            for k, opt in self._optimizers().items():
                opt.load_state_dict(d["optimizer_state_dict"][k])
        except (RuntimeError, KeyError, ValueError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise CheckpointError(f"checkpoint {path} does not fit this run's networks: {first}") from None
        lrs = {"actor": self.cfg.actor_learning_rate, "critic": self.cfg.critic_learning_rate}
        lrs["alpha"] = self.cfg.alpha_learning_rate
        for k, opt in self._optimizers().items():
            for g in opt.param_groups:
                g["lr"] = lrs[k]
        self.agent.updates = int(d["updates"])
        self.update_budget = float(d["update_budget"])
        self.iteration = int(d["iteration"])
        self.total_steps = int(d["total_steps"])
        self.train_time_s = float(d["train_time_s"])
        restore_rngs(self.env, d, self.ranks, fine_tune)
        if "cuda" in d["rng"] and self.device.type == "cuda":
            torch.cuda.set_rng_state(d["rng"]["cuda"], self.device)
        restore_guidance(self.env, d)
        self.buffer = None  # a resume refills it from the replay file (learn() reads it), else from scratch
        self._pending_replay = None
        self.resume_note = "replay buffer: starts empty (a fine-tune)"
        if not fine_tune:
            self._pending_replay = path
            self.resume_note = "replay buffer: read from the replay file when training starts"

    def _restore_replay(self, path: Path) -> str:
        """The replay ring saved with the checkpoint at path (whose iteration and step count this trainer
        holds since load), or a warm restart (empty ring) saying why."""
        d = {"iteration": self.iteration, "total_steps": self.total_steps}
        name = replay_file(self.ranks.rank)
        replay = path.parent / name
        if not self.cfg.save_replay or not replay.is_file():
            return f"replay buffer: warm restart (no {name}), updates resume after learning_starts"
        r = read_data(replay)
        if not isinstance(r, dict) or r.get("iteration") != d["iteration"] or r.get("total_steps") != d["total_steps"]:
            return f"replay buffer: warm restart ({name} is not of iteration {d['iteration']})"
        try:
            self._ensure_buffer().load_state_dict(r["buffer"])
        except (KeyError, ValueError) as e:
            return f"replay buffer: warm restart ({e})"
        return f"replay buffer: {len(self.buffer):,} transitions restored"


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj

"""The batched env: episodes, resets, time-outs and logging around a task. Satisfies rsl_rl's VecEnv.

A task owns physics-specific work (state sampling, what its actions ask of the actuators, observations,
reward terms; its contract is sim/tasks/base.py); the env owns the step and the bookkeeping every task
shares, so task files stay one readable file per family. Each step runs the decimation loop
(step_control_period): the task's `controls(actions)` for the period, `substeps` physics steps under them
(an actuator model such as the Crazyflie firmware ticks before each), then the task's `after_physics()`.

step(actions) returns (observations, reward, dones, extras). A world whose episode ends is reset within
the same step, so the observations returned are already those of its next episode. extras holds
`time_outs` (n,) bool, `episode` (means of the ended episodes' terms and metrics, for logging) and, when
some episode ended, `final`: the ended worlds' `ids` with their outcome and term sums. With
EnvConfig.final_observation, extras also holds `final_observation`: the observations of the ended
worlds taken before their reset ({"policy": (len(ids), obs_dim), ...}), which a learner bootstrapping
time-outs needs. It is off by default because it costs one more observation pass on steps that end
episodes (and tasks that draw observation noise draw it again).

Every env the learners see (this one and the wrappers of robot_rl) also offers the GuidanceHooks
below, no-ops here; a wrapper that learns online (planned exploration) overrides them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tensordict import TensorDict

from sim.backends import load_model, make_backend
from sim.tasks.base import Controls

log = logging.getLogger("sim.env")


@dataclass
class EnvConfig:
    num_worlds: int = 1024
    seed: int = 0
    backend: str = "mujoco"
    nthread: int = 0  # 0: all cores
    device: str = "cpu"  # the backend's device (mjwarp: cpu, cuda, cuda:<n>); the env and task tensors live there
    capture_graph: bool = True  # mjwarp: replay each control period's substeps from a captured graph
    episode_length_s: float = 8.0
    randomization: str = "train"  # none | train | max
    obs_noise: bool = True
    action_latency: bool = True
    pushes: bool = True
    final_observation: bool = False  # extras["final_observation"]: ended episodes' observations before reset


class GuidanceHooks:
    """Hooks a learner calls on every env; no-ops here. A wrapper that learns online (planned exploration)
    overrides them."""

    learns_online = False  # True: guidance_state() changes during training and checkpoints carry it
    value_fn = None  # the learner sets it: critic values of observations (planned exploration reads it)

    def set_progress(self, env_steps: int, hold: bool = False) -> None:
        """Training progress in env steps (for guidance schedules), on resume and before evaluation (hold=True:
        the schedule stays there while the env steps, as the evaluated checkpoint had it)."""

    def guidance_state(self) -> dict | None:
        """What guidance learned online, to store in a checkpoint (None: nothing)."""
        return None

    def load_guidance_state(self, state: dict) -> None:
        """Restore guidance_state() from a checkpoint."""

    def save_guidance(self, out_dir) -> None:
        """Write what guidance learned (plans, statistics) into out_dir; nothing here."""


class BatchedEnv(GuidanceHooks):
    """reset() / step(actions) over num_worlds worlds of one task. Actions are in policy space [-1, 1]."""

    @property
    def gives_final_observation(self) -> bool:
        """Whether step's extras carry final_observation (EnvConfig.final_observation)."""
        return self.cfg.final_observation

    def __init__(self, task, cfg: EnvConfig):
        if cfg.randomization not in ("none", "train", "max"):
            raise ValueError(f"randomization must be none, train or max, not '{cfg.randomization}'")
        if cfg.num_worlds < 1:
            raise ValueError("num_worlds must be at least 1")
        self.cfg = cfg
        self.task = task
        self.num_envs = cfg.num_worlds
        self.num_actions = task.num_actions
        # called with the ended worlds' ids after their final observation, before their reset: a wrapper that adds
        # to the observations (the plan's state) takes its part of the final observation here
        self.episode_end_hooks: list[Callable[[torch.Tensor], None]] = []
        options = {"capture_graph": cfg.capture_graph} if cfg.backend == "mjwarp" else {}
        self.backend = make_backend(
            cfg.backend, load_model(task.model_path), cfg.num_worlds, nthread=cfg.nthread, device=cfg.device, **options
        )
        # everything the env and its task hold lives on the backend's device (the CPU for backend=mujoco), and so
        # does the generator every random draw takes
        self.device = self.backend.device
        self.rng = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.max_episode_length = int(math.ceil(cfg.episode_length_s / task.control_dt))
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.mujoco_resets = 0  # worlds MuJoCo reset after a diverged state (each ended its episode)
        task.attach(self.backend, cfg, self.rng)
        self._term_sums: dict[str, torch.Tensor] = {}
        self._sum_names: tuple[str, ...] | None = None  # the terms whose sums are rows of _sum_buf
        self.reward = None  # None: the task's own reward terms
        self.reset()

    def set_reward(self, reward) -> None:
        """Replace the task's reward by an object with terms() and reset(ids) (e.g. guidance rewards). The worlds
        keep their episodes (no reset draws from the env's generator), so runs that differ only in their reward
        see the same episodes; the new reward starts its state from where they are."""
        self.reward = reward
        self._term_sums = {}
        self._sum_names = None
        reward.reset(torch.arange(self.num_envs, device=self.device))

    @property
    def num_worlds(self) -> int:
        """Simulated worlds; a wrapper with one environment per robot has more environments than worlds."""
        return self.num_envs

    # rsl_rl VecEnv -----------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        return TensorDict(self.task.observations(), batch_size=[self.num_envs])

    def reset(self) -> TensorDict:
        self.reset_worlds(torch.arange(self.num_envs, device=self.device))
        return self.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        actions = torch.as_tensor(actions, dtype=torch.float64, device=self.device).reshape(
            self.num_envs, self.num_actions
        )
        # one reduction: a NaN or Inf anywhere makes the sum non-finite (an overflowing sum of finite actions only
        # costs the exact check)
        if not math.isfinite(actions.sum()) and not torch.all(torch.isfinite(actions)):
            raise ValueError("actions contain NaN or Inf")
        self.advance(self.task.controls(actions.clamp(-1.0, 1.0)))
        self.episode_length_buf += 1
        self.task.interval_events(self.episode_length_buf)

        terms = self.task.reward_terms() if self.reward is None else self.reward.terms()
        if tuple(terms) != self._sum_names:
            self._sum_rows(tuple(terms))
        stacked = (
            torch.stack(list(terms.values()))
            if terms
            else torch.zeros(0, self.num_envs, dtype=torch.float64, device=self.device)
        )
        reward = stacked.sum(dim=0)  # the terms added in order, as a loop of += would (to rounding)
        self._sum_buf += stacked  # every term's episode sum in one call
        terminated = self.task.terminated()
        diverged = self.backend.take_mujoco_resets()
        if diverged is not None:  # its state restarted mid-step: the episode is over, counted as a termination
            self.mujoco_resets += int(diverged.sum())
            log.warning(
                "MuJoCo reset %d diverged world(s) %s mid-step (%d in all): their episodes end here",
                int(diverged.sum()),
                diverged.nonzero().flatten()[:8].tolist(),
                self.mujoco_resets,
            )
            terminated = terminated | diverged
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        dones = terminated | time_outs

        extras: dict = {"time_outs": time_outs, "episode": {}}
        done_ids = dones.nonzero().flatten()
        if done_ids.numel():
            outcome = self.task.episode_outcome(done_ids, time_outs)
            extras["episode"] = self._episode_log(done_ids, terminated, outcome)
            extras["final"] = dict(outcome, ids=done_ids)
            extras["final"]["terms"] = {k: v[done_ids].clone() for k, v in self._term_sums.items()}
            if self.cfg.final_observation:
                extras["final_observation"] = {k: v[done_ids] for k, v in self.task.observations().items()}
            for hook in self.episode_end_hooks:
                hook(done_ids)
            self.reset_worlds(done_ids)
        return self.get_observations(), reward.float(), dones, extras

    # helpers ------------------------------------------------------------------------------------
    def _sum_rows(self, names: tuple[str, ...]) -> None:
        """Keep the episode sums of these terms as rows of one (terms, worlds) buffer; _term_sums maps each name
        to its row (terms no longer returned keep their sums)."""
        old = self._term_sums
        self._sum_buf = torch.stack(
            [old[k] if k in old else torch.zeros(self.num_envs, dtype=torch.float64, device=self.device) for k in names]
        )
        rows = dict(zip(names, self._sum_buf.unbind(0), strict=True))
        self._term_sums = {k: rows.get(k, v) for k, v in old.items()} | rows
        self._sum_names = names

    def _episode_log(self, ids: torch.Tensor, terminated: torch.Tensor, outcome: dict) -> dict:
        log = {}
        seconds = (self.episode_length_buf[ids].double() * self.task.control_dt).clamp(min=1e-6)
        for name, sums in self._term_sums.items():
            log[f"rew_{name}"] = (sums[ids] / seconds).mean()
        log.update({f"metric_{k}": v.mean() for k, v in outcome.items()})
        log["terminated_frac"] = terminated[ids].double().mean()
        return log

    def advance(self, controls: Controls) -> None:
        """One control period under these controls, without the episode bookkeeping of step() (the SITL
        helpers drive a robot in its own units this way)."""
        step_control_period(self.task, controls)

    def reset_worlds(self, ids: torch.Tensor) -> None:
        """Start new episodes in these worlds (SITL helpers place worlds this way, then override the state)."""
        self.backend.reset(ids)
        self.task.reset_worlds(ids)
        self.backend.forward(ids)
        if self.reward is not None:
            self.reward.reset(ids)
        self.episode_length_buf[ids] = 0
        for sums in self._term_sums.values():
            sums[ids] = 0.0

    def stagger_episodes(self) -> None:
        """Spread episode ends over the horizon so resets do not arrive in waves."""
        self.episode_length_buf[:] = torch.randint(
            0, self.max_episode_length, (self.num_envs,), generator=self.rng, device=self.device
        )

    def state_hash(self) -> str:
        import hashlib

        h = hashlib.sha256(self.backend.state_hash().encode())
        for t in self.task.controller_state() + [self.episode_length_buf]:
            h.update(t.contiguous().cpu().numpy().tobytes())
        return h.hexdigest()

    def close(self) -> None:
        self.backend.close()


class EnvWrapper(GuidanceHooks):
    """Base of the envs that wrap a BatchedEnv (self.env) for a learner: forwards what passes through."""

    env: BatchedEnv
    # a wrapper changes what the policy observes: its extras carry final observations only if it says so
    gives_final_observation = False

    def stagger_episodes(self) -> None:
        self.env.stagger_episodes()

    def state_hash(self) -> str:
        return self.env.state_hash()

    def close(self) -> None:
        self.env.close()


def sitl_env(task, seed: int, randomize: bool, action_latency: bool | None = None) -> BatchedEnv:
    """One world that never times out, as the SITL bridges step it: training randomization when randomize
    (action latency with it unless told), no observation noise or pushes (the bridge adds sensor noise)."""
    cfg = EnvConfig(
        num_worlds=1,
        seed=seed,
        nthread=1,
        episode_length_s=1e9,
        randomization="train" if randomize else "none",
        obs_noise=False,
        action_latency=randomize if action_latency is None else action_latency,
        pushes=False,
    )
    return BatchedEnv(task, cfg)


def step_control_period(task, controls: Controls) -> None:
    """The decimation loop: the task's substeps of physics under one period's controls, then its
    after_physics. A torch actuator model (per_substep) costs a backend call per substep; every other kind
    runs the period as one batch call."""
    backend, substeps = task.backend, task.substeps
    if controls.per_substep is not None:
        for k in range(substeps):
            backend.ctrl.copy_(controls.per_substep(k))
            backend.step(1, check_divergence=k == substeps - 1)  # once per period: a host sync on a GPU
    else:
        if controls.hold is not None:
            backend.ctrl.copy_(controls.hold)
        if controls.callback is not None:
            with controls.callback:
                backend.step(substeps)
        else:
            backend.step(substeps, ctrl=controls.schedule)
    task.after_physics()

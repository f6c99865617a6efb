"""Build a BatchedEnv from a composed config; PerDroneEnv: a swarm task's drones as PPO's environments."""

from __future__ import annotations

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from tensordict import TensorDict

from robot_rl.config import ConfigError
from robot_rl.schema import task_options
from sim.env import BatchedEnv, EnvConfig, EnvWrapper
from sim.tasks import TASKS, make_task


def make_env(
    cfg: DictConfig,
    num_worlds: int | None = None,
    seed: int | None = None,
    randomization: str | None = None,
    obs_noise: bool | None = None,
    action_latency: bool | None = None,
    pushes: bool | None = None,
    nthread: int | None = None,
    final_observation: bool = False,
) -> BatchedEnv:
    t = cfg.task
    torch.set_num_threads(int(cfg.backend.get("torch_threads", 1)))
    try:  # the task dataclasses refuse bad options with ValueError (TypeError: an option they lack)
        if t.name not in TASKS:
            raise ValueError(f"unknown task '{t.name}' (available: {', '.join(sorted(TASKS))})")
        task = make_task(t.name, action_mode=t.action_mode, **task_options(t.name, t.get("params")))
    except (TypeError, ValueError, OmegaConfBaseException) as e:
        raise ConfigError(f"task {t.name}: {e}") from None
    device = str(cfg.backend.get("device", "cpu"))
    pick = lambda v, default: default if v is None else v  # noqa: E731
    env_cfg = EnvConfig(
        num_worlds=int(pick(num_worlds, t.num_worlds)),
        seed=int(pick(seed, cfg.seed)),
        backend=cfg.backend.name,
        nthread=int(pick(nthread, cfg.backend.nthread)),
        device=device,
        capture_graph=bool(cfg.backend.get("capture_graph", True)),
        episode_length_s=float(t.episode_length_s),
        randomization=str(pick(randomization, t.randomization)),
        obs_noise=bool(pick(obs_noise, t.obs_noise)),
        action_latency=bool(pick(action_latency, t.action_latency)),
        pushes=bool(pick(pushes, t.pushes)),
        final_observation=final_observation,  # off-policy learners bootstrap time-outs from it
    )
    env = BatchedEnv(task, env_cfg)
    try:  # options that do not fit the task (per_drone on one drone, a plan without layouts) are ValueErrors
        if cfg.get("algo") is not None and cfg.algo.get("per_drone", False):
            env = PerDroneEnv(env)
        g = cfg.get("guidance")
        if g is not None and g.name == "plan":  # the plan controller is part of the env the policy acts in
            from robot_rl.guidance.plan.config import plan_config
            from robot_rl.guidance.plan.guided_env import PlanGuidedEnv

            env = PlanGuidedEnv(env, plan_config(OmegaConf.to_container(g, resolve=True)))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return env


class PerDroneEnv(EnvWrapper):
    """A swarm env seen by PPO as one environment per drone: per-drone credit assignment.

    The team env (W worlds, N drones) gives PPO one reward per world, the team mean, so every drone's
    actions are judged by the whole team's luck: a drone that brakes well in front of a wall gets the
    same advantage as one that hits it. Here each drone is an environment of its own (W * N of them,
    drone-major within a world): its own observation (D), its own reward (the task's per-drone terms),
    and a critic that sees its own observation and clearance followed by the whole team's critic
    observation (a centralised value of the drone's return). The weights stay shared: the actor is the
    per-drone network applied to one drone (num_drones = 1), the same weights a team actor uses.

    A world's episode ends for all its drones at once (resets are per world); extras["final"] carries
    each drone's own outcome (success, collisions, goal error), so evaluation counts drone-episodes.
    """

    def __init__(self, env: BatchedEnv):
        task = env.task
        if task.team is None:
            raise ValueError(f"algo.per_drone needs a multi-drone task (crazyflie_swarm), not '{task.name}'")
        self.env, self.task = env, task
        self.drones = int(task.num_drones)
        self.num_worlds = env.num_envs
        self.num_envs = env.num_envs * self.drones
        self.num_actions = env.num_actions // self.drones
        self.max_episode_length = env.max_episode_length
        self.rng = env.rng
        self.device = env.device
        self.cfg = env.cfg

    def _split(self, obs) -> TensorDict:
        W, N = self.num_worlds, self.drones
        policy = obs["policy"].reshape(W * N, -1)
        team = obs["critic"]
        per_drone = team[:, : policy.shape[1] * N].reshape(W, N, -1)
        clearance = team[:, policy.shape[1] * N :].reshape(W, N, -1)
        critic = torch.cat([per_drone, clearance, team.unsqueeze(1).expand(W, N, -1)], -1).reshape(W * N, -1)
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[W * N])

    def get_observations(self) -> TensorDict:
        return self._split(self.env.get_observations())

    def reset(self) -> TensorDict:
        return self._split(self.env.reset())

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        N = self.drones
        obs, _, dones, extras = self.env.step(actions.reshape(self.num_worlds, -1))
        # each drone's own terms, computed before the done worlds were reset; summed here, so a team run pays nothing
        reward = torch.stack(list(self.task.drone_terms.values())).sum(0).reshape(-1).float()
        out = {"time_outs": extras["time_outs"].repeat_interleave(N), "episode": extras["episode"]}
        if "final" in extras:
            world_ids = extras["final"]["ids"]
            drone = self.task.final_drone_outcome
            final = {k: v.reshape(-1) for k, v in drone.items()}
            final["ids"] = (world_ids.unsqueeze(1) * N + torch.arange(N)).reshape(-1)
            final["terms"] = {k: v.repeat_interleave(N) for k, v in extras["final"]["terms"].items()}  # team sums
            out["final"] = final
        return self._split(obs), reward, dones.repeat_interleave(N), out

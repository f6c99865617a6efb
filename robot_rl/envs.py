"""Build a BatchedEnv from a composed config."""

from __future__ import annotations

import torch
from omegaconf import DictConfig, OmegaConf

from sim.env import BatchedEnv, EnvConfig
from sim.tasks import make_task


def make_env(
    cfg: DictConfig,
    num_worlds: int | None = None,
    seed: int | None = None,
    randomization: str | None = None,
    obs_noise: bool | None = None,
    action_latency: bool | None = None,
    pushes: bool | None = None,
    nthread: int | None = None,
) -> BatchedEnv:
    t = cfg.task
    torch.set_num_threads(int(cfg.backend.get("torch_threads", 1)))
    params = t.get("params")
    params = OmegaConf.to_container(params, resolve=True) if params else {}
    task = make_task(t.name, action_mode=t.action_mode, **params)
    pick = lambda v, default: default if v is None else v  # noqa: E731
    env_cfg = EnvConfig(
        num_worlds=int(pick(num_worlds, t.num_worlds)),
        seed=int(pick(seed, cfg.seed)),
        backend=cfg.backend.name,
        nthread=int(pick(nthread, cfg.backend.nthread)),
        episode_length_s=float(t.episode_length_s),
        randomization=str(pick(randomization, t.randomization)),
        obs_noise=bool(pick(obs_noise, t.obs_noise)),
        action_latency=bool(pick(action_latency, t.action_latency)),
        pushes=bool(pick(pushes, t.pushes)),
    )
    env = BatchedEnv(task, env_cfg)
    g = cfg.get("guidance")
    if g is not None and g.name == "plan":  # the plan controller is part of the env the policy acts in
        from robot_rl.guidance.planned_exploration import PlanGuidedEnv, plan_config

        env = PlanGuidedEnv(env, plan_config(OmegaConf.to_container(g, resolve=True)))
    return env

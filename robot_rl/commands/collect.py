"""robot-rl collect: record a run's policy acting in its task as prior data for the off-policy learners.

    robot-rl collect run=DIR [episodes=64] [policy=trained|zero|plan] [noise=0.0] [checkpoint=FILE] [out=PATH]
                     [plan_reads=simulator|perceived]

Episodes run on the run's task as it trained (its randomization, sensing and reward: a keypoint run's rewards
are its keypoint reward), from seed eval.seed + 1 (fixed, and apart from the evaluation's), until `episodes`
have ended; each gets its success label. policy=plan demonstrates with the plan controller of `guidance=plan`
(oracle planner, its default settings) on an arm task in ee_position or ee_pose mode: the recorded actions are
the ones the controller applied, in the task's own action space, so a learner without the plan reads them; plan_reads=
perceived has the controller read the task's noisy raw state, as the learner observes it (default simulator: the
true state, which the learner sees only through its sensor noise). The dataset
format is robot_rl/training/off_policy/prior_data.py's (`<out>.npz` + `<out>.json`); train with it by
`robot-rl train algo=td3 algo.prior_data=<out>.npz`.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from tqdm import tqdm

from robot_rl.commands.common import load_actor, run_config, split_options
from robot_rl.commands.train import attach_guidance
from robot_rl.config import ConfigError
from robot_rl.envs import make_env
from robot_rl.training.checkpoint import latest_checkpoint
from robot_rl.training.off_policy.prior_data import EpisodeLabels, write_dataset
from robot_rl.training.off_policy.replay import ReplayBuffer
from robot_rl.training.off_policy.trainer import next_observations

COLLECT_POLICIES = ("trained", "zero", "plan")
PLAN_READS = ("simulator", "perceived")


def cmd_collect(args: list[str]) -> dict:
    opts, overrides = split_options(args, ("run", "episodes", "policy", "noise", "checkpoint", "out", "plan_reads"))
    if "run" not in opts:
        raise ConfigError("collect needs run=<run directory> (its task and policy)")
    try:
        episodes, noise = int(opts.get("episodes", 64)), float(opts.get("noise", 0.0))
    except ValueError:
        raise ConfigError("collect: episodes= is an integer and noise= a number") from None
    policy, checkpoint, out = opts.get("policy", "trained"), opts.get("checkpoint"), opts.get("out")
    plan_reads = opts.get("plan_reads", "simulator")
    if "plan_reads" in opts and policy != "plan":
        raise ConfigError(f"collect plan_reads= is the plan controller's: policy=plan, not policy={policy}")
    return collect_run(Path(opts["run"]), overrides, episodes, policy, noise, checkpoint, out, plan_reads)


def collect_run(
    run_dir: Path,
    overrides: list[str] = (),
    episodes: int = 64,
    policy: str = "trained",
    noise: float = 0.0,
    checkpoint: str | None = None,
    out: str | Path | None = None,
    plan_reads: str = "simulator",
) -> dict:
    """Record `episodes` episodes; returns the dataset's description (its JSON)."""
    if policy not in COLLECT_POLICIES:
        raise ConfigError(f"collect policy= is 'trained' (default), 'zero' or 'plan', not '{policy}'")
    if plan_reads not in PLAN_READS:
        raise ConfigError(f"collect plan_reads= is 'simulator' (default) or 'perceived', not '{plan_reads}'")
    if episodes < 1 or not (math.isfinite(noise) and noise >= 0):
        raise ConfigError(f"collect: episodes={episodes} must be >= 1 and noise={noise} a number >= 0")
    cfg = run_config(run_dir, list(overrides))
    worlds = min(episodes, int(cfg.task.num_worlds))
    seed = int(cfg.eval.seed) + 1
    env = make_env(cfg, num_worlds=worlds, seed=seed, final_observation=True)
    if not env.gives_final_observation:
        raise ConfigError("collect records final observations; the per-drone env does not give them yet")
    attach_guidance(cfg, env, None)  # the run's reward (KAGI's keypoint reward) labels the transitions
    actor = plan = None
    source = {"run": run_dir.name, "policy": policy, "noise": noise}
    if policy == "trained":
        path = Path(checkpoint) if checkpoint else latest_checkpoint(run_dir)
        actor, _ = load_actor(cfg, run_dir, str(path))
        source["checkpoint"] = path.name
    elif policy == "plan":
        plan = plan_demonstrator(env, perceived=plan_reads == "perceived")
        source["plan"] = {"planner": plan.cfg.planner, "approach_gain": plan.cfg.approach_gain, "reads": plan_reads}
    generator = torch.Generator().manual_seed(seed)
    obs = env.get_observations()
    groups = ("policy", "critic") if "critic" in obs.keys() else ("policy",)
    obs_dim = obs["policy"].shape[1]
    critic_dim = obs["critic"].shape[1] if "critic" in groups else None
    max_steps = math.ceil(episodes / worlds) * env.max_episode_length + 1
    ring = ReplayBuffer(max_steps * worlds, worlds, obs_dim, env.num_actions, critic_dim)
    labels = EpisodeLabels(worlds)
    ended = 0
    with tqdm(total=episodes, desc="collect", unit="ep", dynamic_ncols=True) as bar, torch.inference_mode():
        for _ in range(max_steps):
            if plan is not None:  # the controller; noise= is its residual; the applied action is the record
                residual = noise * torch.randn(worlds, plan.num_actions, generator=generator)
                _, rewards, dones, extras = plan.step(residual)
                actions = plan.last_action.float()
                next_obs = env.get_observations()
                if "final_observation" in extras:  # the plain env's columns: the plan appends its own after them
                    final = {g: v[:, : next_obs[g].shape[1]] for g, v in extras["final_observation"].items()}
                    extras = {**extras, "final_observation": final}
            elif policy == "zero":
                actions = torch.zeros(worlds, env.num_actions)
                next_obs, rewards, dones, extras = env.step(actions)
            else:
                actions = actor(obs).float()
                if noise > 0:
                    actions = actions + noise * torch.randn(actions.shape, generator=generator)
                actions = actions.clamp(-1.0, 1.0)
                next_obs, rewards, dones, extras = env.step(actions)
            true_next = next_observations(next_obs, dones, extras, groups)
            step = {
                "obs": obs["policy"].float(),
                "next_obs": true_next["policy"].float(),
                "actions": actions,
                "rewards": rewards.float(),
                "done": dones,
                "terminated": dones & ~extras["time_outs"],
            }
            if critic_dim is not None:
                step.update(critic_obs=obs["critic"].float(), next_critic_obs=true_next["critic"].float())
            ring.add(**step)
            labels.record(rewards, dones, extras)
            obs = next_obs
            n = int(dones.sum())
            ended += n
            bar.update(min(n, episodes - bar.n))
            if ended >= episodes:
                break
    task = env.task
    meta = {
        "task": task.name,
        "robot": task.robot,
        "action_mode": task.action_mode,
        "num_actions": env.num_actions,
        "obs_dim": obs_dim,
        "critic_obs_dim": critic_dim,
        "observation": [{"name": t["name"], "dim": t["dim"]} for t in task.obs_layout],
        "source": source,
        "seed": seed,
        "randomization": str(cfg.task.randomization),
    }
    target = Path(out) if out else run_dir / "datasets" / f"{policy}_{episodes}"
    meta = write_dataset(target, ring, labels, meta)
    e = meta["episodes"]
    print(
        f"collected {target.with_suffix('.npz')}: {meta['transitions']:,} transitions, {e['finished']} episodes "
        f"({e['successful']} successful)"
    )
    return meta


def plan_demonstrator(env, perceived: bool = False):
    """The plan controller of guidance=plan (its defaults, oracle planner, constant gains) around env, whose
    actions it then takes: a scripted demonstrator of the arm tasks. perceived: it reads the task's noisy raw
    state (guidance.perceived_state), else the simulator's."""
    from robot_rl.guidance.plan.config import plan_config
    from robot_rl.guidance.plan.guided_env import PlanGuidedEnv

    try:
        cfg = plan_config({"planner": "oracle", "anneal_env_steps": 0, "perceived_state": perceived})
        return PlanGuidedEnv(env, cfg)
    except ValueError as e:
        raise ConfigError(f"collect policy=plan: {e}") from None

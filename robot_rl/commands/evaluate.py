"""robot-rl eval: a run's policy (trained, zero residual or corrected plan) over fixed-seed episodes."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from omegaconf import open_dict

from robot_rl.commands.common import index_run, load_actor, run_config, split_options
from robot_rl.config import ConfigError
from robot_rl.envs import make_env
from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint, task_record
from robot_rl.training.run_dir import (
    write_json_atomic,
)

EVAL_POLICIES = ("trained", "zero", "corrected_plan")


def cmd_eval(args: list[str]) -> dict:
    opts, overrides = split_options(args, ("run", "checkpoint", "bundle", "name", "policy"))
    if "run" not in opts:
        raise ConfigError("eval needs run=<run directory>")
    return evaluate_run(
        Path(opts["run"]),
        overrides,
        opts.get("checkpoint"),
        opts.get("bundle", "false").lower() == "true",
        opts.get("name"),
        opts.get("policy", "trained"),
    )


def evaluation_env(cfg, guidance: bool = True):
    """The evaluation's env: one world per episode, the fixed eval seed and conditions (cfg.eval). Built the same
    way, it replays an evaluation exactly (play episode=). guidance=False leaves out a plan controller (a
    plan-guided bundle brings its own)."""
    e = cfg.eval
    if not guidance and cfg.get("guidance") is not None:
        cfg = cfg.copy()
        with open_dict(cfg):
            cfg.guidance = None
    return make_env(
        cfg,
        num_worlds=int(e.episodes),
        seed=int(e.seed),
        randomization=str(e.randomization),
        obs_noise=bool(e.obs_noise),
        action_latency=bool(e.action_latency),
        pushes=bool(e.pushes),
    )


def evaluate_run(
    run_dir: Path,
    overrides: list[str] = (),
    checkpoint: str | None = None,
    use_bundle: bool = False,
    name: str | None = None,
    policy: str = "trained",
) -> dict:
    """Evaluate a run's policy (its checkpoint, or its exported bundle through the deploy runtime).

    policy 'trained': the run's policy. 'zero': act with zeros instead; for a plan-guided run that is the plan
    alone (k * a_rl = 0) with the plan's options as a fresh run has them. 'corrected_plan': zeros too, with
    the options as the checkpoint's online correction left them (the corrected plan without the residual).
    """
    from robot_rl.evaluation.evaluate import deploy_policy, evaluate, swarm_deploy_policy, torch_policy
    from robot_rl.training.ppo_trainer import restore_guidance

    if policy not in EVAL_POLICIES:
        raise ConfigError(f"eval policy= is 'trained' (default), 'zero' or 'corrected_plan', not '{policy}'")
    kind = policy if policy != "trained" else "bundle" if use_bundle else "checkpoint"
    cfg = run_config(run_dir, list(overrides))
    e = cfg.eval
    if kind in ("zero", "corrected_plan"):
        env = evaluation_env(cfg)
        act = lambda env: torch.zeros(env.num_envs, env.num_actions)  # noqa: E731
    elif kind == "bundle":
        from robot_rl.deploy import PolicyRuntime

        runtime = PolicyRuntime(run_dir / "bundle")
        env = evaluation_env(cfg, guidance=runtime.plan is None)  # a plan-guided bundle runs its own plan
        swarm = "swarm" in runtime.bundle.extra  # one drone's policy: every drone of every world runs it
        act = swarm_deploy_policy(runtime, int(e.seed)) if swarm else deploy_policy(runtime)
    else:
        env = evaluation_env(cfg)
        actor, _ = load_actor(cfg, run_dir, checkpoint)
        act = torch_policy(actor)
    path = Path(checkpoint) if checkpoint else latest_checkpoint(run_dir)
    if env.learns_online and kind != "zero":  # the options as the checkpoint left them
        restore_guidance(env, load_checkpoint(path, expect=task_record(env.task)), evaluation=True)
    # what was evaluated: the checkpoint (a bundle records the one it was exported from), or none for zero actions
    evaluated = _relative(path, run_dir) if kind in ("checkpoint", "corrected_plan") else None
    if kind == "bundle":
        evaluated = _bundle_source(run_dir / "bundle")
    t0 = time.perf_counter()
    result = evaluate(env, act, progress=True)
    name = name or f"{kind}_{e.randomization}"
    result.update(
        name=name,
        task=cfg.task.name,
        randomization=str(e.randomization),
        seed=int(e.seed),
        policy={"zero": "zero", "corrected_plan": "zero", "bundle": "onnx", "checkpoint": "torch"}[kind],
        conditions={"obs_noise": bool(e.obs_noise), "action_latency": bool(e.action_latency), "pushes": bool(e.pushes)},
        checkpoint=evaluated,
        wall_time_s=round(time.perf_counter() - t0, 2),
    )
    (run_dir / "eval").mkdir(exist_ok=True)
    write_json_atomic(run_dir / "eval" / f"{name}.json", result)
    m = result["metrics"]
    lo, hi = m["success_ci95"]
    print(
        f"eval {name}: success {m['success_rate']:.3f} (Wilson 95% [{lo:.3f}, {hi:.3f}], lower bound {lo:.3f}) "
        f"over {result['episodes']} episodes; crash rate {m['crash_rate']:.3f}; "
        f"final position error {m['position_error_m'] * 100:.1f} cm"
    )
    index_run(Path(cfg.runs_root), run_dir)
    return result


def _relative(path: Path, run_dir: Path) -> str:
    try:
        return str(path.resolve().relative_to(run_dir.resolve()))
    except ValueError:
        return str(path)


def _bundle_source(bundle_dir: Path) -> str | None:
    """The checkpoint a bundle was exported from, as its policy.yaml's source records it."""
    import yaml

    try:
        source = (yaml.safe_load((bundle_dir / "policy.yaml").read_text()) or {}).get("source") or {}
    except (OSError, yaml.YAMLError):
        return None
    return source.get("checkpoint") if isinstance(source, dict) else None

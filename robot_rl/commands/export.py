"""robot-rl export: a run's actor as an ONNX bundle the deploy runtime reads."""

from __future__ import annotations

from pathlib import Path

from robot_rl.commands.common import index_run, load_actor, run_config, split_options
from robot_rl.config import ConfigError
from robot_rl.training.checkpoint import latest_checkpoint
from robot_rl.training.run_dir import (
    git_revision,
    now_iso,
    package_versions,
    read_meta,
)

FORMATS = ("bundle", "leapp")


def cmd_export(args: list[str]) -> Path:
    opts, overrides = split_options(args, ("run", "checkpoint", "format"))
    if "run" not in opts:
        raise ConfigError("export needs run=<run directory>")
    if overrides:  # the bundle is the trained policy as it is: nothing to override
        raise ConfigError(f"export takes run=, checkpoint= and format=, not {overrides[0].split('=')[0]}=")
    fmt = opts.get("format", "bundle")
    if fmt not in FORMATS:
        raise ConfigError(f"format={fmt}: one of {', '.join(FORMATS)}")
    return export_run(Path(opts["run"]), opts.get("checkpoint"), leapp=fmt == "leapp")


def export_run(run_dir: Path, checkpoint: str | None = None, leapp: bool = False) -> Path:
    from robot_rl.deploy import load_bundle
    from robot_rl.export.bundle_export import export_bundle

    cfg = run_config(run_dir, [])
    actor, env = load_actor(cfg, run_dir, checkpoint)
    plan = None
    if cfg.get("guidance") is not None and cfg.guidance.name == "plan":
        from robot_rl.export.plan_export import plan_spec

        if leapp:
            raise ConfigError("format=leapp: a LEAPP pipeline carries the network only, not the plan controller")
        try:
            plan = plan_spec(env)  # the bundle carries the plan controller the policy's residual acts on
        except ValueError as e:
            raise ConfigError(str(e)) from None
    meta = read_meta(run_dir)
    source = {
        "run": run_dir.name,
        "checkpoint": str(checkpoint or latest_checkpoint(run_dir).name),
        "git_revision": meta.get("git_revision", git_revision()),
        "versions": package_versions(),
        "exported_at": now_iso(),
    }
    bundle = export_bundle(actor, env.task, run_dir / "bundle", source, plan=plan)
    load_bundle(bundle.path)  # what a robot will do first: refuse a bundle that does not validate
    with_plan = f", with the plan controller and {len(plan.plans)} plans" if plan is not None else ""
    print(
        f"exported {bundle.path}/policy.onnx + policy.yaml ({bundle.obs_dim} obs -> {bundle.action_dim} "
        f"{bundle.action.mode} actions at {bundle.control_rate_hz:.0f} Hz{with_plan})"
    )
    if leapp:
        pipeline = export_leapp_pipeline(actor, env, run_dir / "leapp")
        print(f"exported {pipeline} (LEAPP pipeline, validated by leapp against the traced policy)")
    index_run(Path(cfg.runs_root), run_dir)
    return bundle.path


def export_leapp_pipeline(actor, env, out_dir: Path) -> Path:
    """Trace the policy with leapp on the task's first reset state (any valid state does: the trace records ops)."""
    try:
        import leapp  # noqa: F401  (an optional extra)
    except ImportError as e:
        raise ConfigError(f"format=leapp needs the leapp package (pip install 'robot-rl[interop]'): {e}") from None
    from robot_rl.export.leapp_export import export_leapp

    env.reset()
    raw = {k: v[:1].numpy() for k, v in env.task.last_raw.items()}
    try:
        return export_leapp(actor, env.task, raw, out_dir)
    except ValueError as e:
        raise ConfigError(str(e)) from None

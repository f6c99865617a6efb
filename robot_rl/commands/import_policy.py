"""robot-rl import: a policy exported by another tool (a LEAPP pipeline, an mjlab ONNX) -> one of our bundles."""

from __future__ import annotations

from pathlib import Path

from robot_rl.config import ConfigError
from robot_rl.interop.conventions import TARGETS
from robot_rl.interop.errors import InteropError

KEYS = ("robot", "out", "rate_hz")


def _parse(args: list[str]) -> tuple[Path, dict[str, str]]:
    paths = [a for a in args if "=" not in a]
    opts = {}
    for a in args:
        if "=" in a:
            k, v = a.split("=", 1)
            if k not in (*KEYS, "path"):
                raise ConfigError(f"import takes a path and {', '.join(k + '=' for k in KEYS)}, not {k}=")
            opts[k] = v
    if "path" in opts:
        paths.append(opts.pop("path"))
    if len(paths) != 1:
        raise ConfigError(
            "usage: robot-rl import <LEAPP pipeline .yaml or its directory | mjlab .onnx> "
            f"[robot={'|'.join(TARGETS)}] [out=DIR] [rate_hz=HZ]"
        )
    return Path(paths[0]), opts


def _rate(opts: dict[str, str]) -> float | None:
    if "rate_hz" not in opts:
        return None
    try:
        rate = float(opts["rate_hz"])
    except ValueError:
        raise ConfigError(f"rate_hz={opts['rate_hz']!r} is not a number") from None
    if not 0 < rate < 10_000:
        raise ConfigError(f"rate_hz={rate:g} must be in (0, 10000)")
    return rate


def _default_robot(source: Path) -> str:
    """Without robot=: the robot a LEAPP pipeline's configs name, where it is one of ours; else go1_like."""
    if source.suffix != ".onnx":
        from robot_rl.interop.leapp_pipeline import read_pipeline

        named = read_pipeline(source).configs.get("robot")
        if named in TARGETS:
            return str(named)
    return "go1_like"


def cmd_import(args: list[str]) -> Path:
    source, opts = _parse(args)
    if not source.exists():
        raise InteropError(f"{source} does not exist")
    robot_name = opts.get("robot") or _default_robot(source)
    if robot_name not in TARGETS:
        raise ConfigError(f"robot={robot_name}: import maps onto {', '.join(TARGETS)} only")
    robot = TARGETS[robot_name]
    out = Path(opts["out"]) if "out" in opts else source.parent / f"{source.stem}_bundle"
    if source.suffix == ".onnx":
        from robot_rl.interop.mjlab_import import import_mjlab

        if not robot.joint_names:
            raise InteropError(f"{source}: mjlab exports joint position policies; {robot.robot} has no joints")
        bundle = import_mjlab(source, robot, out, _rate(opts))
        kind = "mjlab ONNX"
    else:
        from robot_rl.interop.leapp_import import import_leapp

        bundle = import_leapp(source, robot, out, _rate(opts))
        kind = "LEAPP pipeline"
    state = f", {len(bundle.state)} recurrent state(s)" if bundle.state else ""
    print(
        f"imported {kind} {source} -> {bundle.path}/policy.onnx + policy.yaml ({bundle.robot}: {bundle.obs_dim} obs "
        f"from {len(bundle.observation)} raw inputs -> {bundle.action_dim} {bundle.action.mode} actions at "
        f"{bundle.control_rate_hz:g} Hz{state})"
    )
    return bundle.path

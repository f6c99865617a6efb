"""robot-rl sysid: fit the simulator to robot logs (MCAP) with mujoco.sysid: a Crazyflie's flights, an arm's
joint_states and forward position controller commands, or a quadruped's joint_states, odom and Go1 low-level
joint_commands (the log's topics tell which)."""

from __future__ import annotations

from pathlib import Path

from robot_rl.commands.common import split_options
from robot_rl.config import ConfigError

OPTIONS = ("log", "out", "runs_root", "mass_kg", "namespace", "horizon_s", "max_iters")


def _float(opts: dict, key: str, default: float, lo: float, hi: float) -> float:
    try:
        value = float(opts.get(key, default))
    except ValueError:
        value = float("nan")
    if not lo < value <= hi:
        raise ConfigError(f"sysid {key}={opts.get(key)!r} is out of range: allowed a number in ({lo}, {hi}]")
    return value


def sim2real_dir(logs: list, opts: dict) -> Path:
    """Where a log's replay and fit go: out=, or by default where the dashboard's sim-vs-real page looks,
    <runs_root>/sim2real/<the first log's name>/ (runs_root= as for train, default runs)."""
    if opts.get("out"):
        return Path(opts["out"])
    return Path(opts.get("runs_root") or "runs") / "sim2real" / Path(logs[0].source).stem


def read_logs(opts: dict, verb: str) -> list:
    """The comma-separated log= files, read and aligned; LogError (a ConfigError) names the bad one."""
    from robot_rl.sim2real.flight_log import LogError, read_flight_log

    if not opts.get("log"):
        raise ConfigError(f"{verb} needs log=<flight.mcap>[,<more.mcap>]")
    try:
        return [read_flight_log(p, opts.get("namespace")) for p in opts["log"].split(",")]
    except LogError as e:
        raise ConfigError(str(e)) from None


def read_joint_logs(opts: dict) -> tuple[str, list] | None:
    """The log= files read as a legged or arm robot's when the first one is ("quadruped": joint_states, odom
    and a Go1 low-level command topic; "arm": joint_states and forward position controller commands), as
    (robot, logs); None for any other log (the Crazyflie's reader takes it, and refuses what it cannot)."""
    from robot_rl.sim2real.arm_log import is_arm_log, read_arm_log
    from robot_rl.sim2real.log_common import LogError, log_topics
    from robot_rl.sim2real.quadruped_log import is_quadruped_log, read_quadruped_log

    if not opts.get("log"):
        return None
    paths = opts["log"].split(",")
    topics = log_topics(paths[0])
    readers = (("quadruped", is_quadruped_log, read_quadruped_log), ("arm", is_arm_log, read_arm_log))
    for robot, is_robot_log, read in readers:
        if is_robot_log(topics):
            try:
                return robot, [read(p, opts.get("namespace")) for p in paths]
            except LogError as e:
                raise ConfigError(str(e)) from None
    return None


def _print_fit(result, horizon_s: float) -> None:
    print(f"{result.windows} windows of {horizon_s} s; cost {result.cost_nominal:.4g} -> {result.cost_fitted:.4g}")
    print(f"{'parameter':<16}{'nominal':>10}{'fitted':>11}   95% interval")
    for name, e in result.estimates.items():
        lo, hi = e.interval
        note = "" if e.fitted else f"   ({e.how})"
        print(f"{name:<16}{e.nominal:>10.4g}{e.value:>11.4g}   [{lo:.4g}, {hi:.4g}]{note}")


def _print_logs(logs: list) -> None:
    for log in logs:
        print(f"{log.source}: {log.duration_s:.1f} s")
        for line in log.report.lines():
            print(f"  {line}")


def _sysid_joints(robot: str, logs: list, opts: dict) -> dict:
    """Fit an arm's or a quadruped's logs (the same options: horizon and iterations; no weighed mass)."""
    if robot == "quadruped":
        from robot_rl.sim2real.quadruped_sysid import SysidOptions, write_fit
        from robot_rl.sim2real.quadruped_sysid import fit_quadruped as fit
    else:
        from robot_rl.sim2real.arm_sysid import SysidOptions, write_fit
        from robot_rl.sim2real.arm_sysid import fit_arm as fit

    if "mass_kg" in opts:
        fitted = " (its payload is fitted)" if robot == "quadruped" else ""
        raise ConfigError(f"sysid mass_kg= is a Crazyflie's weighed mass; this log is a {robot}'s{fitted}")
    options = SysidOptions(
        horizon_s=_float(opts, "horizon_s", SysidOptions.horizon_s, 0.0, 5.0),
        max_iters=int(_float(opts, "max_iters", SysidOptions.max_iters, 0, 1000)),
    )
    hint = "; train on it with task.params.sysid="
    return _fit_and_write(fit, write_fit, logs, options, opts, hint)


def _fit_and_write(fit, write_fit, logs: list, options, opts: dict, hint: str) -> dict:
    """Fit, write sysid.yaml and report.html, print the table; a fit that cannot be made is a ConfigError."""
    _print_logs(logs)
    try:
        result = fit(logs, options, progress=lambda s: print(f"  {s}", flush=True))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    out_dir = sim2real_dir(logs, opts)
    path = write_fit(result, out_dir, logs, options)
    _print_fit(result, options.horizon_s)
    print(f"wrote {path} and {out_dir / 'report.html'}{hint + str(path) if hint else ''}")
    return {"path": str(path), "result": result}


def cmd_sysid(args: list[str]) -> dict:
    from robot_rl.sim2real.crazyflie_sysid import SysidOptions, fit_crazyflie, write_fit

    opts, rest = split_options(args, OPTIONS)
    if rest:
        raise ConfigError(f"sysid takes {', '.join(o + '=' for o in OPTIONS)} not {rest[0].split('=')[0]}=")
    joint_logs = read_joint_logs(opts)
    if joint_logs is not None:
        return _sysid_joints(*joint_logs, opts)
    logs = read_logs(opts, "sysid")
    options = SysidOptions(
        mass_kg=_float(opts, "mass_kg", SysidOptions.mass_kg, 0.0, 1.0),
        horizon_s=_float(opts, "horizon_s", SysidOptions.horizon_s, 0.0, 5.0),
        max_iters=int(_float(opts, "max_iters", SysidOptions.max_iters, 0, 1000)),
    )
    options.stride_s = options.horizon_s
    return _fit_and_write(fit_crazyflie, write_fit, logs, options, opts, "; train on it with task.params.sysid=")

"""robot-rl sysid: fit the simulated Crazyflie to flight logs (MCAP) with mujoco.sysid."""

from __future__ import annotations

from pathlib import Path

from robot_rl.commands.common import split_options
from robot_rl.config import ConfigError

OPTIONS = ("log", "out", "mass_kg", "namespace", "horizon_s", "max_iters")


def _float(opts: dict, key: str, default: float, lo: float, hi: float) -> float:
    try:
        value = float(opts.get(key, default))
    except ValueError:
        value = float("nan")
    if not lo < value <= hi:
        raise ConfigError(f"sysid {key}={opts.get(key)!r} is out of range: allowed a number in ({lo}, {hi}]")
    return value


def sim2real_dir(logs: list) -> Path:
    """Where a log's replay and fit go by default, and where the dashboard's sim-vs-real page looks:
    runs/sim2real/<the first log's name>/."""
    return Path("runs") / "sim2real" / Path(logs[0].source).stem


def read_logs(opts: dict, verb: str) -> list:
    """The comma-separated log= files, read and aligned; LogError (a ConfigError) names the bad one."""
    from robot_rl.sim2real.flight_log import LogError, read_flight_log

    if not opts.get("log"):
        raise ConfigError(f"{verb} needs log=<flight.mcap>[,<more.mcap>]")
    try:
        return [read_flight_log(p, opts.get("namespace")) for p in opts["log"].split(",")]
    except LogError as e:
        raise ConfigError(str(e)) from None


def cmd_sysid(args: list[str]) -> dict:
    from robot_rl.sim2real.crazyflie_sysid import SysidOptions, fit_crazyflie, write_fit

    opts, rest = split_options(args, OPTIONS)
    if rest:
        raise ConfigError(f"sysid takes {', '.join(o + '=' for o in OPTIONS)} not {rest[0].split('=')[0]}=")
    logs = read_logs(opts, "sysid")
    options = SysidOptions(
        mass_kg=_float(opts, "mass_kg", SysidOptions.mass_kg, 0.0, 1.0),
        horizon_s=_float(opts, "horizon_s", SysidOptions.horizon_s, 0.0, 5.0),
        max_iters=int(_float(opts, "max_iters", SysidOptions.max_iters, 0, 1000)),
    )
    options.stride_s = options.horizon_s
    for log in logs:
        print(f"{log.source}: {log.duration_s:.1f} s")
        for line in log.report.lines():
            print(f"  {line}")
    try:
        result = fit_crazyflie(logs, options, progress=lambda s: print(f"  {s}", flush=True))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    out = Path(opts["out"]) if "out" in opts else sim2real_dir(logs)
    path = write_fit(result, out, logs, options)
    print(
        f"{result.windows} windows of {options.horizon_s} s; cost {result.cost_nominal:.4g} -> {result.cost_fitted:.4g}"
    )
    print(f"{'parameter':<16}{'nominal':>10}{'fitted':>11}   95% interval")
    for name, e in result.estimates.items():
        lo, hi = e.interval
        note = "" if e.fitted else f"   ({e.how})"
        print(f"{name:<16}{e.nominal:>10.4g}{e.value:>11.4g}   [{lo:.4g}, {hi:.4g}]{note}")
    print(f"wrote {path} and {out / 'report.html'}; train on it with task.params.sysid={path}")
    return {"path": str(path), "result": result}

"""robot-rl sitl: fly a bundle in software-in-the-loop simulation."""

from __future__ import annotations

from pathlib import Path

from robot_rl.commands.common import split_options
from robot_rl.config import ConfigError
from robot_rl.sitl_flight import fly_recorded_sitl, fly_sitl


def cmd_sitl(args: list[str]) -> dict:
    opts, rest = split_options(args, ("bundle", "seconds", "ros", "out", "record", "physical", "layout"))
    if rest:
        raise ConfigError(
            f"sitl takes bundle=, seconds=, ros=, out=, record=, physical= and layout=, not {rest[0].split('=')[0]}="
        )
    try:
        layout = int(opts.get("layout", 0))
    except ValueError:
        raise ConfigError(f"sitl layout={opts['layout']!r} is not a layout number") from None
    if "bundle" not in opts:
        raise ConfigError("sitl needs bundle=<bundle directory>")
    try:
        seconds = float(opts.get("seconds", 10.0))
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 3600:
        raise ConfigError(f"sitl seconds={opts['seconds']!r} is out of range: allowed a number in (0, 3600]")
    if opts.get("ros", "auto") not in ("auto", "true", "false"):
        raise ConfigError(f"sitl ros={opts['ros']!r} is not allowed: one of auto, true, false")
    if "record" in opts or "physical" in opts:
        if opts.get("ros", "auto") == "false":
            raise ConfigError("sitl record= and physical= fly through the ROS 2 nodes: not with ros=false")
        return fly_recorded_sitl(
            Path(opts["bundle"]), Path(opts.get("record", "flight.mcap")), seconds, opts.get("physical")
        )
    return fly_sitl(
        Path(opts["bundle"]), seconds, opts.get("ros", "auto"), Path(opts["out"]) if "out" in opts else None, layout
    )

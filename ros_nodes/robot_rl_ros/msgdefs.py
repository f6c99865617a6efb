"""Full ROS 2 message definitions ('ros2msg' schemas, as rosbag2 writes them into MCAP).

A definition is the type's .msg text followed by each type it uses, separated by a line of '='
and 'MSG: pkg/Name', found in the share/ folders of the ROS install (AMENT_PREFIX_PATH, and this
Python's prefix where the PyPI wheels put them).
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache
from pathlib import Path

PRIMITIVES = {
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
    "int32", "uint32", "int64", "uint64", "string", "wstring",
}  # fmt: skip
SEPARATOR = "=" * 80


def _prefixes() -> list[Path]:
    out = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return out + [Path(sys.prefix)]


@cache
def msg_text(full_type: str) -> str:
    """'nav_msgs/msg/Odometry' or 'nav_msgs/Odometry' -> the .msg file's text."""
    pkg, _, name = full_type.replace("/msg/", "/").partition("/")
    for prefix in _prefixes():
        f = prefix / "share" / pkg / "msg" / f"{name}.msg"
        if f.is_file():
            return f.read_text()
    raise FileNotFoundError(f"no {pkg}/msg/{name}.msg under {[str(p) for p in _prefixes()]}")


def dependencies(full_type: str) -> list[str]:
    """Types ('pkg/Name') that a message's fields use, directly."""
    pkg = full_type.split("/")[0]
    out = []
    for line in msg_text(full_type).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or re.match(r"^\S+\s+\w+\s*=", line):
            continue  # blank, comment or constant
        ftype = re.sub(r"\[.*?\]$", "", line.split()[0])
        ftype = re.sub(r"<=\d+$", "", ftype)
        if ftype in PRIMITIVES:
            continue
        if ftype == "Header":
            ftype = "std_msgs/Header"
        elif "/" not in ftype:
            ftype = f"{pkg}/{ftype}"
        out.append(ftype.replace("/msg/", "/"))
    return list(dict.fromkeys(out))


@cache
def full_definition(full_type: str) -> str:
    """The concatenated definition of a type and everything it uses (depth first, each once)."""
    root = full_type.replace("/msg/", "/")
    seen: list[str] = []
    stack = list(reversed(dependencies(root)))
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.append(t)
        stack.extend(reversed(dependencies(t)))
    parts = [msg_text(root).rstrip("\n")]
    for t in seen:
        parts.append(f"{SEPARATOR}\nMSG: {t}\n{msg_text(t).rstrip(chr(10))}")
    return "\n".join(parts) + "\n"

"""A `robot-rl sysid` parameters file read back: each fitted parameter's estimate and 95% interval, for the
tasks that centre their domain randomization on a fit (task.params.sysid=)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import yaml


def read_fit(path: str | Path, robot: str, names: tuple[str, ...], label: str) -> dict[str, tuple[float, float, float]]:
    """sysid.yaml -> name -> (value, low, high); a clear ValueError naming the file for one that is not a fit of
    `robot` (label: how the error names it), an unknown parameter or an estimate outside its interval."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"sysid file {path}: {type(e).__name__}: {e}") from None
    if not isinstance(doc, dict) or doc.get("robot") != robot or not isinstance(doc.get("parameters"), dict):
        raise ValueError(f"sysid file {path}: not a{'n' if label[0] in 'aeiou' else ''} {label} fit "
                         f"(robot: {robot} and parameters: expected)")  # fmt: skip
    out = {}
    for name, entry in doc["parameters"].items():
        if name not in names:
            raise ValueError(f"sysid file {path}: unknown parameter {name!r}")
        try:
            value, (lo, hi) = float(entry["value"]), (float(x) for x in entry["interval"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"sysid file {path}: {name} needs value and interval [low, high]") from None
        if not (math.isfinite(value) and lo <= value <= hi):
            raise ValueError(f"sysid file {path}: {name} = {value} outside its interval [{lo}, {hi}]")
        out[name] = (value, lo, hi)
    return out


def span(fit: dict[str, tuple[float, float, float]], name: str, floor: float) -> tuple[float, float]:
    """A fitted parameter's randomization range: its interval, widened to at least `floor` (a fraction of the
    value) either side: a fit is of one robot on one day."""
    value, lo, hi = fit[name]
    return min(lo, value - floor * value), max(hi, value + floor * value)


def params_from_mapping(cls, values: Mapping, label: str):
    """A robot's parameters dataclass `cls` from a mapping of some of its fields (floats); a clear ValueError names
    an unknown key (label: how it names the robot). The class checks the values itself."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {label} parameter(s) {unknown}; known: {sorted(known)}")
    return cls(**{k: float(v) for k, v in values.items()})

"""Learning curves across seeds: runs grouped by configuration, each group's mean and 95 % band.

A configuration is a run's config.yaml without what only names or places the run (its seed, name,
runs root, resume and init_from sources, progress and checkpoint cadence, evaluation and play
settings). A group's curve is drawn on a common grid over the x range every one of its seeds
reached, from each seed's (optionally smoothed) series interpolated onto it; the band is the t-based
95 % interval of the mean across seeds (a single seed: its own line, no band).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robot_rl.store.stats import mean_ci95

# x axis name -> the scalar that gives each iteration's x (None: the iteration itself)
X_AXES: dict[str, str | None] = {
    "steps": "Perf/total_env_steps",
    "time": "Perf/train_time_s",
    "iteration": None,
}
X_LABELS = {"steps": "env steps", "time": "training wall time (s)", "iteration": "iteration"}
NOT_CONFIGURATION = frozenset(
    {"seed", "run_name", "runs_root", "resume", "resume_finished", "init_from", "train.progress", "train.save_every"}
)
NOT_CONFIGURATION_PREFIXES = ("eval.", "play.", "hydra.")
GRID_POINTS = 100
MAX_RUNS = 64


@dataclass(frozen=True)
class Group:
    label: str
    runs: list[str]
    points: list[list[float]]  # [x, mean, lo, hi]
    n_with_data: int  # seeds that logged the tag (a seed with no finite value yet is left out)

    @property
    def n_seeds(self) -> int:
        return len(self.runs)


def configuration(config_flat: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What makes two runs the same configuration (see the module docstring)."""
    return tuple(
        sorted(
            (k, v)
            for k, v in config_flat.items()
            if k not in NOT_CONFIGURATION and not k.startswith(NOT_CONFIGURATION_PREFIXES)
        )
    )


def group_runs(configs: Mapping[str, Mapping[str, str]]) -> list[tuple[str, list[str]]]:
    """(label, run names) per configuration, in the order first seen; the label names the settings
    in which the groups differ (``key=value, ...``), or is ``all runs`` when there is one group."""
    groups: dict[tuple, list[str]] = {}
    for name, flat in configs.items():
        groups.setdefault(configuration(flat), []).append(name)
    keys = list(groups)
    if len(keys) == 1:
        return [("all runs", groups[keys[0]])]
    dicts = [dict(k) for k in keys]
    differing = sorted({k for d in dicts for k in d if len({x.get(k) for x in dicts}) > 1})
    labels = [", ".join(f"{k}={d.get(k, '—')}" for k in differing) for d in dicts]
    return [(label, groups[key]) for label, key in zip(labels, keys, strict=True)]


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's exponential moving average, debiased so the first points are not pulled to 0."""
    if weight <= 0.0 or values.size == 0:
        return values
    out = np.empty_like(values)
    acc, norm = 0.0, 0.0
    for i, v in enumerate(values):
        acc = weight * acc + (1.0 - weight) * v
        norm = weight * norm + (1.0 - weight)
        out[i] = acc / norm
    return out


def run_series(tags: Mapping[str, Sequence[Sequence[float]]], tag: str, x_axis: str) -> tuple[np.ndarray, np.ndarray]:
    """One run's (x, y) of ``tag`` against ``x_axis``, at the iterations both were logged, x ascending."""
    y_by_it = {int(s): float(v) for s, v in tags.get(tag, [])}
    x_tag = X_AXES[x_axis]
    x_by_it = (
        {it: float(it + 1) for it in y_by_it} if x_tag is None else {int(s): float(v) for s, v in tags.get(x_tag, [])}
    )
    its = sorted(set(y_by_it) & set(x_by_it))
    x = np.array([x_by_it[i] for i in its], dtype=np.float64)
    y = np.array([y_by_it[i] for i in its], dtype=np.float64)
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def group_curve(
    series: Sequence[tuple[np.ndarray, np.ndarray]], weight: float, bounds: tuple[float, float] = (-math.inf, math.inf)
) -> list[list[float]]:
    """[x, mean, lo, hi] on GRID_POINTS over the x range all seeds cover (empty if they do not overlap); the band
    is clipped to ``bounds``."""
    series = [(x, smooth(y, weight)) for x, y in series if x.size]
    if not series:
        return []
    if len(series) == 1:
        x, y = series[0]
        return [[float(a), float(b), float(b), float(b)] for a, b in zip(x, y, strict=True)]
    lo_x, hi_x = max(float(x[0]) for x, _ in series), min(float(x[-1]) for x, _ in series)
    if hi_x < lo_x:
        return []
    grid = np.linspace(lo_x, hi_x, GRID_POINTS) if hi_x > lo_x else np.array([lo_x])
    ys = np.stack([np.interp(grid, x, y) for x, y in series])
    out = []
    for i, gx in enumerate(grid):
        mean, lo, hi = mean_ci95(ys[:, i].tolist(), *bounds)
        out.append([float(gx), mean, lo, hi])
    return out


def curves(
    configs: Mapping[str, Mapping[str, str]],
    scalars: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    tag: str,
    x_axis: str,
    weight: float,
) -> list[Group]:
    """Each configuration's curve of ``tag``: configs and scalars (tag -> [[iteration, value]]) by run name. A rate
    (a tag naming success or crash) has its band clipped to [0, 1]."""
    bounds = (0.0, 1.0) if any(w in tag.lower() for w in ("success", "crash")) else (-math.inf, math.inf)
    out = []
    for label, names in group_runs(configs):
        series = [run_series(scalars.get(n, {}), tag, x_axis) for n in names]
        out.append(Group(label, names, group_curve(series, weight, bounds), sum(x.size > 0 for x, _ in series)))
    return out


def curves_csv(groups: Sequence[Group], tag: str, x_axis: str) -> str:
    """One row per group and grid point: group, seeds (with data), runs, x, mean, lo, hi."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["group", "n_seeds", "n_with_data", "runs", f"x ({X_LABELS[x_axis]})", f"mean {tag}", "ci95_lo", "ci95_hi"]
    )
    for g in groups:
        for x, mean, lo, hi in g.points:
            w.writerow([g.label, g.n_seeds, g.n_with_data, " ".join(g.runs), repr(x), repr(mean), repr(lo), repr(hi)])
    return buf.getvalue()

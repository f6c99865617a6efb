"""Confidence intervals used by the store and the leaderboard (stdlib only)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Two-sided 95 % Student t critical values for 1..30 degrees of freedom: a leaderboard row
# usually has 3-5 seeds, where the normal approximation would understate the interval a lot.
_T95 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]


def _t_interval(n: int, mean: float, var: float, lo: float, hi: float) -> tuple[float, float, float]:
    """``mean`` with the t-based 95 % interval of ``n`` (at least 2) values of variance ``var``."""
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    half = t * math.sqrt(var / n)
    return (mean, max(lo, mean - half), min(hi, mean + half))


def wilson_ci95(successes: float, n: int) -> tuple[float, float]:
    """Wilson score interval for a success rate; sensible at 0 % and 100 % unlike Wald's."""
    if n <= 0:
        return (0.0, 1.0)
    z = 1.959963984540054
    p = min(max(successes / n, 0.0), 1.0)
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_ci95(values: Sequence[float], lo: float = 0.0, hi: float = 1.0) -> tuple[float, float, float]:
    """Mean and a t-based 95 % interval across seeds, clipped to [lo, hi]."""
    n = len(values)
    if n == 0:
        return (math.nan, lo, hi)
    mean = sum(values) / n
    if n == 1:
        return (mean, lo, hi)
    return _t_interval(n, mean, sum((v - mean) ** 2 for v in values) / (n - 1), lo, hi)


def mean_ci95_from_sums(
    n: int, total: float, total_sq: float, lo: float = 0.0, hi: float = 1.0
) -> tuple[float, float, float]:
    """``mean_ci95`` from a count, a sum and a sum of squares (what SQL aggregates return)."""
    if n <= 0:
        return (math.nan, lo, hi)
    mean = total / n
    if n == 1:
        return (mean, lo, hi)
    # One-pass variance; rates lie in [0, 1], so cancellation costs nothing visible, and a
    # rounding residue below zero is clamped.
    return _t_interval(n, mean, max(0.0, (total_sq - n * mean * mean) / (n - 1)), lo, hi)

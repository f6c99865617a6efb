"""Compute latency and period jitter of a periodic callback, measured on the monotonic clock."""

from __future__ import annotations

import time

import numpy as np


class LatencyStats:
    """Record callback entry and exit; report latency and period jitter separately.

    A deadline is missed when a period exceeds `miss_factor` times the nominal period.
    """

    def __init__(self, period_s: float, capacity: int = 200_000, miss_factor: float = 1.5):
        self.period_s = period_s
        self.miss_factor = miss_factor
        self._lat = np.zeros(capacity)
        self._per = np.zeros(capacity)
        self._n_lat = 0
        self._n_per = 0
        self._last_entry: float | None = None
        self.missed = 0

    def enter(self) -> float:
        t = time.perf_counter()
        if self._last_entry is not None:
            period = t - self._last_entry
            if self._n_per < self._per.size:
                self._per[self._n_per] = period
                self._n_per += 1
            if period > self.miss_factor * self.period_s:
                self.missed += 1
        self._last_entry = t
        return t

    def exit(self, t_enter: float) -> float:
        lat = time.perf_counter() - t_enter
        if self._n_lat < self._lat.size:
            self._lat[self._n_lat] = lat
            self._n_lat += 1
        return lat

    def summary(self) -> dict[str, float]:
        lat = self._lat[: self._n_lat]
        per = self._per[: self._n_per]
        out = {"samples": float(self._n_lat), "missed_deadlines": float(self.missed)}
        if lat.size:
            out.update(
                latency_p50_ms=float(np.percentile(lat, 50) * 1e3),
                latency_p99_ms=float(np.percentile(lat, 99) * 1e3),
                latency_max_ms=float(lat.max() * 1e3),
            )
        if per.size:
            jitter = np.abs(per - self.period_s)
            out.update(
                period_mean_ms=float(per.mean() * 1e3),
                jitter_p50_ms=float(np.percentile(jitter, 50) * 1e3),
                jitter_p99_ms=float(np.percentile(jitter, 99) * 1e3),
                period_max_ms=float(per.max() * 1e3),
            )
        return out

"""Neighbour broadcasts as a swarm policy heard them in training, rebuilt from the other drones' odometry.

In sim.tasks.crazyflie_swarm every drone broadcasts [position, velocity] every 1 / rate_hz seconds and the
others receive it latency_s late: between broadcast instants t_b = origin + n / rate_hz a drone holds the
neighbour's state measured at t_b - latency_s. Here each neighbour's odometry is kept for a short while and
the same sample is picked by its stamp, so a node on /clock sees what the simulated radio would have
delivered. A neighbour whose newest odometry is older than max_age_s is not heard (absent).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np


@dataclass
class NeighbourBroadcasts:
    rate_hz: float
    latency_s: float
    max_age_s: float
    origin_s: float | None = None  # the first broadcast instant; None: the first stamp heard
    history_s: float = 1.0
    max_future_s: float = 0.05  # a stamp further ahead of the node's clock is a glitch, never the newest
    _samples: dict[str, deque] = field(default_factory=dict)

    def on_state(self, name: str, stamp: float, now: float, position, velocity) -> str | None:
        """A neighbour's odometry sample (stamp and now in seconds on the node's clock); returns why it
        was dropped, or None."""
        if stamp - now > self.max_future_s:
            return f"neighbour '{name}': stamp {(stamp - now) * 1e3:.0f} ms ahead of this node's clock"
        q = self._samples.setdefault(name, deque())
        if q and stamp <= q[-1][0]:
            return f"neighbour '{name}': out-of-order stamp"  # the newest sample wins, as the input monitors do
        if self.origin_s is None:
            self.origin_s = stamp
        q.append((stamp, np.concatenate([np.asarray(position, float), np.asarray(velocity, float)])))
        while len(q) > 1 and q[1][0] <= stamp - self.history_s:
            q.popleft()
        return None

    def broadcast_instant(self, now: float) -> float:
        period = 1.0 / self.rate_hz
        n = math.floor((now - self.origin_s) / period + 1e-6)  # 1e-6: stamps are sums of 10 ms steps
        return self.origin_s + max(n, 0) * period

    def received(self, now: float) -> tuple[np.ndarray, list[str]]:
        """(M, 6) received states [p, v] of the neighbours heard now, and the names of those not heard."""
        out, missing = [], []
        for name, q in self._samples.items():
            if not q or now - q[-1][0] > self.max_age_s:
                missing.append(name)
                continue
            due = self.broadcast_instant(now) - self.latency_s + 1e-6
            older = [s for t, s in q if t <= due]
            out.append(older[-1] if older else q[0][1])  # before the first delivery: the first state heard
        return np.array(out, dtype=np.float64).reshape(-1, 6), missing

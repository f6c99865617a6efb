"""Per-input freshness and ordering, judged by the message's own header stamp."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class InputMonitor:
    """Accepts a message only if its stamp is newer than the last accepted one and not too old.

    Stamps and `now` are seconds on the same clock (ROS time: wall or simulated).
    """

    name: str
    max_age_s: float
    last_stamp: float | None = None
    last_receipt: float | None = None
    accepted: int = 0
    dropped_out_of_order: int = 0
    dropped_stale: int = 0
    dropped_nonfinite: int = 0

    def accept(self, stamp: float, now: float) -> str | None:
        """None if accepted, else a one-line reason why the message was dropped."""
        if self.last_stamp is not None and stamp <= self.last_stamp:
            self.dropped_out_of_order += 1
            return f"{self.name}: out-of-order stamp {stamp:.3f} <= {self.last_stamp:.3f}"
        age = now - stamp
        if age > self.max_age_s:
            self.dropped_stale += 1
            return f"{self.name}: message {age * 1e3:.0f} ms old > {self.max_age_s * 1e3:.0f} ms"
        self.last_stamp = stamp
        self.last_receipt = now
        self.accepted += 1
        return None

    def reject_nonfinite(self) -> str:
        self.dropped_nonfinite += 1
        return f"{self.name}: non-finite values rejected"

    def age(self, now: float) -> float:
        """Age of the newest accepted sample by its stamp (inf before the first)."""
        return float("inf") if self.last_stamp is None else now - self.last_stamp

    def fresh(self, now: float) -> bool:
        return self.age(now) <= self.max_age_s

    def counters(self) -> dict[str, int]:
        return {
            f"{self.name}.accepted": self.accepted,
            f"{self.name}.dropped_out_of_order": self.dropped_out_of_order,
            f"{self.name}.dropped_stale": self.dropped_stale,
            f"{self.name}.dropped_nonfinite": self.dropped_nonfinite,
        }

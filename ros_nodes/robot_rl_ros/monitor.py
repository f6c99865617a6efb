"""Per-input freshness and ordering, judged by the message's own header stamp and by the receiving
node's clock.

A stamp is evidence, not truth: one glitched stamp must never become the reference that later,
correct messages are judged against. So a stamp too far ahead of the receiver's clock is rejected on
its own (and does not move `last_stamp`), a stamp far behind it is stale, and freshness also needs a
recent *receipt* of an accepted message, so a run of rejected messages is itself a stale input.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class InputMonitor:
    """Accepts a message only if its stamp is newer than the last accepted one, not too old and not
    ahead of the receiver's clock by more than max_future_s.

    Stamps and `now` are seconds on the same clock (ROS time: wall or simulated). max_future_s covers
    clock skew between machines and, in lock-step simulation, a state that arrives just before the
    /clock sample of its own step.
    """

    name: str
    max_age_s: float
    max_future_s: float = 0.05
    last_stamp: float | None = None
    last_receipt: float | None = None
    accepted: int = 0
    dropped_out_of_order: int = 0
    dropped_stale: int = 0
    dropped_future: int = 0
    dropped_nonfinite: int = 0
    rejected_in_row: int = 0

    def accept(self, stamp: float, now: float) -> str | None:
        """None if accepted, else a one-line reason why the message was dropped."""
        why = self._judge(stamp, now)
        if why is not None:
            self.rejected_in_row += 1
            return why
        self.last_stamp = stamp
        self.last_receipt = now
        self.accepted += 1
        self.rejected_in_row = 0
        return None

    def _judge(self, stamp: float, now: float) -> str | None:
        ahead = stamp - now
        if ahead > self.max_future_s:
            self.dropped_future += 1
            limit = self.max_future_s * 1e3
            return f"{self.name}: stamp {ahead * 1e3:.0f} ms ahead of this node's clock > {limit:.0f} ms"
        if self.last_stamp is not None and stamp <= self.last_stamp:
            self.dropped_out_of_order += 1
            return f"{self.name}: out-of-order stamp {stamp:.3f} <= {self.last_stamp:.3f}"
        if -ahead > self.max_age_s:
            self.dropped_stale += 1
            return f"{self.name}: message {-ahead * 1e3:.0f} ms old > {self.max_age_s * 1e3:.0f} ms"
        return None

    def reject_nonfinite(self) -> str:
        self.dropped_nonfinite += 1
        self.rejected_in_row += 1
        return f"{self.name}: non-finite values rejected"

    def reject(self, reason: str) -> str:
        """A message refused for its content (e.g. a non-unit quaternion): counted like the others."""
        self.rejected_in_row += 1
        return f"{self.name}: {reason}"

    def age(self, now: float) -> float:
        """How old the newest accepted sample is: the larger of its stamp's age and the time since it was
        received on this node's clock (inf before the first)."""
        if self.last_stamp is None or self.last_receipt is None:
            return float("inf")
        return max(now - self.last_stamp, now - self.last_receipt)

    def fresh(self, now: float) -> bool:
        return self.age(now) <= self.max_age_s

    def counters(self) -> dict[str, int]:
        return {
            f"{self.name}.accepted": self.accepted,
            f"{self.name}.dropped_out_of_order": self.dropped_out_of_order,
            f"{self.name}.dropped_stale": self.dropped_stale,
            f"{self.name}.dropped_future": self.dropped_future,
            f"{self.name}.dropped_nonfinite": self.dropped_nonfinite,
            f"{self.name}.rejected_in_row": self.rejected_in_row,
        }


@dataclass
class CommanderWatch:
    """Who else publishes the robot's command topic, as the graph says: a fault while anyone does, and until
    the graph has shown nobody else for `clear_checks` checks in a row (a loaded machine's DDS graph cache
    drops an endpoint for one query now and then: measured in CI, a second commander vanished for one 0.1 s
    check, the node armed, and the next check found it again)."""

    clear_checks: int = 10
    conflict: str | None = None  # the current fault's reason, None while the safety node is alone
    checks_with_conflict: int = 0
    clean_checks: int = 0  # checks in a row without another publisher since the last conflict
    # why the graph may not show every publisher yet (discovery still settling); blocks arming
    settling: str | None = None

    @property
    def blocker(self) -> str | None:
        """What keeps the robot from arming: another commander (also while it may be gone), or a graph not yet
        settled."""
        if self.conflict and self.clean_checks:
            return f"{self.conflict} (not seen for {self.clean_checks} of {self.clear_checks} graph checks)"
        return self.conflict or self.settling

    def update(self, topic: str, others: list[str], settling: str | None = None) -> str | None:
        """Record a graph check; returns the reason when a conflict appears or changes (to act on once)."""
        self.settling = settling
        if not others:
            if self.conflict is not None:
                self.clean_checks += 1
                if self.clean_checks >= self.clear_checks:
                    self.conflict, self.clean_checks = None, 0
            return None
        self.clean_checks = 0
        reason = f"second publisher on {topic}: {', '.join(others)}"
        self.checks_with_conflict += 1
        new = reason != self.conflict
        self.conflict = reason
        return reason if new else None

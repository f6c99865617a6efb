"""The safety supervisors' event log: mode changes and interventions, bounded, read by the diagnostics
publisher through a cursor (the total ever recorded) that stays valid when old events are dropped."""

from __future__ import annotations


class EventLog:
    def __init__(self, keep: int = 1000):
        self.latest: list = []  # the newest `keep` events, oldest first
        self.total = 0  # events ever recorded: a reader's cursor
        self.keep = keep

    def append(self, event) -> None:
        self.latest.append(event)
        self.total += 1
        del self.latest[: -self.keep]  # bounded memory on long runs

    def since(self, cursor: int) -> list:
        """The events recorded after a reader's cursor (an earlier `total`) that are still kept."""
        n = min(self.total - cursor, len(self.latest))
        return self.latest[len(self.latest) - n :]

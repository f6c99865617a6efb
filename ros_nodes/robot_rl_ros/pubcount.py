"""Count what a process publishes, per topic, so a recording can be checked against it.

Enabled by ROBOT_RL_COUNT_PUBLISHED=1 (tests and recordings set it); `run_node` then prints one
line `published {"topic": n, ...}` when the node stops.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter

from rclpy.publisher import Publisher

ENV = "ROBOT_RL_COUNT_PUBLISHED"
_counts: Counter = Counter()
_lock = threading.Lock()
_installed = False


def enabled() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def install() -> None:
    """Wrap Publisher.publish once per process."""
    global _installed
    if _installed:
        return
    original = Publisher.publish

    def publish(self, msg) -> None:
        original(self, msg)
        with _lock:
            _counts[self.topic_name] += 1

    Publisher.publish = publish
    _installed = True


def report() -> str:
    with _lock:
        return "published " + json.dumps(dict(_counts), sort_keys=True)

"""An independent subscriber that checks every robot command it sees against the limits.

It runs in its own rclpy context (its own DDS participant), shares nothing with the nodes under
test or the harness that plays the robot, and keeps the commands of all fault tests of a session
so one assertion can cover them all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import rclpy
from geometry_msgs.msg import Twist
from harness import wait_for
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from robot_rl_ros import qos
from robot_rl_ros.limits import DroneLimits
from robot_rl_ros.msgs import twist_to_rpyt


def out_of_limits(cmd: np.ndarray, lim: DroneLimits) -> str | None:
    """None if the command is inside the limits, else why not (one line)."""
    if not np.all(np.isfinite(cmd)):
        return f"non-finite command {cmd.tolist()}"
    if np.any(cmd < lim.low - 1e-6) or np.any(cmd > lim.high + 1e-6):
        return f"command {cmd.round(3).tolist()} outside box"
    if np.hypot(cmd[0], cmd[1]) > lim.max_tilt_deg + 1e-6:
        return f"command tilt {np.hypot(cmd[0], cmd[1]):.2f} deg > {lim.max_tilt_deg} deg"
    return None


@dataclass
class LimitLedger:
    """What all watchers of a session saw."""

    limits: DroneLimits = field(default_factory=DroneLimits)
    seen: int = 0
    violations: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


class LimitWatcher:
    def __init__(self, domain_id: int, ledger: LimitLedger, namespace: str = "cf1", label: str = ""):
        self.ledger = ledger
        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain_id)
        self.node = rclpy.create_node("limit_watcher", namespace=f"/{namespace}", context=self.ctx)
        self.commands: list[tuple[float, np.ndarray]] = []  # (DDS reception stamp, system clock s; rpyt)
        self.node.create_subscription(Twist, "cmd_vel_legacy", self._on_cmd, qos.COMMAND)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self._stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()
        ledger.sources.append(label or f"domain {domain_id}")

    def _spin(self) -> None:
        while not self._stop and self.ctx.ok():
            self.ex.spin_once(timeout_sec=0.01)

    def now(self) -> float:
        """System time in seconds, the clock of the reception stamps (this node does not use sim time)."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_cmd(self, msg: Twist, info: dict) -> None:
        # The DDS layer stamps reception in its own thread: the time does not wait for this Python
        # thread to get the GIL from the test's others.
        cmd = twist_to_rpyt(msg)
        self.commands.append((info["received_timestamp"] * 1e-9, cmd))
        self.ledger.seen += 1
        why = out_of_limits(cmd, self.ledger.limits)
        if why:
            self.ledger.violations.append(why)

    def first_after(self, t: float, pred) -> float | None:
        """ROS time of the first command received at or after t that satisfies pred(rpyt)."""
        return next((tc for tc, c in list(self.commands) if tc >= t and pred(c)), None)

    def max_gap(self, t0: float, t1: float) -> float:
        t = [tc for tc, _ in list(self.commands) if t0 <= tc <= t1]
        return float(np.max(np.diff(t))) if len(t) > 1 else float("inf")

    def wait_for(self, cond, timeout: float) -> bool:
        return wait_for(cond, timeout, poll_s=0.002)

    def close(self) -> None:
        self._stop = True
        self.thread.join(2.0)
        self.ex.shutdown()
        self.node.destroy_node()
        self.ctx.try_shutdown()

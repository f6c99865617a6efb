"""What every simulator bridge shares: lock-step or wall-clock stepping, /clock, and holding time
until the state topic has its readers.

Lock-step: each command advances the simulation by one step (a command published before the current state was
published answers an earlier state, a keep-alive having stepped the world meanwhile: it replaces the target and
does not step, so the loop never runs a step behind); when no command comes within
step_timeout_s of wall time the bridge steps anyway (as time goes on for a real robot), and it
publishes /clock so nodes with use_sim_time run on simulated time. Wall clock: a timer steps at
the simulator's rate. A subclass sets `self.sim` (with `.time`) and `self.state_pub` (or overrides
`subscriber_count`) before calling
`start_stepping`, and implements `advance()` (one step with the current command) and
`publish_state(stamp_s)`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from rosgraph_msgs.msg import Clock

from robot_rl_ros import qos
from robot_rl_ros.msgs import s_to_stamp

BASE_PARAMS = {
    "lockstep": True,
    "step_timeout_s": 0.02,  # lock-step: step anyway when no command came within this wall time
    "seed": 0,
    "randomize": False,
    "clock_offset_s": 1.0,  # ROS time 0 means 'unset' to some tools, so simulated time starts here
    # Lock-step: hold time (publish nothing) until the state topic has this many subscribers, so a
    # recorder or policy that is still being discovered misses no state.
    "start_after_subscribers": 0,
    # Commands are taken only from this node's stream ('' : from anyone), see robot_rl_ros.commander.
    "commander": "safety",
}


def physical_params(text: str) -> dict | None:
    """A bridge's physical_params parameter (JSON of name: value, the hidden parameters of a "real" robot for
    sim-to-real tests) as a dict; None for ''. ValueError for text that is not a JSON object."""
    import json

    try:
        physical = json.loads(text) if text.strip() else None
    except json.JSONDecodeError as e:
        raise ValueError(f"physical_params is not JSON: {e}") from None
    if physical is not None and not isinstance(physical, dict):
        raise ValueError("physical_params must be a JSON object of parameter: value")
    return physical


def schedule_param(values: list[float], what: str) -> np.ndarray:
    """A flat list parameter of triples in turn (a target schedule, an operator's commands) as (n, 3); [0.0], the
    parameter's default (a ROS list needs a type), is none. ValueError when the count is not a multiple of 3."""
    flat = [float(x) for x in values] if len(values) > 1 else []
    if len(flat) % 3:
        raise ValueError(f"{what} holds {len(flat)} numbers, not triples")
    return np.array(flat).reshape(-1, 3)


def scheduled(schedule: np.ndarray, sim_time_s: float, hold_s: float) -> np.ndarray:
    """The row of a schedule in effect at simulated time sim_time_s, each row held hold_s, then the last."""
    return schedule[min(len(schedule) - 1, int(sim_time_s / hold_s + 1e-9))]


def scheduled_point(schedule: np.ndarray, sim_time_s: float, hold_s: float, stamp: Time, frame_id: str = ""):
    """The schedule's row in effect (scheduled) as a PointStamped of the step stamped `stamp`: an operator's setpoint
    that a bridge publishes with each state."""
    msg = PointStamped()
    msg.header.stamp, msg.header.frame_id = stamp, frame_id
    msg.point.x, msg.point.y, msg.point.z = (float(x) for x in scheduled(schedule, sim_time_s, hold_s))
    return msg


class SimBridgeBase(Node, ABC):
    def start_stepping(self, p: dict, wall_period_s: float) -> None:
        self.lockstep = bool(p["lockstep"])
        self.step_timeout_s = float(p["step_timeout_s"])
        self.clock_offset_s = float(p["clock_offset_s"])
        self.start_after = int(p["start_after_subscribers"])
        self.clock_pub = self.create_publisher(Clock, "/clock", qos.CLOCK) if self.lockstep else None
        self.steps = 0
        self.late_commands = 0  # lock-step: commands that answered an earlier state (no step taken)
        self._state_wall_ns = time.time_ns()
        self._last_step_wall = time.monotonic()
        self.started = not self.lockstep or self.start_after <= 0
        if self.started:
            self._publish()
        if self.lockstep:
            # Wall timer (the bridge is the clock source and never uses sim time itself).
            self.create_timer(self.step_timeout_s, self._on_lockstep_timeout)
        else:
            self.create_timer(wall_period_s, self.step)

    @abstractmethod
    def advance(self) -> None:
        """Implemented by each robot's node."""

    @abstractmethod
    def publish_state(self, stamp: Time) -> None:
        """Implemented by each robot's node."""

    def subscriber_count(self) -> int:
        """Readers of the state; a bridge with one state topic per robot overrides this (its fewest)."""
        return self.state_pub.get_subscription_count()

    def sim_time(self) -> float:
        return float(self.sim.time) + self.clock_offset_s

    def after_command(self, published_ns: int | None = None) -> None:
        """Call when a command arrived (published at published_ns on the publisher's wall clock, where known): in
        lock-step it advances the world by one step if it was published after the current state."""
        if self.lockstep and self.started and self.answers_current_state(published_ns):
            self.step()

    def answers_current_state(self, published_ns: int | None) -> bool:
        """Whether a command published at published_ns (None: not known) came after the current state; counts
        those that did not."""
        if published_ns is not None and published_ns < self._state_wall_ns:
            self.late_commands += 1
            return False
        return True

    def step(self) -> None:
        self.advance()
        self.steps += 1
        self._last_step_wall = time.monotonic()
        self._publish()

    def _on_lockstep_timeout(self) -> None:
        if not self.started:
            if self.subscriber_count() < self.start_after:
                return
            self.started = True
            self.get_logger().info(f"{self.subscriber_count()} state subscribers: time starts")
            self._publish()
            return
        if time.monotonic() - self._last_step_wall >= self.step_timeout_s:
            self.step()  # no command: time goes on, as it would for a real robot

    def _publish(self) -> None:
        # Before the first message of the step: a command sent from here on answers this state (DDS stamps a
        # sample with its writer's system clock, as time.time_ns reads it).
        self._state_wall_ns = time.time_ns()
        if self.clock_pub is not None:
            now = self.sim_time()
            self.clock_pub.publish(Clock(clock=s_to_stamp(now)))
            self.publish_state(s_to_stamp(now))
        else:
            self.publish_state(self.get_clock().now().to_msg())

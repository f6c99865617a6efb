"""An in-process test node: plays the robot's state stream and records what the safety node sends."""

from __future__ import annotations

import threading
import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from robot_rl_ros import qos
from robot_rl_ros.msgs import raw_to_odometry, s_to_stamp, twist_to_rpyt
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger


def wait_for(cond, timeout: float, poll_s: float = 0.005) -> bool:
    """Poll cond() until it holds or timeout seconds pass (checked once more at the end)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(poll_s)
    return bool(cond())


class Harness:
    def __init__(self, domain_id: int, namespace: str = "cf1"):
        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain_id)
        self.node = rclpy.create_node("harness", namespace=f"/{namespace}", context=self.ctx)
        self.ns = namespace
        self.odom_pub = self.node.create_publisher(Odometry, "odom", qos.SENSOR)
        self.estop_pub = self.node.create_publisher(Bool, "/estop", qos.LATCHED)
        self.action_pub = self.node.create_publisher(Float64MultiArray, "policy/action", qos.COMMAND)
        self.estop_client = self.node.create_client(Trigger, "safety/estop")
        self.action: np.ndarray | None = None  # when set, played as the policy's action at 100 Hz
        self.commands: list[tuple[float, np.ndarray]] = []  # (monotonic receipt, rpyt)
        self.modes: list[tuple[float, str]] = []
        self.safety_diag: dict[str, str] = {}
        self.safety_events: list[str] = []  # every 'event.KIND' value the safety node reported
        self.node.create_subscription(Twist, "cmd_vel_legacy", self._on_cmd, qos.COMMAND)
        self.node.create_subscription(String, "safety/mode", self._on_mode, qos.LATCHED)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, qos.DIAGNOSTICS)
        self.position = np.array([0.0, 0.0, 1.0])
        self.stream = True  # publish odometry at 100 Hz
        self.corrupt = None  # callable(raw, stamp) -> (raw, stamp) to inject faults
        self.node.create_timer(0.01, self._tick)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self._stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self._stop and self.ctx.ok():
            self.ex.spin_once(timeout_sec=0.01)

    def _tick(self) -> None:
        if not self.stream:
            return
        raw = {
            "position": self.position.copy(),
            "velocity": np.zeros(3),
            "quaternion": np.array([0.0, 0, 0, 1]),
            "angular_velocity": np.zeros(3),
        }
        stamp = self.node.get_clock().now().nanoseconds * 1e-9
        if self.corrupt is not None:
            raw, stamp = self.corrupt(raw, stamp)
        self.odom_pub.publish(raw_to_odometry(raw, s_to_stamp(stamp)))
        if self.action is not None:
            self.action_pub.publish(Float64MultiArray(data=[float(x) for x in self.action]))

    def _on_cmd(self, msg: Twist) -> None:
        self.commands.append((time.monotonic(), twist_to_rpyt(msg)))

    def _on_mode(self, msg: String) -> None:
        self.modes.append((time.monotonic(), msg.data))

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for st in msg.status:
            if st.name == f"/{self.ns}/safety":
                self.safety_diag = {kv.key: kv.value for kv in st.values}
                self.safety_events += [f"{kv.key} {kv.value}" for kv in st.values if kv.key.startswith("event.")]

    def wait_for(self, cond, timeout: float) -> bool:
        return wait_for(cond, timeout)

    def mode(self) -> str:
        return self.modes[-1][1] if self.modes else ""

    def max_gap(self, since: float) -> float:
        t = [c[0] for c in self.commands if c[0] >= since]
        return float(np.max(np.diff(t))) if len(t) > 1 else float("inf")

    def close(self) -> None:
        self._stop = True
        self.thread.join(2.0)
        self.ex.shutdown()
        self.node.destroy_node()
        self.ctx.try_shutdown()

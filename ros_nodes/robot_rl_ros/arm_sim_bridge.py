"""Arm simulator bridge: the MuJoCo arm as the robot, behind ros2_control's topics.

Publishes `joint_states` (sensor_msgs/JointState, Franka joint names) and the reach marker as
`target_position` (PointStamped, what perception or an operator would send); takes joint position
targets on `forward_position_controller/commands` (Float64MultiArray: 7 joints in rad, then the two
fingers in m) and, like that controller, holds the last one. `emergency` (std_srvs/Empty) engages
the brakes: the arm holds where it is and ignores commands, latched. Lock-step on simulated time
(each command advances one 25 Hz control period, /clock published) or on the wall clock.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Empty

from robot_rl_ros import qos
from robot_rl_ros.msgs import arm_joint_state, s_to_stamp
from robot_rl_ros.params import declare

PARAMS = {
    "target": [0.5, 0.0, 0.3],  # reach marker, m in the base frame
    "lockstep": True,
    "step_timeout_s": 0.05,  # lock-step: step anyway when no command came within this wall time
    "position_noise_rad": 0.0,
    "seed": 0,
    "randomize": False,
    "frame_id": "base",
    "command_topic": "forward_position_controller/commands",
    "clock_offset_s": 1.0,
    "start_after_subscribers": 0,  # lock-step: hold time until joint_states has this many readers
}


def make_sim(seed: int, randomize: bool, target):
    """The simulator is imported here only: sim bridges are the nodes allowed to use `sim`."""
    from sim.arm_sitl import ArmSitl

    return ArmSitl(seed=seed, randomize=randomize, target=target)


class ArmSimBridge(Node):
    def __init__(self, sim=None, **kwargs):
        super().__init__("arm_sim_bridge", **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        self.sim = sim if sim is not None else make_sim(p["seed"], p["randomize"], p["target"])
        self.sim.reset()
        self.rng = np.random.default_rng(p["seed"])
        self.targets = self.sim.state()["position"].copy()  # the servos hold the start pose
        self.braked = False
        self.joint_pub = self.create_publisher(JointState, "joint_states", qos.SENSOR)
        self.target_pub = self.create_publisher(PointStamped, "target_position", qos.SENSOR)
        self.clock_pub = self.create_publisher(Clock, "/clock", qos.CLOCK) if p["lockstep"] else None
        self.create_subscription(Float64MultiArray, p["command_topic"], self._on_cmd, qos.COMMAND)
        self.create_service(Empty, "emergency", self._on_emergency)
        self.steps = 0
        self.commands = 0
        self._last_step_wall = time.monotonic()
        self.started = not p["lockstep"] or int(p["start_after_subscribers"]) <= 0
        if self.started:
            self._publish_state()
        if p["lockstep"]:
            self.create_timer(p["step_timeout_s"], self._on_lockstep_timeout)
        else:
            self.create_timer(self.sim.dt, self._step)

    def sim_time(self) -> float:
        return float(self.sim.time) + self.p["clock_offset_s"]

    def _on_cmd(self, msg: Float64MultiArray) -> None:
        q = np.asarray(msg.data, dtype=np.float64)
        if q.shape != self.targets.shape or not np.all(np.isfinite(q)):
            # a position controller rejects a malformed command and keeps the last one
            self.get_logger().error(f"rejected command of {q.size} values (finite: {np.all(np.isfinite(q))})",
                                    throttle_duration_sec=1.0)  # fmt: skip
            return
        self.commands += 1
        if not self.braked:
            self.targets = q
        if self.p["lockstep"] and self.started:
            self._step()

    def _on_emergency(self, request, response):
        if not self.braked:
            self.braked = True
            self.targets = self.sim.state()["position"].copy()
            self.get_logger().warning("emergency stop: brakes engaged, commands ignored")
        return response

    def _on_lockstep_timeout(self) -> None:
        if not self.started:
            if self.joint_pub.get_subscription_count() < int(self.p["start_after_subscribers"]):
                return
            self.started = True
            self._publish_state()
            return
        if time.monotonic() - self._last_step_wall >= self.p["step_timeout_s"]:
            self._step()

    def _step(self) -> None:
        self.sim.step(self.targets)
        self.steps += 1
        self._last_step_wall = time.monotonic()
        self._publish_state()

    def _publish_state(self) -> None:
        now = self.sim_time()
        if self.clock_pub is not None:
            self.clock_pub.publish(Clock(clock=s_to_stamp(now)))
            stamp = s_to_stamp(now)
        else:
            stamp = self.get_clock().now().to_msg()
        st = self.sim.state()
        q = st["position"]
        if self.p["position_noise_rad"] > 0:
            q = q + self.rng.normal(0.0, self.p["position_noise_rad"], q.shape)
        self.joint_pub.publish(arm_joint_state(q, st["velocity"], stamp))
        target = PointStamped()
        target.header.stamp, target.header.frame_id = stamp, self.p["frame_id"]
        target.point.x, target.point.y, target.point.z = (float(x) for x in self.sim.target)
        self.target_pub.publish(target)


def main(args: list[str] | None = None) -> int:
    from robot_rl_ros.spin import run_node

    return run_node(ArmSimBridge, args)


if __name__ == "__main__":
    sys.exit(main())

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

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PointStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Empty

from robot_rl_ros import qos
from robot_rl_ros.commander import gated_subscription
from robot_rl_ros.msgs import arm_joint_state
from robot_rl_ros.params import declare
from robot_rl_ros.sim_bridge_base import BASE_PARAMS, SimBridgeBase
from robot_rl_ros.sim_bridge_base import physical_params as physical_params_json
from robot_rl_ros.spin import node_main

PARAMS = {
    **BASE_PARAMS,
    # Lock-step: time advances without a command only after this much wall time. A step taken while the
    # policy process is merely stalled (a loaded machine stalls processes for 0.1-0.4 s) puts a second
    # state in flight, and the loop then runs with the policy one control step behind for good (measured
    # on the arm: 2-5 cm off target instead of 0.5 mm). So it is long: only a dead policy lets it expire.
    "step_timeout_s": 2.0,
    "target": [0.5, 0.0, 0.3],  # reach marker, m in the base frame
    "position_noise_rad": 0.0,
    "velocity_noise_rads": 0.0,
    # Publish the reach marker as target_position ('false': another node, perception or an operator, does).
    "publish_target": True,
    "frame_id": "base",
    "command_topic": "forward_position_controller/commands",
    # A "real" arm for sim-to-real tests: physical parameters that differ from the model's, as JSON
    # (e.g. '{"damping_scale": 1.5, "kp_scale": 0.8}', names in sim.tasks.arm.physical); '' : none.
    "physical_params": "",
}


def make_sim(seed: int, randomize: bool, target, physical_params: str = ""):
    """The simulator is imported here only: sim bridges are the nodes allowed to use `sim`."""
    from sim.arm_sitl import ArmSitl

    return ArmSitl(seed=seed, randomize=randomize, target=target, physical=physical_params_json(physical_params))


class ArmSimBridge(SimBridgeBase):
    def __init__(self, sim=None, **kwargs):
        super().__init__("arm_sim_bridge", **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        self.sim = sim if sim is not None else make_sim(p["seed"], p["randomize"], p["target"], p["physical_params"])
        self.sim.reset()
        self.rng = np.random.default_rng(p["seed"])
        self.targets = self.sim.state()["position"].copy()  # the servos hold the start pose
        self.braked = False
        self.state_pub = self.create_publisher(JointState, "joint_states", qos.SENSOR)
        self.target_pub = self.create_publisher(PointStamped, "target_position", qos.SENSOR)
        self.command_gate = gated_subscription(
            self, Float64MultiArray, p["command_topic"], self._on_cmd, p["commander"], qos.COMMAND
        )
        self.create_service(Empty, "emergency", self._on_emergency)
        self.commands = 0
        self.start_stepping(p, self.sim.dt)

    def _on_cmd(self, msg: Float64MultiArray) -> None:
        q = np.asarray(msg.data, dtype=np.float64)
        if q.shape != self.targets.shape or not np.all(np.isfinite(q)):
            # a position controller rejects a malformed command and keeps the last one
            self.get_logger().error(
                f"rejected command of {q.size} values (finite: {np.all(np.isfinite(q))})", throttle_duration_sec=1.0
            )
            return
        self.commands += 1
        if not self.braked:
            self.targets = q
        self.after_command()

    def _on_emergency(self, request, response):
        if not self.braked:
            self.braked = True
            self.targets = self.sim.state()["position"].copy()
            self.get_logger().warning("emergency stop: brakes engaged, commands ignored")
        return response

    def advance(self) -> None:
        self.sim.step(self.targets)

    def publish_state(self, stamp: Time) -> None:
        st = self.sim.state()
        q, v = st["position"], st["velocity"]
        if self.p["position_noise_rad"] > 0:
            q = q + self.rng.normal(0.0, self.p["position_noise_rad"], q.shape)
        if self.p["velocity_noise_rads"] > 0:
            v = v + self.rng.normal(0.0, self.p["velocity_noise_rads"], v.shape)
        self.state_pub.publish(arm_joint_state(q, v, stamp))
        if not self.p["publish_target"]:
            return
        target = PointStamped()
        target.header.stamp, target.header.frame_id = stamp, self.p["frame_id"]
        target.point.x, target.point.y, target.point.z = (float(x) for x in self.sim.target)
        self.target_pub.publish(target)


main = node_main(ArmSimBridge)  # the console script


if __name__ == "__main__":
    sys.exit(main())

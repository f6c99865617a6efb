"""Arm simulator bridge: the MuJoCo arm as the robot, behind ros2_control's topics.

Publishes `joint_states` (sensor_msgs/JointState, Franka joint names) and the reach marker as
`target_position` (PointStamped, what perception or an operator would send), or in the pick-and-place scene
what perception reports of the named object and bowl: `object_pose` (PoseStamped) and `goal_position`
(PointStamped), each period before the joint states, with the same stamp; takes joint position
targets on `forward_position_controller/commands` (Float64MultiArray: 7 joints in rad, then the two
fingers in m) and, like that controller, holds the last one. `emergency` (std_srvs/Empty) engages
the brakes: the arm holds where it is and ignores commands, latched. Lock-step on simulated time
(each command advances one 25 Hz control period, /clock published) or on the wall clock.
"""

from __future__ import annotations

import sys

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PointStamped, PoseStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Empty

from robot_rl_ros import qos
from robot_rl_ros.commander import gated_subscription
from robot_rl_ros.msgs import arm_joint_state
from robot_rl_ros.params import declare
from robot_rl_ros.sim_bridge_base import BASE_PARAMS, SimBridgeBase, schedule_param, scheduled
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
    # A moving marker: x, y, z of each target in turn (flat), each held target_hold_s of simulated time from the
    # start, then the last ([0.0], the default: `target` throughout). Published with each state and its stamp, so a
    # policy acting once a period's state and target have both arrived sees each switch at the step the log records.
    "targets": [0.0],
    "target_hold_s": 2.0,
    "position_noise_rad": 0.0,
    "velocity_noise_rads": 0.0,
    # Publish the reach marker as target_position ('false': another node, perception or an operator, does).
    "publish_target": True,
    "frame_id": "base",
    "command_topic": "forward_position_controller/commands",
    # A "real" arm for sim-to-real tests: physical parameters that differ from the model's, as JSON
    # (e.g. '{"damping_scale": 1.5, "kp_scale": 0.8}', names in sim.tasks.arm.physical); '' : none.
    "physical_params": "",
    # The scene: "arm_reach" (the marker) or "arm_pick_place", whose layout `layout` of the pool made from
    # `layouts` and `layout_seed` (a pick-and-place run's task.params) is on the table.
    "scene": "arm_reach",
    "layouts": 16,
    "layout_seed": 0,
    "layout": 0,
}


def make_sim(p: dict):
    """The simulator is imported here only: sim bridges are the nodes allowed to use `sim`."""
    from sim.arm_sitl import ArmSitl

    return ArmSitl(
        seed=p["seed"],
        randomize=p["randomize"],
        target=p["target"],
        physical=physical_params_json(p["physical_params"]),
        scene=p["scene"],
        layouts=p["layouts"],
        layout_seed=p["layout_seed"],
        layout=p["layout"],
    )


class ArmSimBridge(SimBridgeBase):
    def __init__(self, sim=None, **kwargs):
        super().__init__("arm_sim_bridge", **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        self.sim = sim if sim is not None else make_sim(p)
        self.sim.reset()
        self.rng = np.random.default_rng(p["seed"])
        self.targets = self.sim.state()["position"].copy()  # the servos hold the start pose
        self.braked = False
        self.state_pub = self.create_publisher(JointState, "joint_states", qos.SENSOR)
        self.target_pub = self.create_publisher(PointStamped, "target_position", qos.SENSOR)
        self.pick_place = self.sim.scene == "arm_pick_place"
        if self.pick_place:
            self.object_pub = self.create_publisher(PoseStamped, "object_pose", qos.SENSOR)
            self.goal_pub = self.create_publisher(PointStamped, "goal_position", qos.SENSOR)
            self.get_logger().info(f"pick-and-place layout {p['layout']}: {self.sim.instruction()}")
        self.target_schedule = schedule_param(p["targets"], "targets (x, y, z of each target)")
        self.command_gate = gated_subscription(
            self, Float64MultiArray, p["command_topic"], self._on_cmd, p["commander"], qos.COMMAND
        )
        self.create_service(Empty, "emergency", self._on_emergency)
        self.commands = 0
        self.start_stepping(p, self.sim.dt)

    def _on_cmd(self, msg: Float64MultiArray, published_ns: int | None) -> None:
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
        self.after_command(published_ns)

    def _on_emergency(self, request, response):
        if not self.braked:
            self.braked = True
            self.targets = self.sim.state()["position"].copy()
            self.get_logger().warning("emergency stop: brakes engaged, commands ignored")
        return response

    def advance(self) -> None:
        self.sim.step(self.targets)

    def publish_state(self, stamp: Time) -> None:
        if len(self.target_schedule):
            target = scheduled(self.target_schedule, self.sim.time, self.p["target_hold_s"])
            if not np.array_equal(self.sim.target, target):
                self.sim.set_target(target)
        # before the joint states: a policy acting on those has this period's target and objects, and a log reads
        # each as in effect from this state on
        if self.p["publish_target"]:
            target = PointStamped()
            target.header.stamp, target.header.frame_id = stamp, self.p["frame_id"]
            target.point.x, target.point.y, target.point.z = (float(x) for x in self.sim.target)
            self.target_pub.publish(target)
        if self.pick_place:
            self._publish_objects(stamp)
        st = self.sim.state()
        q, v = st["position"], st["velocity"]
        if self.p["position_noise_rad"] > 0:
            q = q + self.rng.normal(0.0, self.p["position_noise_rad"], q.shape)
        if self.p["velocity_noise_rads"] > 0:
            v = v + self.rng.normal(0.0, self.p["velocity_noise_rads"], v.shape)
        self.state_pub.publish(arm_joint_state(q, v, stamp))

    def _publish_objects(self, stamp: Time) -> None:
        o = self.sim.object_state()
        pose = PoseStamped()
        pose.header.stamp, pose.header.frame_id = stamp, self.p["frame_id"]
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = (float(x) for x in o["object_position"])
        q = pose.pose.orientation
        q.x, q.y, q.z, q.w = (float(x) for x in o["object_quaternion"])
        self.object_pub.publish(pose)
        goal = PointStamped()
        goal.header.stamp, goal.header.frame_id = stamp, self.p["frame_id"]
        goal.point.x, goal.point.y, goal.point.z = (float(x) for x in o["goal_position"])
        self.goal_pub.publish(goal)


main = node_main(ArmSimBridge)  # the console script


if __name__ == "__main__":
    sys.exit(main())

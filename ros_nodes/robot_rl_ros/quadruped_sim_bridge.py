"""Quadruped simulator bridge: the MuJoCo Go1-like robot behind a Go1 driver's topics.

Publishes `joint_states` (sensor_msgs/JointState, LEG_JOINT_NAMES), `imu` (sensor_msgs/Imu: attitude
and body rates) and `odom` (nav_msgs/Odometry as a state estimator reports it: world pose, body-frame
twist per REP 105). Takes `joint_commands` (Float64MultiArray of 36: 12 position targets in rad, then
12 kp, then 12 kd, the per-motor fields of a Go1 low-level command) and, like the motor drivers,
keeps applying the last one. `emergency` (std_srvs/Empty) switches to damping, latched.
"""

from __future__ import annotations

import sys

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PointStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Empty

from robot_rl_ros import qos
from robot_rl_ros.commander import gated_subscription
from robot_rl_ros.msgs import LEG_JOINT_NAMES, joint_state
from robot_rl_ros.params import declare
from robot_rl_ros.sim_bridge_base import BASE_PARAMS, SimBridgeBase, schedule_param, scheduled_point
from robot_rl_ros.sim_bridge_base import physical_params as physical_params_json
from robot_rl_ros.spin import node_main

PARAMS = {
    **BASE_PARAMS,
    # Lock-step: time advances without a command only after this much wall time. A step taken while the
    # policy process is merely stalled (a loaded machine stalls processes for 0.1-0.4 s) puts a second
    # state in flight, and the loop then runs with the policy one control step behind for good (measured
    # on the arm: 2-5 cm off target instead of 0.5 mm). So it is long: only a dead policy lets it expire.
    "step_timeout_s": 2.0,
    "stand_kp": 30.0,  # the servos hold the start pose with these gains until a command arrives
    "stand_kd": 0.75,
    "damping_kd": 2.0,  # emergency damping, N m s / rad
    "frame_id": "odom",
    "command_topic": "joint_commands",
    "position_noise_rad": 0.0,  # joint encoder noise on joint_states (std)
    "velocity_noise_rads": 0.0,
    # A "real" robot for sim-to-real tests: physical parameters that differ from the model's, as JSON
    # (e.g. '{"motor_strength": 0.85, "added_mass_kg": 1.5}', names in sim.tasks.quadruped.physical); '' : none.
    "physical_params": "",
    # An operator's velocity commands for SITL: vx, vy, yaw rate of each in turn (flat), each held command_hold_s of
    # simulated time from the start, then the last, published on `command` (PointStamped) with each state and its
    # stamp, before the joint states ([0.0], the default: none), so a policy acting on those sees each switch at the
    # step the log records.
    "commands": [0.0],
    "command_hold_s": 2.0,
}


def make_sim(seed: int, randomize: bool, physical_params: str = ""):
    """The simulator is imported here only: sim bridges are the nodes allowed to use `sim`."""
    from sim.quadruped_sitl import QuadrupedSitl

    return QuadrupedSitl(seed=seed, randomize=randomize, physical=physical_params_json(physical_params))


class QuadrupedSimBridge(SimBridgeBase):
    def __init__(self, sim=None, **kwargs):
        super().__init__("quadruped_sim_bridge", **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        self.sim = sim if sim is not None else make_sim(p["seed"], p["randomize"], p["physical_params"])
        self.rng = np.random.default_rng(p["seed"])
        self.sim.reset()
        q0 = self.sim.state()["joint_position"]
        self.cmd = (q0.copy(), np.full(12, p["stand_kp"]), np.full(12, p["stand_kd"]))
        self.damped = False
        self.state_pub = self.create_publisher(JointState, "joint_states", qos.SENSOR)
        self.imu_pub = self.create_publisher(Imu, "imu", qos.SENSOR)
        self.odom_pub = self.create_publisher(Odometry, "odom", qos.SENSOR)
        self.command_schedule = schedule_param(p["commands"], "commands (vx, vy, yaw rate of each command)")
        has_commands = len(self.command_schedule) > 0
        self.velocity_command_pub = self.create_publisher(PointStamped, "command", qos.SENSOR) if has_commands else None
        self.command_gate = gated_subscription(
            self, Float64MultiArray, p["command_topic"], self._on_cmd, p["commander"], qos.COMMAND
        )
        self.create_service(Empty, "emergency", self._on_emergency)
        self.commands = 0
        self.fall_reported = False
        self.start_stepping(p, self.sim.dt)

    def _on_cmd(self, msg: Float64MultiArray, published_ns: int | None) -> None:
        c = np.asarray(msg.data, dtype=np.float64)
        if c.shape != (36,) or not np.all(np.isfinite(c)) or np.any(c[12:] < 0):
            self.get_logger().error(f"rejected command of {c.size} values", throttle_duration_sec=1.0)
            return
        self.commands += 1
        if not self.damped:
            self.cmd = (c[:12], c[12:24], c[24:36])
        self.after_command(published_ns)

    def _on_emergency(self, request, response):
        if not self.damped:
            self.damped = True
            self.cmd = (self.cmd[0], np.zeros(12), np.full(12, self.p["damping_kd"]))
            self.get_logger().warning("emergency stop: damping mode, commands ignored")
        return response

    def advance(self) -> None:
        q, kp, kd = self.cmd
        if self.damped:
            q = self.sim.state()["joint_position"]
        self.sim.step(q, kp, kd)
        if self.sim.fell and not self.fall_reported:
            self.fall_reported = True
            self.get_logger().warning(f"trunk on the ground at t={self.sim.time:.2f} s")

    def publish_state(self, stamp: Time) -> None:
        if self.velocity_command_pub is not None:
            command = scheduled_point(self.command_schedule, self.sim.time, self.p["command_hold_s"], stamp)
            self.velocity_command_pub.publish(command)
        st = self.sim.state()
        q, dq = st["joint_position"], st["joint_velocity"]
        if self.p["position_noise_rad"] > 0:
            q = q + self.rng.normal(0.0, self.p["position_noise_rad"], 12)
        if self.p["velocity_noise_rads"] > 0:
            dq = dq + self.rng.normal(0.0, self.p["velocity_noise_rads"], 12)
        imu = Imu()
        imu.header.stamp, imu.header.frame_id = stamp, "trunk"
        o, w = imu.orientation, imu.angular_velocity
        o.x, o.y, o.z, o.w = (float(x) for x in st["quaternion"])
        w.x, w.y, w.z = (float(x) for x in st["angular_velocity"])
        self.imu_pub.publish(imu)
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, self.p["frame_id"], "trunk"
        pp, po = odom.pose.pose.position, odom.pose.pose.orientation
        pp.x, pp.y, pp.z = (float(x) for x in st["position"])
        po.x, po.y, po.z, po.w = o.x, o.y, o.z, o.w
        v = odom.twist.twist.linear
        v.x, v.y, v.z = (float(x) for x in st["base_linear_velocity"])
        odom.twist.twist.angular = w
        self.odom_pub.publish(odom)
        # the joint states last: a policy that acts on them (act_on) has this period's IMU and odometry by then
        self.state_pub.publish(joint_state(LEG_JOINT_NAMES, q, dq, stamp))


main = node_main(QuadrupedSimBridge)  # the console script


if __name__ == "__main__":
    sys.exit(main())

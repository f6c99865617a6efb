"""Legged-robot safety node: the only publisher of the robot's low-level joint commands.

Policy joint targets (12, rad) come in on `policy/action`; `joint_commands` goes out as a Go1
low-level command's per-motor fields (Float64MultiArray of 36: targets, then kp, then kd) with the
bundle's servo gains, at once and from a watchdog timer. The fallback is DAMP: zero stiffness and
damping_kd, which lowers the robot to the ground instead of holding a pose it may be falling out
of; it is taken on stale joint states or policy commands, non-finite actions, a trunk tilted beyond
max_tilt_deg (fallen), and, latched, on e-stop. Every intervention is reported on /diagnostics.
"""

from __future__ import annotations

import sys

import numpy as np
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray

from robot_rl_ros import qos
from robot_rl_ros.joint_supervisor import JointSupervisor, JointSupervisorConfig, go1_limits
from robot_rl_ros.msgs import LEG_JOINT_NAMES
from robot_rl_ros.params import declare, max_future_s
from robot_rl_ros.prearm import RobotSpec, check_bundle
from robot_rl_ros.safety_base import SafetyNodeBase

_L = go1_limits()
PARAMS = {
    "bundle": "",
    "robot": "go1_like",
    "action_mode": "joint_position",
    "action_dim": 12,
    "auto_arm": True,
    "command_topic": "joint_commands",
    "watchdog_rate_hz": 50.0,
    "event_gap_s": 0.03,  # the timer sends when nothing went out for this long (1.5 policy periods)
    "state_max_age_s": 0.06,
    "state_max_future_s": 0.05,  # a stamp further ahead of this node's clock is rejected
    "command_timeout_s": 0.1,
    "max_tilt_deg": 60.0,
    "damping_kd": 2.0,  # N m s / rad in DAMP and e-stop
    "q_low": _L.q_low.tolist(),
    "q_high": _L.q_high.tolist(),
    "max_lead": _L.max_lead.tolist(),
    "max_speed": _L.max_speed.tolist(),
    "estop_topic": "/estop",
    "diagnostics_period_s": 0.2,
}


class LegSafetyNode(SafetyNodeBase):
    def __init__(self, **kwargs):
        super().__init__("safety", **kwargs)
        p = declare(self, PARAMS)
        spec = RobotSpec(robot=p["robot"], action_mode=p["action_mode"], action_dim=p["action_dim"])
        bundle, problems = check_bundle(p["bundle"], spec)
        servo = bundle.extra.get("servo", {}) if bundle is not None else {}
        try:
            self.kp, self.kd = float(servo["kp"]), float(servo["kd"])
        except (KeyError, TypeError, ValueError):
            self.kp = self.kd = 0.0
            problems.append("bundle carries no servo gains (extra.servo.kp, extra.servo.kd)")
        self.damping_kd = float(p["damping_kd"])
        cfg = JointSupervisorConfig(
            limits=go1_limits().with_params(p),
            fallback="damp",
            state_max_age_s=p["state_max_age_s"],
            state_max_future_s=max_future_s(self, p["state_max_future_s"]),
            command_timeout_s=p["command_timeout_s"],
            max_tilt_deg=p["max_tilt_deg"],
            auto_arm=p["auto_arm"],
        )
        self.sup = JointSupervisor(cfg, problems)
        for prob in problems:
            self.get_logger().error(f"pre-arm: {prob}")
        self.joint_names = LEG_JOINT_NAMES
        self.cmd_pub = self.create_publisher(Float64MultiArray, p["command_topic"], qos.COMMAND)
        self.create_subscription(JointState, "joint_states", self._on_joints, qos.SENSOR)
        self.create_subscription(Imu, "imu", self._on_imu, qos.SENSOR)
        self.create_subscription(Float64MultiArray, "policy/action", self._on_action, qos.COMMAND)
        self._setup_common(
            p["estop_topic"], p["watchdog_rate_hz"], p["event_gap_s"], p["diagnostics_period_s"], "leg_safety"
        )

    def _on_imu(self, msg: Imu) -> None:
        o = msg.orientation
        self.sup.on_attitude([o.x, o.y, o.z, o.w], self.now())
        self._after_input()

    def _send(self) -> None:
        now = self.now()
        q = self.sup.step(now)
        if q is not None:
            kp, kd = (0.0, self.damping_kd) if self.sup.damping else (self.kp, self.kd)
            data = np.concatenate([q, np.full(12, kp), np.full(12, kd)])
            self.cmd_pub.publish(Float64MultiArray(data=[float(x) for x in data]))
            self.last_pub_time = now
        self._after_input()


def main(args: list[str] | None = None) -> int:
    from robot_rl_ros.spin import run_node

    return run_node(LegSafetyNode, args)


if __name__ == "__main__":
    sys.exit(main())

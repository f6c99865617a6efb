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
from sensor_msgs.msg import Imu

from robot_rl.deploy import BundleError
from robot_rl.deploy.joint_limits import go1_limits
from robot_rl_ros import qos
from robot_rl_ros.msgs import LEG_JOINT_NAMES
from robot_rl_ros.safety_base import JointSafetyNode, joint_safety_params
from robot_rl_ros.spin import node_main

_L = go1_limits()
PARAMS = joint_safety_params(
    _L,
    robot="go1_like",
    action_mode="joint_position",
    action_dim=12,
    command_topic="joint_commands",
    watchdog_rate_hz=50.0,
    event_gap_s=0.03,  # the timer sends when nothing went out for this long (1.5 policy periods)
    state_max_age_s=0.06,
    command_timeout_s=0.1,
    max_tilt_deg=60.0,
    damping_kd=2.0,  # N m s / rad in DAMP and e-stop
)


class LegSafetyNode(JointSafetyNode):
    def __init__(self, **kwargs):
        super().__init__("safety", **kwargs)
        p, bundle, problems = self._declare_and_check(PARAMS)
        self.kp = self.kd = np.zeros(12)
        if bundle is not None:
            try:
                self.kp, self.kd = bundle.servo_gains(12)
            except BundleError as e:
                problems.append(str(e))
        self.damping_kd = float(p["damping_kd"])
        self._start_joint_safety(
            p, go1_limits(), "damp", problems, LEG_JOINT_NAMES, "leg_safety", max_tilt_deg=p["max_tilt_deg"]
        )
        self.create_subscription(Imu, "imu", self._on_imu, qos.SENSOR)

    def _on_imu(self, msg: Imu) -> None:
        o = msg.orientation
        self.sup.on_attitude([o.x, o.y, o.z, o.w], self.now())
        self._after_input()

    def _command_data(self, q: np.ndarray) -> np.ndarray:
        """A Go1 low-level command's per-motor fields: targets, then kp, then kd (DAMP: kp 0)."""
        if self.sup.damping:
            return np.concatenate([q, np.zeros(12), np.full(12, self.damping_kd)])
        return np.concatenate([q, self.kp, self.kd])


main = node_main(LegSafetyNode)  # the console script


if __name__ == "__main__":
    sys.exit(main())

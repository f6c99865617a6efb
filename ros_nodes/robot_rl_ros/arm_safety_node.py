"""Arm safety node: the only publisher of the arm's joint position commands.

Policy joint targets come in on `policy/action` (the policy node runs the bundle's IK); filtered
targets go out on ros2_control's `forward_position_controller/commands`, at once and from a
watchdog timer, so the stream never drops below 10 Hz even when the policy stops (then as HOLD).
Every intervention is reported on /diagnostics with its reason.
"""

from __future__ import annotations

import sys

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_rl.deploy.arm_ik import IKSpec, forward_kinematics
from robot_rl_ros import qos
from robot_rl_ros.joint_supervisor import JointSupervisor, JointSupervisorConfig, arm_limits
from robot_rl_ros.msgs import ARM_JOINT_NAMES
from robot_rl_ros.params import declare, max_future_s
from robot_rl_ros.prearm import RobotSpec, check_bundle
from robot_rl_ros.safety_base import SafetyNodeBase

_L = arm_limits()
PARAMS = {
    "bundle": "",
    "robot": "panda_like",
    "action_mode": "ee_position",
    "action_dim": 4,
    "auto_arm": True,
    "command_topic": "forward_position_controller/commands",
    "watchdog_rate_hz": 25.0,
    "event_gap_s": 0.06,  # the timer sends when nothing went out for this long (1.5 policy periods)
    "state_max_age_s": 0.1,
    "state_max_future_s": 0.05,  # a stamp further ahead of this node's clock is rejected
    "command_timeout_s": 0.2,
    "q_low": _L.q_low.tolist(),
    "q_high": _L.q_high.tolist(),
    "max_lead": _L.max_lead.tolist(),
    "max_speed": _L.max_speed.tolist(),
    "workspace_low": _L.workspace_low.tolist(),
    "workspace_high": _L.workspace_high.tolist(),
    "workspace_margin_m": _L.workspace_margin_m,
    "estop_topic": "/estop",
    "diagnostics_period_s": 0.2,
}


class ArmSafetyNode(SafetyNodeBase):
    def __init__(self, **kwargs):
        super().__init__("safety", **kwargs)
        p = declare(self, PARAMS)
        spec = RobotSpec(robot=p["robot"], action_mode=p["action_mode"], action_dim=p["action_dim"])
        bundle, problems = check_bundle(p["bundle"], spec)
        tcp = None
        if bundle is not None and isinstance(bundle.extra.get("ik"), dict):
            ik = IKSpec.from_dict(bundle.extra["ik"])
            tcp = lambda q: forward_kinematics(ik, np.asarray(q)[None]).tcp[0, :3, 3]  # noqa: E731
        elif bundle is not None:
            self.get_logger().warning("bundle carries no arm kinematics: workspace checks are off")
        cfg = JointSupervisorConfig(
            limits=arm_limits().with_params(p),
            fallback="hold",
            state_max_age_s=p["state_max_age_s"],
            state_max_future_s=max_future_s(self, p["state_max_future_s"]),
            command_timeout_s=p["command_timeout_s"],
            auto_arm=p["auto_arm"],
        )
        self.sup = JointSupervisor(cfg, problems, tcp)
        for prob in problems:
            self.get_logger().error(f"pre-arm: {prob}")
        self.joint_names = ARM_JOINT_NAMES
        self.cmd_pub = self.create_publisher(Float64MultiArray, p["command_topic"], qos.COMMAND)
        self.create_subscription(JointState, "joint_states", self._on_joints, qos.SENSOR)
        self.create_subscription(Float64MultiArray, "policy/action", self._on_action, qos.COMMAND)
        self._setup_common(
            p["estop_topic"], p["watchdog_rate_hz"], p["event_gap_s"], p["diagnostics_period_s"], "arm_safety"
        )

    def _send(self) -> None:
        now = self.now()
        cmd = self.sup.step(now)
        if cmd is not None:
            self.cmd_pub.publish(Float64MultiArray(data=[float(x) for x in cmd]))
            self.last_pub_time = now
        self._after_input()


def main(args: list[str] | None = None) -> int:
    from robot_rl_ros.spin import run_node

    return run_node(ArmSafetyNode, args)


if __name__ == "__main__":
    sys.exit(main())

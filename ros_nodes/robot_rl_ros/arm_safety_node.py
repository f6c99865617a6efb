"""Arm safety node: the only publisher of the arm's joint position commands.

Policy joint targets come in on `policy/action` (the policy node runs the bundle's IK); filtered
targets go out on ros2_control's `forward_position_controller/commands`, at once and from a
watchdog timer, so the stream never drops below 10 Hz even when the policy stops (then as HOLD).
Every intervention is reported on /diagnostics with its reason.
"""

from __future__ import annotations

import sys

import numpy as np

from robot_rl.deploy.arm_ik import IKSpec, forward_kinematics
from robot_rl.deploy.joint_limits import arm_limits
from robot_rl_ros.msgs import ARM_JOINT_NAMES
from robot_rl_ros.safety_base import JointSafetyNode, joint_safety_params
from robot_rl_ros.spin import node_main

_L = arm_limits()
PARAMS = joint_safety_params(
    _L,
    robot="panda_like",
    action_mode="ee_position",
    action_dim=4,
    command_topic="forward_position_controller/commands",
    watchdog_rate_hz=25.0,
    event_gap_s=0.06,  # the timer sends when nothing went out for this long (1.5 policy periods)
    state_max_age_s=0.1,
    command_timeout_s=0.2,
    workspace_low=_L.workspace_low.tolist(),
    workspace_high=_L.workspace_high.tolist(),
    workspace_margin_m=_L.workspace_margin_m,
)


class ArmSafetyNode(JointSafetyNode):
    def __init__(self, **kwargs):
        super().__init__("safety", **kwargs)
        p, bundle, problems = self._declare_and_check(PARAMS)
        tcp = None
        if bundle is not None and isinstance(bundle.extra.get("ik"), dict):
            ik = IKSpec.from_dict(bundle.extra["ik"])
            tcp = lambda q: forward_kinematics(ik, np.asarray(q)[None]).tcp[0, :3, 3]  # noqa: E731
        elif bundle is not None:
            self.get_logger().warning("bundle carries no arm kinematics: workspace checks are off")
        self._start_joint_safety(p, arm_limits(), "hold", problems, ARM_JOINT_NAMES, "arm_safety", tcp)

    def _command_data(self, q: np.ndarray) -> np.ndarray:
        return q  # ros2_control's forward position controller: the joint positions


main = node_main(ArmSafetyNode)  # the console script


if __name__ == "__main__":
    sys.exit(main())

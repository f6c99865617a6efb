"""Safety node: the only publisher of robot commands.

Policy actions come in on `policy/action`; `cmd_vel_legacy` (Crazyswarm2 units) goes out, both as
soon as an action arrives and from a watchdog timer, so the stream never drops below 10 Hz even
when the policy stops. Every intervention is reported on /diagnostics with its reason.

action_mode `motors` (a swarm policy flown at motor level, in SITL or on board): `cmd_motors`
(std_msgs/Float64MultiArray, m1..m4 as fractions [0, 1] of each motor's maximum thrust) goes out instead,
the box is [0, 1] per motor, the tilt limit does not apply (there is no attitude setpoint to limit), and the
fallbacks fly the motors through a geometric attitude controller (motor_fallback).
"""

from __future__ import annotations

import sys

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from std_msgs.msg import Float64MultiArray

from robot_rl_ros import qos
from robot_rl_ros.fallback import FallbackController, FallbackGains
from robot_rl_ros.limits import DroneLimits
from robot_rl_ros.motor_fallback import MotorFallback
from robot_rl_ros.msgs import odometry_to_raw, rpyt_to_twist, stamp_to_s
from robot_rl_ros.params import max_future_s
from robot_rl_ros.safety_base import SafetyNodeBase
from robot_rl_ros.spin import node_main
from robot_rl_ros.supervisor import SafetySupervisor, SupervisorConfig

_L = DroneLimits()
PARAMS = {
    "bundle": "",
    "robot": "crazyflie_2_1",
    "action_mode": "rpyt",
    "action_dim": 4,
    "auto_arm": True,
    "watchdog_rate_hz": 50.0,
    "state_max_age_s": 0.2,
    "state_max_future_s": 0.05,  # a stamp further ahead of this node's clock is rejected
    "command_timeout_s": 0.1,
    "hover_timeout_s": 2.0,
    "land_timeout_s": 6.0,
    "landed_z_m": 0.05,
    "hover_pwm": 38000.0,
    "low": _L.low.tolist(),
    "high": _L.high.tolist(),
    "max_rate": _L.max_rate.tolist(),
    "max_tilt_deg": _L.max_tilt_deg,
    "state_tilt_envelope_deg": _L.state_tilt_envelope_deg,
    "state_tilt_tumble_deg": _L.state_tilt_tumble_deg,
    "fence_low": _L.fence_low.tolist(),
    "fence_high": _L.fence_high.tolist(),
    "fence_brake_mps2": _L.fence_brake_mps2.tolist(),
    "fence_reaction_s": _L.fence_reaction_s,
    "min_separation_m": _L.min_separation_m,
    "neighbours": [""],  # namespaces of other drones whose odom to watch (empty string: none)
    "estop_topic": "/estop",
    # zero-thrust setpoints that must reach the robot before arming (the firmware's thrust lock); a simulated
    # team that starts in the air (swarm SITL) has no lock and sets 0
    "unlock_setpoints": 10,
    "diagnostics_period_s": 0.2,
    # wall seconds of watching the graph for other commanders before arming; a simulated team that starts in
    # the air (swarm SITL) sets 0, as it cannot wait on zero thrust
    "discovery_settle_s": 1.0,
}


class SafetyNode(SafetyNodeBase):
    def __init__(self, **kwargs):
        super().__init__("safety", **kwargs)
        p, _, problems = self._declare_and_check(PARAMS)
        self.motors = p["action_mode"] == "motors"
        if self.motors:  # motor fractions: the rpyt defaults of box, rate and tilt limits do not apply
            defaults = {k: v for k, v in PARAMS.items() if k in ("low", "high", "max_rate", "max_tilt_deg")}
            motor = {"low": [0.0] * 4, "high": [1.0] * 4, "max_rate": [1e3] * 4, "max_tilt_deg": 180.0}
            p = {**p, **{k: motor[k] for k in motor if p[k] == defaults[k]}}
        cfg = SupervisorConfig(
            limits=DroneLimits.from_params(p),
            state_max_age_s=p["state_max_age_s"],
            state_max_future_s=max_future_s(self, p["state_max_future_s"]),
            command_timeout_s=p["command_timeout_s"],
            hover_timeout_s=p["hover_timeout_s"],
            land_timeout_s=p["land_timeout_s"],
            landed_z_m=p["landed_z_m"],
            auto_arm=p["auto_arm"],
            action_dim=p["action_dim"],
            unlock_setpoints=p["unlock_setpoints"],
        )
        fallback = MotorFallback() if self.motors else FallbackController(FallbackGains(hover_pwm=p["hover_pwm"]))
        self.sup = SafetySupervisor(cfg, problems, fallback)
        for prob in problems:
            self.get_logger().error(f"pre-arm: {prob}")
        if self.motors:
            self.cmd_pub = self.create_publisher(Float64MultiArray, "cmd_motors", qos.COMMAND)
        else:
            self.cmd_pub = self.create_publisher(Twist, "cmd_vel_legacy", qos.COMMAND)
        self.create_subscription(Odometry, "odom", self._on_odom, qos.SENSOR)
        self.create_subscription(Float64MultiArray, "policy/action", self._on_action, qos.COMMAND)
        for n in p["neighbours"]:
            if n:
                self.create_subscription(Odometry, f"/{n.strip('/')}/odom", self._make_neighbour_cb(n), qos.SENSOR)
        # the timer at watchdog_rate_hz sends when the policy has been silent for one timer period
        rate = p["watchdog_rate_hz"]
        self._setup_common(
            p["estop_topic"],
            rate,
            1.0 / rate,
            p["diagnostics_period_s"],
            "safety",
            discovery_settle_s=p["discovery_settle_s"],
        )

    # ----- inputs -----
    def _on_odom(self, msg: Odometry) -> None:
        self.sup.on_state(odometry_to_raw(msg), stamp_to_s(msg.header.stamp), self.now())
        self._after_input()

    def _make_neighbour_cb(self, name: str):
        def cb(msg: Odometry) -> None:
            self.sup.on_neighbour(name, odometry_to_raw(msg)["position"], stamp_to_s(msg.header.stamp), self.now())

        return cb

    # ----- output -----
    def _send(self) -> None:
        now = self.now()
        cmd = self.sup.step(now)
        if self.motors:
            self.cmd_pub.publish(Float64MultiArray(data=[float(x) for x in cmd]))
        else:
            self.cmd_pub.publish(rpyt_to_twist(cmd))
        if not np.any(cmd if self.motors else cmd[3]) and self.cmd_pub.get_subscription_count() > 0:
            self.sup.note_unlock_delivered(now)
        self.mark_sent(now)
        self._after_input()


main = node_main(SafetyNode)  # the console script


if __name__ == "__main__":
    sys.exit(main())

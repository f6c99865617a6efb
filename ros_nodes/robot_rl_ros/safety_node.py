"""Safety node: the only publisher of robot commands.

Policy actions come in on `policy/action`; `cmd_vel_legacy` (Crazyswarm2 units) goes out, both as
soon as an action arrives and from a watchdog timer, so the stream never drops below 10 Hz even
when the policy stops. Every intervention is reported on /diagnostics with its reason.
"""

from __future__ import annotations

import sys

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Empty, Trigger

from robot_rl_ros import qos
from robot_rl_ros.fallback import FallbackController, FallbackGains
from robot_rl_ros.limits import DroneLimits
from robot_rl_ros.msgs import odometry_to_raw, rpyt_to_twist, stamp_to_s
from robot_rl_ros.params import declare
from robot_rl_ros.prearm import RobotSpec, check_bundle
from robot_rl_ros.supervisor import Mode, SafetySupervisor, SupervisorConfig

_L = DroneLimits()
PARAMS = {
    "bundle": "",
    "robot": "crazyflie_2_1",
    "action_mode": "rpyt",
    "action_dim": 4,
    "auto_arm": True,
    "watchdog_rate_hz": 50.0,
    "state_max_age_s": 0.2,
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
    "diagnostics_period_s": 0.2,
}


class SafetyNode(Node):
    def __init__(self, **kwargs):
        super().__init__("safety", **kwargs)
        p = declare(self, PARAMS)
        spec = RobotSpec(robot=p["robot"], action_mode=p["action_mode"], action_dim=p["action_dim"])
        _, problems = check_bundle(p["bundle"], spec)
        cfg = SupervisorConfig(
            limits=DroneLimits.from_params(p),
            state_max_age_s=p["state_max_age_s"],
            command_timeout_s=p["command_timeout_s"],
            hover_timeout_s=p["hover_timeout_s"],
            land_timeout_s=p["land_timeout_s"],
            landed_z_m=p["landed_z_m"],
            auto_arm=p["auto_arm"],
            action_dim=p["action_dim"],
        )
        self.sup = SafetySupervisor(
            cfg, problems, FallbackController(FallbackGains(hover_pwm=p["hover_pwm"]))
        )
        for prob in problems:
            self.get_logger().error(f"pre-arm: {prob}")
        self.cmd_pub = self.create_publisher(Twist, "cmd_vel_legacy", qos.COMMAND)
        self.mode_pub = self.create_publisher(String, "safety/mode", qos.LATCHED)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS)
        self.create_subscription(Odometry, "odom", self._on_odom, qos.SENSOR)
        self.create_subscription(Float64MultiArray, "policy/action", self._on_action, qos.COMMAND)
        self.create_subscription(Bool, p["estop_topic"], self._on_estop_topic, qos.LATCHED)
        for n in p["neighbours"]:
            if n:
                self.create_subscription(
                    Odometry, f"/{n.strip('/')}/odom", self._make_neighbour_cb(n), qos.SENSOR
                )
        self.create_service(Trigger, "safety/estop", self._srv_estop)
        self.create_service(Trigger, "safety/arm", self._srv_arm)
        self.emergency_client = self.create_client(Empty, "emergency")
        self.min_gap_s = 0.5 / p["watchdog_rate_hz"]
        self.last_pub_time = -1.0
        self.n_events_reported = 0
        self.last_mode: Mode | None = None
        self.create_timer(1.0 / p["watchdog_rate_hz"], self._on_timer)
        self.create_timer(p["diagnostics_period_s"], self._publish_diagnostics)

    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # ----- inputs -----
    def _on_odom(self, msg: Odometry) -> None:
        self.sup.on_state(odometry_to_raw(msg), stamp_to_s(msg.header.stamp), self.now())
        self._after_input()

    def _make_neighbour_cb(self, name: str):
        def cb(msg: Odometry) -> None:
            self.sup.on_neighbour(
                name, odometry_to_raw(msg)["position"], stamp_to_s(msg.header.stamp), self.now()
            )

        return cb

    def _on_action(self, msg: Float64MultiArray) -> None:
        self.sup.on_action(np.asarray(msg.data, dtype=np.float64), self.now())
        self._send()  # forward at once: the policy's rate is the command rate

    def _on_estop_topic(self, msg: Bool) -> None:
        if msg.data:
            self._estop("emergency stop topic")

    def _srv_estop(self, request, response):
        self._estop("emergency stop service")
        response.success, response.message = True, "emergency stop latched"
        return response

    def _srv_arm(self, request, response):
        why = self.sup.arm(self.now())
        response.success, response.message = why is None, why or "armed"
        self._after_input()
        return response

    def _estop(self, reason: str) -> None:
        first = self.sup.mode != Mode.ESTOP
        self.sup.estop(self.now(), reason)
        self._send()
        if first and self.emergency_client.service_is_ready():
            self.emergency_client.call_async(Empty.Request())  # the robot's own e-stop as a second path
        self._after_input()

    # ----- output -----
    def _on_timer(self) -> None:
        now = self.now()
        # The timer keeps the stream alive and runs the watchdogs; skip it when the event path just sent.
        if (
            self.sup.mode != Mode.ACTIVE
            or now - self.last_pub_time >= self.min_gap_s * 2
            or now < self.last_pub_time
        ):
            self._send()
        else:
            self.sup.check(now)
            self._after_input()

    def _send(self) -> None:
        now = self.now()
        cmd = self.sup.step(now)
        self.cmd_pub.publish(rpyt_to_twist(cmd))
        if cmd[3] == 0.0 and self.cmd_pub.get_subscription_count() > 0:
            self.sup.note_unlock_delivered(now)
        self.last_pub_time = now
        self._after_input()

    def _after_input(self) -> None:
        if self.sup.mode != self.last_mode:
            self.last_mode = self.sup.mode
            self.mode_pub.publish(String(data=f"{self.sup.mode.name}: {self.sup.reason}"))
            self.get_logger().warning(f"mode {self.sup.mode.name}: {self.sup.reason}")
            self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        sup = self.sup
        new = (
            sup.events[self.n_events_reported :] if self.n_events_reported <= len(sup.events) else sup.events
        )
        self.n_events_reported = len(sup.events)
        level = {Mode.ACTIVE: DiagnosticStatus.OK, Mode.DISARMED: DiagnosticStatus.WARN}.get(
            sup.mode, DiagnosticStatus.ERROR
        )
        values = [KeyValue(key="mode", value=sup.mode.name), KeyValue(key="reason", value=sup.reason)]
        values += [KeyValue(key=k, value=str(v)) for k, v in sup.counters().items()]
        values += [KeyValue(key="prearm", value="; ".join(sup.prearm_problems) or "ok")]
        values += [KeyValue(key=f"event.{e.kind}", value=f"{e.time:.3f} {e.reason}") for e in new[-20:]]
        st = DiagnosticStatus(
            level=level,
            name=f"{self.get_namespace().rstrip('/')}/safety",
            hardware_id="safety",
            message=f"{sup.mode.name}: {sup.reason}",
            values=values,
        )
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)


def main(args: list[str] | None = None) -> int:
    from robot_rl_ros.spin import run_node

    return run_node(SafetyNode, args)


if __name__ == "__main__":
    sys.exit(main())

"""What every safety node shares: the latched e-stop (topic and service), arming, the watchdog timer
that keeps the command stream alive, mode reports and /diagnostics.

A subclass owns a supervisor (`self.sup`: mode, reason, events, counters(), prearm_problems, estop,
arm, check) and implements `_send()`, which asks the supervisor for a command and publishes it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Empty, Trigger

from robot_rl.deploy import PolicyBundle
from robot_rl_ros import qos
from robot_rl_ros.commander import extra_publishers
from robot_rl_ros.joint_supervisor import JointSupervisor, JointSupervisorConfig
from robot_rl_ros.msgs import joint_arrays, stamp_to_s
from robot_rl_ros.params import declare, max_future_s
from robot_rl_ros.prearm import RobotSpec, check_bundle


def joint_safety_params(limits, **robot: object) -> dict:
    """The parameters of a joint-level safety node (arm, legs): what both declare, with the robot's joint
    limits (a JointLimits) as defaults, and the robot's own keys and values."""
    return {
        "bundle": "",
        "auto_arm": True,
        "state_max_future_s": 0.05,  # a stamp further ahead of this node's clock is rejected
        "q_low": limits.q_low.tolist(),
        "q_high": limits.q_high.tolist(),
        "max_lead": limits.max_lead.tolist(),
        "max_speed": limits.max_speed.tolist(),
        "estop_topic": "/estop",
        "diagnostics_period_s": 0.2,
        "discovery_settle_s": 1.0,  # wall seconds of watching the graph for other commanders before arming
        **robot,
    }


class SafetyNodeBase(Node, ABC):
    def _declare_and_check(self, params: dict) -> tuple[dict, PolicyBundle | None, list[str]]:
        """Declare the node's parameters, then load its bundle and run the pre-arm checks against the robot
        and action space the parameters name: (parameters, bundle or None, pre-arm problems)."""
        p = declare(self, params)
        spec = RobotSpec(robot=p["robot"], action_mode=p["action_mode"], action_dim=p["action_dim"])
        bundle, problems = check_bundle(p["bundle"], spec)
        return p, bundle, problems

    def _setup_common(
        self,
        estop_topic: str,
        watchdog_rate_hz: float,
        event_gap_s: float,
        diagnostics_period_s: float,
        hardware_id: str,
        commander_check_period_s: float = 0.1,
        discovery_settle_s: float = 1.0,
    ) -> None:
        """Call after self.sup and self.cmd_pub exist. The timer sends when not ACTIVE, or when nothing went
        out for event_gap_s (the event path forwards each policy action at once). Another timer asks the
        graph who else publishes the command topic (robot_rl_ros.commander); arming waits until the graph
        has been watched for discovery_settle_s of wall time, as a commander that was there before this
        node started may not be discovered yet (DDS discovery runs in wall time, whatever the clock)."""
        self.hardware_id = hardware_id
        self.event_gap_s = event_gap_s
        self.last_pub_time = -1.0
        self.last_pub_wall = -1.0
        self.n_events_reported = 0
        self.last_mode = None
        self.mode_pub = self.create_publisher(String, "safety/mode", qos.LATCHED)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS)
        self.create_subscription(Bool, estop_topic, self._on_estop_topic, qos.LATCHED)
        self.create_service(Trigger, "safety/estop", self._srv_estop)
        self.create_service(Trigger, "safety/arm", self._srv_arm)
        self.emergency_client = self.create_client(Empty, "emergency")  # the robot's own e-stop
        self.create_timer(1.0 / watchdog_rate_hz, self._on_timer)
        self.create_timer(diagnostics_period_s, self._publish_diagnostics)
        self.discovery_settle_s = discovery_settle_s
        self.graph_watch_start = time.monotonic()
        # on the wall clock, as discovery runs: on a lock-stepped clock the check stood still until time started,
        # and the settling blocker of the check made at start-up could refuse the policy's first action
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(commander_check_period_s, self._check_commanders, clock=steady)
        self._check_commanders()

    def _check_commanders(self) -> None:
        topic = self.cmd_pub.topic_name
        watched = time.monotonic() - self.graph_watch_start
        settling = None
        if watched < self.discovery_settle_s:
            settling = (
                f"discovery: watching the graph for other commanders ({watched:.1f} of {self.discovery_settle_s:g} s)"
            )
        self.sup.on_command_publishers(self.now(), topic, extra_publishers(self, topic), settling)
        self._after_input()

    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    @abstractmethod
    def _send(self) -> None:
        """Implemented by each robot's node."""

    def _on_action(self, msg: Float64MultiArray) -> None:
        self.sup.on_action(np.asarray(msg.data, dtype=np.float64), self.now())
        self._send()  # forward at once: the policy's rate is the command rate

    def _on_joints(self, msg: JointState) -> None:
        """Joint-space robots: the state is the joints named self.joint_names, matched by name."""
        try:
            q, _ = joint_arrays(msg, self.joint_names)
        except ValueError as e:
            self.sup.note(self.now(), "input", f"joint_states: {e}")
            return
        self.sup.on_state(q, stamp_to_s(msg.header.stamp), self.now())
        self._after_input()

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
        first = self.sup.mode.name != "ESTOP"
        self.sup.estop(self.now(), reason)
        self._send()
        if first and self.emergency_client.service_is_ready():
            self.emergency_client.call_async(Empty.Request())  # the robot's own e-stop as a second path
        self._after_input()

    def mark_sent(self, now: float) -> None:
        """Call after each command published: the keep-alive timer measures silence from here."""
        self.last_pub_time, self.last_pub_wall = now, time.monotonic()

    def _on_timer(self) -> None:
        now = self.now()
        # The timer keeps the stream alive and runs the watchdogs; skip it when the event path just sent. On
        # simulated time the gap must hold in wall time too: a /clock jump that reaches this node before the
        # policy's action for the same step is no silence (a keep-alive sent then is a second command in the
        # step, which a lock-step bridge may take as the step's command; seen in CI on a loaded machine).
        gap = self.event_gap_s
        silent = now - self.last_pub_time >= gap and time.monotonic() - self.last_pub_wall >= gap
        keep_alive = self.sup.mode.name != "ACTIVE" or silent or now < self.last_pub_time
        if keep_alive and not self._awaits_first_action(now):
            self._send()
        else:
            self.sup.check(now)
            self._after_input()

    def _awaits_first_action(self, now: float) -> bool:
        """Whether the keep-alive waits for the policy's first action (a joint robot's node, see JointSupervisor)."""
        return False

    def _after_input(self) -> None:
        if self.sup.mode != self.last_mode:
            self.last_mode = self.sup.mode
            self.mode_pub.publish(String(data=f"{self.sup.mode.name}: {self.sup.reason}"))
            self.get_logger().warning(f"mode {self.sup.mode.name}: {self.sup.reason}")
            self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        sup = self.sup
        new = sup.events.since(self.n_events_reported)
        self.n_events_reported = sup.events.total
        # Mode changes always go out; of the repeated interventions, the latest 20.
        modes = {e.kind for e in new} & {m.name for m in type(sup.mode)}
        new = [e for e in new if e.kind in modes] + [e for e in new if e.kind not in modes][-20:]
        new.sort(key=lambda e: e.time)
        level = {"ACTIVE": DiagnosticStatus.OK, "DISARMED": DiagnosticStatus.WARN}.get(
            sup.mode.name, DiagnosticStatus.ERROR
        )
        values = [KeyValue(key="mode", value=sup.mode.name), KeyValue(key="reason", value=sup.reason)]
        values += [KeyValue(key=k, value=str(v)) for k, v in sup.counters().items()]
        values += [KeyValue(key="prearm", value="; ".join(sup.prearm_problems) or "ok")]
        values += [KeyValue(key=f"event.{e.kind}", value=f"{e.time:.3f} {e.reason}") for e in new]
        st = DiagnosticStatus(
            level=level,
            name=f"{self.get_namespace().rstrip('/')}/safety",
            hardware_id=self.hardware_id,
            message=f"{sup.mode.name}: {sup.reason}",
            values=values,
        )
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)


class JointSafetyNode(SafetyNodeBase):
    """A joint-level safety node (arm, legs): a JointSupervisor over the robot's joints, joint_states and
    policy/action in, one Float64MultiArray command stream out. A subclass builds it with
    _start_joint_safety and says how a supervised joint target becomes its command (_command_data)."""

    def _start_joint_safety(
        self,
        p: dict,
        limits,
        fallback: str,
        problems: list[str],
        joint_names: list[str],
        hardware_id: str,
        tcp_position=None,
        **config: object,
    ) -> None:
        """The supervisor from the declared parameters p and the robot's limits (a JointLimits), the
        pre-arm problems logged, and the topics and timers started."""
        cfg = JointSupervisorConfig(
            limits=limits.with_params(p),
            fallback=fallback,
            state_max_age_s=p["state_max_age_s"],
            state_max_future_s=max_future_s(self, p["state_max_future_s"]),
            command_timeout_s=p["command_timeout_s"],
            auto_arm=p["auto_arm"],
            **config,
        )
        self.sup = JointSupervisor(cfg, problems, tcp_position)
        for prob in problems:
            self.get_logger().error(f"pre-arm: {prob}")
        self.joint_names = joint_names
        self.cmd_pub = self.create_publisher(Float64MultiArray, p["command_topic"], qos.COMMAND)
        self.create_subscription(JointState, "joint_states", self._on_joints, qos.SENSOR)
        # The policy's joint targets, stamped with the joint state they answer (robot_rl_ros.policy_node).
        self.create_subscription(JointState, "policy/action", self._on_joint_action, qos.COMMAND)
        # An action that answers a state not yet here waits for it, at most state_max_age_s of wall time (a
        # state later than that is stale anyway); the wall clock, as a lock-stepped simulator's clock stands still
        # until a command goes out.
        self._waiting: tuple[np.ndarray, float] | None = None
        self._wait_timer = self.create_timer(
            p["state_max_age_s"], self._stop_waiting, clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        self._wait_timer.cancel()
        self._setup_common(
            p["estop_topic"],
            p["watchdog_rate_hz"],
            p["event_gap_s"],
            p["diagnostics_period_s"],
            hardware_id,
            discovery_settle_s=p["discovery_settle_s"],
        )

    @abstractmethod
    def _command_data(self, q: np.ndarray) -> np.ndarray:
        """The command message's data for supervised joint targets q."""

    def _on_joint_action(self, msg: JointState) -> None:
        now = self.now()
        try:
            action, _ = joint_arrays(msg, self.joint_names, "policy action")
        except ValueError as e:
            self.sup.refuse_action(now, str(e))
            self._send()
            return
        stamp = stamp_to_s(msg.header.stamp)
        if self.sup.awaits_state(stamp):
            self._waiting = (action, stamp)
            self._wait_timer.reset()
            return
        self._take_action(action, stamp)

    def _take_action(self, action: np.ndarray, stamp: float) -> None:
        self._waiting = None
        self._wait_timer.cancel()
        self.sup.on_action(action, self.now(), stamp)
        self._send()  # forward at once: the policy's rate is the command rate

    def _awaits_first_action(self, now: float) -> bool:
        return self.sup.awaits_first_action(now)

    def _stop_waiting(self) -> None:
        """The state the waiting action answers did not come: judge it against the newest one."""
        if self._waiting is not None:
            self._take_action(*self._waiting)  # cancels this timer
        else:
            self._wait_timer.cancel()

    def _on_joints(self, msg: JointState) -> None:
        super()._on_joints(msg)
        if self._waiting is not None and not self.sup.awaits_state(self._waiting[1]):
            self._take_action(*self._waiting)

    def _send(self) -> None:
        now = self.now()
        q = self.sup.step(now)
        if q is not None:
            self.cmd_pub.publish(Float64MultiArray(data=[float(x) for x in self._command_data(q)]))
            self.mark_sent(now)
        self._after_input()

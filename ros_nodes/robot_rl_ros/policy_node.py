"""Policy node: runs a policy bundle on a timer at the bundle's rate and publishes the raw action.

Generic over robots: the bundle's observation layout names raw-state keys, and the `inputs`
parameter says which topics (and message kinds) provide them. It never commands a robot; the
safety node is the only publisher of robot commands.

A swarm drone's bundle (policy.yaml extra.swarm) also reads its neighbours: `neighbours` names the other
drones' namespaces, whose `odom` is turned into the broadcasts training delivered (rate and latency from the
bundle unless set; see neighbours.py) and offered to the layout as `neighbour_states`. With fewer than
`min_neighbours` neighbours heard (default: the bundle's k, or all listed drones if fewer) the node publishes
no action and says why, so the safety node's command watchdog takes over; min_neighbours 0 pads missing
neighbours far away and still, as training does for teams smaller than k + 1. With `publish_observation`
each observation goes out with the command computed from it on `policy/observation` (Float32MultiArray:
obs_dim values, then the command), for replay checks and logs.
"""

from __future__ import annotations

import sys

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float32MultiArray, Float64MultiArray, MultiArrayDimension, MultiArrayLayout, String

from robot_rl.deploy import BundleError, PolicyRuntime, load_bundle
from robot_rl.deploy.plan_executor import PLAN_FEATURES_INPUT
from robot_rl_ros import qos
from robot_rl_ros.latency import LatencyStats
from robot_rl_ros.monitor import InputMonitor
from robot_rl_ros.msgs import (
    ADAPTERS,
    JOINT_INPUT_NAMES,
    joint_state,
    odometry_to_raw,
    parse_input_spec,
    s_to_stamp,
    stamp_to_s,
)
from robot_rl_ros.neighbours import NeighbourBroadcasts
from robot_rl_ros.params import declare, max_future_s
from robot_rl_ros.spin import node_main

PARAMS = {
    "bundle": "",
    "inputs": ["odom:odometry", "goal:point"],
    "goal": [0.0, 0.0, 1.0],  # used until a goal message arrives (raw key 'goal')
    "command": [0.0, 0.0, 0.0],  # a legged robot's velocity command until one arrives: stand
    "state_max_age_s": 0.2,
    "state_max_future_s": 0.05,  # a stamp further ahead of this node's clock is rejected
    "diagnostics_period_s": 1.0,
    # '' : act on a timer at the bundle's rate (a robot). An input topic: act on each accepted message
    # of it instead, for lock-step simulation that publishes one state per control period, so the
    # policy always sees the state of the current step. ALL_INPUTS: act once every watched input has a
    # sample with the same stamp (a lock-step simulator stamps one step's odometry, setpoint and ranges alike).
    "act_on": "",
    # swarm bundles: the other drones' namespaces, and how their broadcasts arrive (< 0: the bundle's values)
    "neighbours": [""],
    "neighbour_rate_hz": -1.0,
    "neighbour_latency_s": -1.0,
    "neighbour_max_age_s": 0.5,
    "neighbour_origin_s": -1.0,  # the first broadcast instant on the node's clock (< 0: the first stamp heard)
    "min_neighbours": -1,  # < 0: min(k, number of neighbours listed); 0: pad missing ones as training does
    "publish_observation": False,
    # a plan-guided bundle (policy.yaml's plan section): which of its plans to follow (the scene's layout)
    "plan_index": 0,
    # Until the safety node reports ACTIVE on safety/mode, the bundle's integrators (a hover policy's goal error
    # integral) restart at zero every step: a drone held on the ground by pre-arm checks would otherwise arm with
    # the integral wound up (measured: 1 m s after 1 s held, and a hover policy then climbed into the geofence).
    # With no safety/mode publisher the policy integrates from its first step, as before.
    "hold_integrators_until_active": True,
}


ALL_INPUTS = "all_inputs"

# Operator setpoints (a goal, a velocity command): valid from their parameter on, not watched for staleness.
SETPOINTS = {"goal", "command"}


class PolicyNode(Node):
    def __init__(self, **kwargs):
        super().__init__("policy", **kwargs)
        p = declare(self, PARAMS)
        self.bundle = load_bundle(p["bundle"])  # BundleError names the problem in one line
        self.runtime = PolicyRuntime(self.bundle)
        self.raw: dict[str, np.ndarray] = {k: np.asarray(p[k], dtype=np.float64) for k in SETPOINTS}
        self.monitors: dict[str, InputMonitor] = {}
        # the runtime itself keeps the last action and the bundle's integral terms
        provided = {"last_action", *SETPOINTS, *self.runtime.constants} | {i.name for i in self.bundle.integrators}
        if self.runtime.arm is not None:
            provided |= {"ee_position", "ee_quaternion"}  # FK of the reported joints (the bundle's IK)
        if self.runtime.plan is not None:  # the runtime's plan executor observes the plan
            self.runtime.start_plan(p["plan_index"])
            provided.add(PLAN_FEATURES_INPUT)
        for spec in p["inputs"]:
            topic, kind, keys = parse_input_spec(spec)
            msg_type, _, factory = ADAPTERS[kind]
            mon = InputMonitor(topic, p["state_max_age_s"], max_future_s(self, p["state_max_future_s"]))
            # A setpoint from its parameter is always valid; setpoint messages only refresh it.
            if not SETPOINTS & set(keys):
                self.monitors[topic] = mon
            trigger = topic == p["act_on"] or p["act_on"] == ALL_INPUTS
            self.create_subscription(msg_type, topic, self._make_cb(mon, factory(keys[0]), trigger), qos.SENSOR)
            provided.update(keys)
        self.neighbours = self._setup_neighbours(p)
        if self.neighbours is not None:
            provided.add("neighbour_states")
        needed = {k for t in self.bundle.observation for k in t.inputs}
        missing = sorted(needed - provided)
        if missing:
            raise BundleError(f"observation needs raw state {missing} that no input provides (inputs: {p['inputs']})")
        self.safety_mode: str | None = None  # the safety node's mode, once it has said one
        if p["hold_integrators_until_active"] and self.bundle.integrators:
            self.create_subscription(String, "safety/mode", self._on_safety_mode, qos.LATCHED)
        self.joint_targets = self._joint_targets(p["inputs"])
        action_type = Float64MultiArray if self.joint_targets is None else JointState
        self.pub = self.create_publisher(action_type, "policy/action", qos.COMMAND)
        self.obs_pub = None
        if p["publish_observation"]:
            self.obs_pub = self.create_publisher(Float32MultiArray, "policy/observation", qos.RECORD)
            dims = [("observation", self.bundle.obs_dim), ("command", len(self.bundle.action.names))]
            self._obs_layout = MultiArrayLayout(dim=[MultiArrayDimension(label=n, size=k, stride=k) for n, k in dims])
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS)
        period = 1.0 / self.bundle.control_rate_hz
        self.stats = LatencyStats(period)
        self.skipped: dict[str, int] = {"stale": 0, "invalid": 0}
        self.last_skip_reason = ""
        self.published = 0
        names = self.bundle.action.names
        self._layout = [MultiArrayDimension(label=",".join(names), size=len(names), stride=1)]
        self.all_inputs = p["act_on"] == ALL_INPUTS
        self.last_acted_stamp = float("-inf")
        if p["act_on"] not in ("", ALL_INPUTS) and p["act_on"] not in [parse_input_spec(x)[0] for x in p["inputs"]]:
            raise ValueError(f"act_on '{p['act_on']}' is not one of the inputs {p['inputs']}")
        self.timer = None if p["act_on"] else self.create_timer(period, self._tick)
        self.create_timer(p["diagnostics_period_s"], self._publish_diagnostics)
        self.get_logger().info(
            f"policy {self.bundle.robot}/{self.bundle.task} at {self.bundle.control_rate_hz} Hz, "
            f"obs {self.bundle.obs_dim}, "
            f"actions {self.bundle.action.names} ({self.bundle.action.mode})"
        )

    def _joint_targets(self, inputs: list[str]) -> tuple[list[str], InputMonitor] | None:
        """What goes out: the command in robot units (Float64MultiArray), or joint targets (an arm's after the
        bundle's IK, a legged robot's) as a JointState named as the joint-state input and stamped with the state
        they answer, so the safety node judges them against that state: (joint names, that input's monitor)."""
        if self.runtime.arm is None and self.bundle.action.mode != "joint_position":
            return None
        joints = [(topic, kind) for topic, kind, _ in map(parse_input_spec, inputs) if kind in JOINT_INPUT_NAMES]
        if len(joints) != 1:
            kinds = " or ".join(JOINT_INPUT_NAMES)
            raise BundleError(f"joint targets answer one joint-state input ({kinds}); inputs: {inputs}")
        topic, kind = joints[0]
        return JOINT_INPUT_NAMES[kind], self.monitors[topic]

    def _setup_neighbours(self, p: dict) -> NeighbourBroadcasts | None:
        names = [n.strip("/") for n in p["neighbours"] if n.strip("/")]
        swarm = self.bundle.extra.get("swarm") or {}
        if not names:
            if swarm:
                raise BundleError("a swarm bundle needs the other drones' namespaces (parameter 'neighbours')")
            return None
        if not swarm:
            raise BundleError("parameter 'neighbours' is set but the bundle is not a swarm bundle (no extra.swarm)")
        rate = p["neighbour_rate_hz"] if p["neighbour_rate_hz"] > 0 else float(swarm["neighbour_rate_hz"])
        latency = p["neighbour_latency_s"] if p["neighbour_latency_s"] >= 0 else float(swarm["neighbour_latency_s"])
        origin = p["neighbour_origin_s"] if p["neighbour_origin_s"] >= 0 else None
        k = int(swarm["k_neighbours"])
        self.min_neighbours = min(k, len(names)) if p["min_neighbours"] < 0 else int(p["min_neighbours"])
        self.neighbour_names = names
        ahead_s = max_future_s(self, p["state_max_future_s"])
        nb = NeighbourBroadcasts(rate, latency, p["neighbour_max_age_s"], origin, max_future_s=ahead_s)
        for name in names:
            self.create_subscription(Odometry, f"/{name}/odom", self._make_neighbour_cb(nb, name), qos.SENSOR)
        return nb

    def _make_neighbour_cb(self, nb: NeighbourBroadcasts, name: str):
        def cb(msg: Odometry) -> None:
            raw = odometry_to_raw(msg)
            if not (np.all(np.isfinite(raw["position"])) and np.all(np.isfinite(raw["velocity"]))):
                self._skip("invalid", f"neighbour '{name}': non-finite odometry rejected")
                return
            now = self.get_clock().now().nanoseconds * 1e-9
            why = nb.on_state(name, stamp_to_s(msg.header.stamp), now, raw["position"], raw["velocity"])
            if why is not None:
                self._skip("stale", why)

        return cb

    def _make_cb(self, mon: InputMonitor, convert, trigger: bool = False):
        def cb(msg) -> None:
            now = self.get_clock().now().nanoseconds * 1e-9
            try:
                values = convert(msg)
            except ValueError as e:  # e.g. a joint missing from joint_states
                self._skip("invalid", f"input '{mon.name}': {e}")
                return
            if not all(np.all(np.isfinite(v)) for v in values.values()):
                self._skip("invalid", mon.reject_nonfinite())
                return
            why = mon.accept(stamp_to_s(msg.header.stamp), now)
            if why is not None:
                self._skip("stale", why)
                return
            self.raw.update(values)
            if trigger and self.all_inputs:
                # the watched inputs' common stamp: a setpoint (not watched) arriving after a period's state must
                # not act on that state a second time
                stamps = {m.last_stamp for m in self.monitors.values()}
                if len(stamps) == 1 and (common := stamps.pop()) > self.last_acted_stamp:
                    self.last_acted_stamp = common
                    self._tick()
            elif trigger:
                self._tick()

        return cb

    def _on_safety_mode(self, msg: String) -> None:
        self.safety_mode = msg.data.split(":", 1)[0].strip()  # "ACTIVE: armed" -> "ACTIVE"

    def _skip(self, kind: str, reason: str) -> None:
        self.skipped[kind] += 1
        self.last_skip_reason = reason
        self.get_logger().warning(reason, throttle_duration_sec=1.0)

    def _tick(self) -> None:
        t0 = self.stats.enter()
        now = self.get_clock().now().nanoseconds * 1e-9
        for topic, mon in self.monitors.items():
            if not mon.fresh(now):
                # No action rather than an action from old state: the safety node's command
                # watchdog then takes over.
                self._skip("stale", f"input '{topic}' stale: age {mon.age(now):.3f} s")
                return
        if self.neighbours is not None:
            states, _ = self.neighbours.received(now)
            if len(states) < self.min_neighbours:
                heard = len(states)
                self._skip(
                    "stale", f"neighbours heard: {heard} of {len(self.neighbour_names)}, need {self.min_neighbours}"
                )
                return
            self.raw["neighbour_states"] = states
        if self.safety_mode is not None and self.safety_mode != "ACTIVE":
            self.runtime.hold_integrators()
        try:
            action = self.runtime.act(self.raw)
        except ValueError as e:
            self._skip("invalid", str(e))
            return
        if self.obs_pub is not None:  # one message, so the pair cannot be torn apart on the way
            data = [float(x) for x in self.runtime.last_observation] + [float(x) for x in action]
            self.obs_pub.publish(Float32MultiArray(data=data, layout=self._obs_layout))
        if self.joint_targets is None:
            self.pub.publish(Float64MultiArray(data=[float(x) for x in action], layout=self._layout_msg()))
        else:
            names, state = self.joint_targets
            self.pub.publish(joint_state(names, action, [], s_to_stamp(state.last_stamp)))
        self.published += 1
        self.stats.exit(t0)

    def _layout_msg(self) -> MultiArrayLayout:
        return MultiArrayLayout(dim=self._layout, data_offset=0)

    def _publish_diagnostics(self) -> None:
        s = self.stats.summary()
        values = {
            **{k: f"{v:.4g}" for k, v in s.items()},
            "published": str(self.published),
            **{f"skipped.{k}": str(v) for k, v in self.skipped.items()},
            "last_skip": self.last_skip_reason,
        }
        level = (
            DiagnosticStatus.OK if not self.skipped["stale"] and not self.skipped["invalid"] else DiagnosticStatus.WARN
        )
        st = DiagnosticStatus(
            level=level,
            name=f"{self.get_namespace().rstrip('/')}/policy",
            hardware_id=self.bundle.robot,
            message=f"p99 {s.get('latency_p99_ms', 0):.2f} ms, missed {int(s['missed_deadlines'])}",
            values=[KeyValue(key=k, value=v) for k, v in values.items()],
        )
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)


main = node_main(PolicyNode)  # the console script


if __name__ == "__main__":
    sys.exit(main())

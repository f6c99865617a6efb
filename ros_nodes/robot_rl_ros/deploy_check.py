"""`robot-rl deploy check BUNDLE`: a dry run against live topics that reports what would block arming.

It checks the bundle against the robot (schema, ONNX hash, robot, action mode and size, rate), then
listens to the live graph in the robot's namespace: every input the observation needs is published
with the right type, at the rate, with finite values of the right size in plausible units and
fresh stamps; someone takes the robot's command topic (and nobody else publishes it: the safety node
must be the only commander); the robot's `emergency` service is there. Finally it runs the policy
once on the received state and shows the command it would send. The robot's topics, inputs and
action come from a profile chosen by the bundle's robot (Crazyflie, Panda-like arm, Go1-like
quadruped); options override them. Exit status: 0 ready, 1 blocked, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_rl_ros.prearm import RobotSpec, check_bundle

EMERGENCY_SERVICE = ("emergency", "std_srvs/srv/Empty")
MIN_RATE_HZ = {"odometry": 50.0, "imu": 50.0, "joint_state": 50.0, "arm_joints": 25.0, "leg_joints": 50.0,
               "body_velocity": 50.0}  # fmt: skip
# A publisher at the needed rate measures a little under it over a short window (scheduling jitter: a 50 Hz
# sim bridge measured 49.6-49.8 Hz on a loaded machine), so a rate within this fraction of the need passes.
RATE_TOLERANCE = 0.95
SETPOINT_KINDS = ("point", "velocity_command")  # may be constant (a parameter): neither rate nor age applies
# Plausibility bounds that catch unit mistakes (degrees for radians, mm for m, wrong quaternion order).
# m, m/s, rad/s (a 2000 deg/s gyro), rad, rad/s, m
MAX_ABS = {"position": 100.0, "velocity": 20.0, "angular_velocity": 35.0, "joint_position": 7.0,
           "joint_velocity": 50.0, "gripper_width": 0.2, "base_linear_velocity": 20.0}  # fmt: skip


@dataclass(frozen=True)
class RobotProfile:
    namespace: str
    inputs: tuple[str, ...]
    command: tuple[str, str]  # topic, type the robot takes commands on
    action_mode: str
    action_dim: int


F64 = "std_msgs/msg/Float64MultiArray"
PROFILES = {
    "crazyflie_2_1": RobotProfile("cf1", ("odom:odometry", "goal:point"), ("cmd_vel_legacy", "geometry_msgs/msg/Twist"),
                                  "rpyt", 4),
    "panda_like": RobotProfile("arm", ("joint_states:arm_joints", "target_position:point"),
                               ("forward_position_controller/commands", F64), "ee_position", 4),
    "go1_like": RobotProfile("go1", ("joint_states:leg_joints", "imu:imu", "odom:body_velocity",
                                     "cmd_vel:velocity_command"), ("joint_commands", F64), "joint_position", 12),
}  # fmt: skip


def _policy_yaml(path: str) -> dict:
    """The bundle's policy.yaml as a dict; {} when it cannot be read (check_bundle reports why)."""
    import yaml

    try:
        doc = yaml.safe_load((Path(path) / "policy.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def bundle_robot(path: str) -> str:
    """The robot a bundle names (the Crazyflie when it cannot be read: check_bundle reports why)."""
    return str(_policy_yaml(path).get("robot", "crazyflie_2_1"))


def _is_swarm_bundle(path: str) -> bool:
    extra = _policy_yaml(path).get("extra")
    return isinstance(extra, dict) and "swarm" in extra


@dataclass
class Finding:
    level: str  # "ok", "warn" or "block"
    what: str
    detail: str


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)

    def add(self, level: str, what: str, detail: str) -> None:
        self.findings.append(Finding(level, what, detail))

    @property
    def blockers(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "block"]

    def render(self) -> str:
        tag = {"ok": "ok   ", "warn": "WARN ", "block": "BLOCK"}
        lines = [f"{tag[f.level]} {f.what}: {f.detail}" for f in self.findings]
        n = len(self.blockers)
        lines.append("ready to arm" if n == 0 else f"{n} problem(s) would block arming")
        return "\n".join(lines)


@dataclass
class TopicSample:
    receipts: list[float] = field(default_factory=list)  # ROS time at receipt
    stamps: list[float] = field(default_factory=list)
    last: dict | None = None
    nonfinite: int = 0

    def rate_hz(self) -> float:
        if len(self.receipts) < 2:
            return 0.0
        span = self.receipts[-1] - self.receipts[0]
        return (len(self.receipts) - 1) / span if span > 0 else float("inf")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from robot_rl_ros.policy_node import PARAMS as POLICY

    ap = argparse.ArgumentParser(prog="robot-rl deploy check", description=__doc__.splitlines()[0])
    ap.add_argument("bundle", help="policy bundle directory")
    ap.add_argument("--namespace", default=None, help="the robot's namespace (default: the robot's profile)")
    ap.add_argument("--inputs", nargs="+", default=None, help="topic:kind as the policy node")
    ap.add_argument("--goal", nargs=3, type=float, default=list(POLICY["goal"]))
    ap.add_argument("--command", nargs=3, type=float, default=list(POLICY["command"]), help="velocity command")
    ap.add_argument("--robot", default=None, help=f"the robot ({', '.join(PROFILES)}); default: the bundle's")
    ap.add_argument("--action-mode", default=None)
    ap.add_argument("--action-dim", type=int, default=None)
    ap.add_argument("--command-topic", default=None, help="where the robot takes commands (default: its profile)")
    ap.add_argument("--seconds", type=float, default=2.0, help="how long to listen (default 2 s)")
    ap.add_argument(
        "--discovery-timeout", type=float, default=5.0, help="wait up to this long for the topics to appear (s)"
    )
    ap.add_argument("--max-age", type=float, default=0.2, help="stamp age limit, s")
    ap.add_argument("--use-sim-time", action="store_true", help="judge stamps against /clock")
    ap.add_argument("--domain-id", type=int, default=None, help="default: ROS_DOMAIN_ID")
    args = ap.parse_args(argv)
    if args.robot is None:  # a robot we know follows the bundle; anything else is checked as a Crazyflie
        robot = bundle_robot(args.bundle)
        args.robot = robot if robot in PROFILES else "crazyflie_2_1"
    prof = PROFILES.get(args.robot, PROFILES["crazyflie_2_1"])
    args.namespace = args.namespace or prof.namespace
    args.inputs = args.inputs or list(prof.inputs)
    args.action_mode = args.action_mode or prof.action_mode
    args.action_dim = args.action_dim or prof.action_dim
    args.command_topic = (args.command_topic or prof.command[0], prof.command[1])
    return args


def _resolve(ns: str, topic: str) -> str:
    return topic if topic.startswith("/") else f"/{ns.strip('/')}/{topic}".replace("//", "/")


def check_bundle_part(args, report: Report):
    spec = RobotSpec(robot=args.robot, action_mode=args.action_mode, action_dim=args.action_dim)
    bundle, problems = check_bundle(args.bundle, spec)
    for p in problems:
        report.add("block", "bundle", p)
    if bundle is not None and not problems:
        report.add(
            "ok",
            "bundle",
            f"{bundle.robot}/{bundle.task} {bundle.action.mode} {bundle.action.names} at "
            f"{bundle.control_rate_hz:g} Hz, obs {bundle.obs_dim}, sha256 {bundle.onnx_sha256[:12]}",
        )
    return bundle


def check_values(name: str, s: TopicSample, args, now: float, kind: str, report: Report) -> None:
    rate, need = s.rate_hz(), (0.0 if kind in SETPOINT_KINDS else MIN_RATE_HZ.get(kind, 10.0))
    if not s.receipts:
        report.add("block", name, f"no message in {args.seconds:g} s")
        return
    level = "ok" if rate >= RATE_TOLERANCE * need else "block"
    report.add(level, f"{name} rate", f"{rate:.1f} Hz (needs >= {need:g} Hz)")
    if s.nonfinite:
        report.add("block", f"{name} values", f"{s.nonfinite} message(s) with NaN/Inf")
    raw = s.last or {}
    for key, v in raw.items():
        v = np.asarray(v, dtype=np.float64)
        if key in MAX_ABS and np.max(np.abs(v)) > MAX_ABS[key]:
            report.add("block", f"{name} units", f"|{key}| {np.max(np.abs(v)):.3g} > {MAX_ABS[key]:g}: wrong units?")
        if key == "quaternion" and abs(np.linalg.norm(v) - 1.0) > 1e-2:
            report.add("block", f"{name} units", f"quaternion norm {np.linalg.norm(v):.3f} != 1")
    dims = ", ".join(f"{k}[{np.asarray(v).size}]" for k, v in raw.items())
    report.add("ok", f"{name} fields", dims or "none")
    if kind in SETPOINT_KINDS:
        return  # a goal or a velocity command can be constant: neither rate nor age applies
    age = now - s.stamps[-1]
    report.add(
        "ok" if 0.0 <= age <= args.max_age else "block",
        f"{name} stamp age",
        f"{age * 1e3:.0f} ms (max {args.max_age * 1e3:.0f} ms; clock mismatch if large or negative)",
    )
    back = int(np.sum(np.diff(s.stamps) <= 0)) if len(s.stamps) > 1 else 0
    if back:
        report.add("warn", f"{name} stamps", f"{back} out-of-order or repeated stamp(s)")


def check_graph(node, args, report: Report) -> None:
    ns = args.namespace
    cmd_name, cmd_type = args.command_topic
    cmd_topic = _resolve(ns, cmd_name)
    subs = node.get_subscriptions_info_by_topic(cmd_topic)
    takers = [f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in subs if i.node_name != node.get_name()]
    bad = sorted({i.topic_type for i in subs} - {cmd_type})
    if bad:
        report.add("block", cmd_topic, f"subscribed with type {bad}, expected {cmd_type}")
    elif not takers:
        report.add("block", cmd_topic, "no subscriber: nothing on the robot's side takes commands")
    else:
        report.add("ok", cmd_topic, f"{cmd_type} taken by {', '.join(takers)}")
    pubs = [f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in node.get_publishers_info_by_topic(cmd_topic)]
    if pubs:
        report.add("block", cmd_topic, f"already published by {', '.join(pubs)}: the safety node must be the only one")
    srv = _resolve(ns, EMERGENCY_SERVICE[0])
    types = dict(node.get_service_names_and_types()).get(srv)
    if not types:
        report.add("warn", srv, "no emergency service: the safety node's second e-stop path is missing")
    elif EMERGENCY_SERVICE[1] not in types:
        report.add("block", srv, f"type {types}, expected {EMERGENCY_SERVICE[1]}")
    else:
        report.add("ok", srv, EMERGENCY_SERVICE[1])


def dry_run(bundle, raw: dict, report: Report) -> None:
    from robot_rl.deploy import PolicyRuntime
    from robot_rl_ros.limits import DroneLimits
    from robot_rl_ros.msgs import ARM_JOINT_NAMES

    try:
        runtime = PolicyRuntime(bundle)
        action = np.asarray(runtime.act(raw), dtype=np.float64)
    except (ValueError, KeyError) as e:
        report.add("block", "policy dry run", f"{type(e).__name__}: {e}")
        return
    names = bundle.action.names if runtime.arm is None else ARM_JOINT_NAMES  # an arm outputs joint targets
    if action.shape != (len(names),) or not np.all(np.isfinite(action)):
        report.add("block", "policy dry run", f"action {action.tolist()} has the wrong size or NaN/Inf")
        return
    detail = ", ".join(f"{n}={v:.4g}" for n, v in zip(names, action, strict=True))
    report.add("ok", "policy dry run", f"would command {detail}")
    if bundle.action.mode == "rpyt":
        lim = DroneLimits()
        if np.any(action < lim.low) or np.any(action > lim.high):
            report.add("warn", "policy dry run", "the safety node would clip this command")


def run_check(args) -> Report:
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from robot_rl_ros import qos
    from robot_rl_ros.msgs import ADAPTERS, parse_input_spec, stamp_to_s

    report = Report()
    bundle = check_bundle_part(args, report)
    inputs = []
    for spec in args.inputs:
        try:
            inputs.append(parse_input_spec(spec))
        except ValueError as e:
            report.add("block", "inputs", str(e))
    provided = {"last_action", "goal", "command"} | {k for _, _, keys in inputs for k in keys}
    if bundle is not None:
        provided |= {i.name for i in bundle.integrators}
        # what the runtime derives itself: an arm's TCP pose (FK), a robot's constant inputs
        provided |= {"ee_position", "ee_quaternion", "gravity_direction", "default_joint_position"}
        missing = sorted({k for t in bundle.observation for k in t.inputs} - provided)
        if missing:
            report.add("block", "observation", f"needs raw state {missing} that no input provides")
    ctx = Context()
    rclpy.init(context=ctx, domain_id=args.domain_id)
    node = rclpy.create_node(
        "deploy_check",
        namespace=f"/{args.namespace.strip('/')}",
        context=ctx,
        parameter_overrides=[Parameter("use_sim_time", value=args.use_sim_time)],
    )
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    samples: dict[str, TopicSample] = {}
    try:
        for topic, kind, keys in inputs:
            msg_type, _, factory = ADAPTERS[kind]
            s = samples.setdefault(topic, TopicSample())
            convert = factory(keys[0])

            def cb(msg, s=s, convert=convert) -> None:
                s.receipts.append(node.get_clock().now().nanoseconds * 1e-9)
                s.stamps.append(stamp_to_s(msg.header.stamp))
                s.last = convert(msg)
                s.nonfinite += not all(np.all(np.isfinite(v)) for v in s.last.values())

            node.create_subscription(msg_type, topic, cb, qos.SENSOR)
        # DDS discovery of a fresh participant takes a variable 0.1-2 s: wait for the robot's topics
        # to appear (bounded) before the listening window starts, so the rates are measured fairly.
        names = [_resolve(args.namespace, topic) for topic, _, _ in inputs]
        t_disc = time.monotonic() + args.discovery_timeout
        while time.monotonic() < t_disc and not all(node.get_publishers_info_by_topic(n) for n in names):
            ex.spin_once(timeout_sec=0.05)
        t_end = time.monotonic() + args.seconds
        while time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.01)
        now = node.get_clock().now().nanoseconds * 1e-9
        raw = {"goal": np.asarray(args.goal, dtype=np.float64), "command": np.asarray(args.command, dtype=np.float64)}
        for topic, kind, _ in inputs:
            name = _resolve(args.namespace, topic)
            want = ADAPTERS[kind][0]
            want_type = f"{want.__module__.split('.')[0]}/msg/{want.__name__}"
            # Types as the publishers offer them (this node's own subscription is in the graph too).
            have = sorted({i.topic_type for i in node.get_publishers_info_by_topic(name)})
            if kind in SETPOINT_KINDS and not have:
                report.add("ok", name, "not published: the policy node's parameter value is used")
                continue
            if not have:
                report.add("block", name, f"no publisher (expected {want_type})")
                continue
            if want_type not in have:
                report.add("block", name, f"type {have}, expected {want_type}")
                continue
            report.add("ok", name, f"{want_type}, {node.count_publishers(name)} publisher(s)")
            check_values(name, samples[topic], args, now, kind, report)
            raw.update(samples[topic].last or {})
        check_graph(node, args, report)
        if bundle is not None and not report.blockers:
            dry_run(bundle, raw, report)
    finally:
        ex.shutdown()
        node.destroy_node()
        ctx.try_shutdown()
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point for `robot-rl deploy check BUNDLE [options]`; argv excludes the program name."""
    try:
        args = parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) and 2
    if _is_swarm_bundle(args.bundle):
        print(
            f"{args.bundle} is a swarm bundle (one drone of a team): deploy check covers single-robot bundles; "
            f"fly the team in software in the loop with `robot-rl sitl bundle={args.bundle}` instead",
            file=sys.stderr,
        )
        return 2
    report = run_check(args)
    print(report.render())
    return 1 if report.blockers else 0


if __name__ == "__main__":
    sys.exit(main())

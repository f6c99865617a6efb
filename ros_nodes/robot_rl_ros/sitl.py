"""Software in the loop: sim bridge, policy and safety nodes as separate processes over DDS on loopback.

`fly(bundle_dir, seconds, goal)` is what a demo or CI test calls; `SitlGraph` starts the same
processes for tests that inject faults (kill the policy, publish bad state, press e-stop).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from robot_rl_ros.rosenv import local_dds_env, next_domain_id


def _pythonpath() -> str:
    import robot_rl

    here = Path(__file__).resolve().parent.parent  # ros_nodes/
    root = Path(robot_rl.__file__).resolve().parent.parent  # holds robot_rl/ and sim/
    parts = [str(here), str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def _ros_arg(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
        return "[" + ",".join(f"'{x}'" for x in v) + "]"
    if isinstance(v, (list, tuple, np.ndarray)):
        return "[" + ",".join(_ros_arg(float(x)) for x in v) + "]"
    return str(v)


class SitlGraph:
    """Starts nodes as processes in one namespace and one private DDS domain; stops them on exit."""

    def __init__(
        self,
        namespace: str = "cf1",
        domain_id: int | None = None,
        lockstep: bool = True,
        log_dir: str | None = None,
    ):
        self.namespace = namespace.strip("/")
        self.domain_id = next_domain_id() if domain_id is None else domain_id
        self.lockstep = lockstep
        self.env = local_dds_env(self.domain_id)
        self.env["PYTHONPATH"] = _pythonpath()
        self.env["PYTHONUNBUFFERED"] = "1"
        self.log_dir = Path(log_dir or self.env["ROS_LOG_DIR"])
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, module: str, params: dict, namespace: str | None = None) -> subprocess.Popen:
        """A node as a process, in the graph's namespace unless one is given ('' for the root)."""
        ns = self.namespace if namespace is None else namespace.strip("/")
        args = [
            sys.executable,
            "-m",
            f"robot_rl_ros.{module}",
            "--ros-args",
            "-r",
            f"__ns:=/{ns}",
        ]
        if self.lockstep and not module.endswith("sim_bridge"):  # the sim bridge is the clock
            params = {"use_sim_time": True, **params}
        for k, v in params.items():
            args += ["-p", f"{k}:={_ros_arg(v)}"]
        log = open(self._log_path(name), "w")  # noqa: SIM115
        proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = proc
        return proc

    def _start_gate(self, observers: int) -> dict:
        """Lock-step: hold time until the policy, the safety node and `observers` more nodes read the state."""
        return {"start_after_subscribers": 2 + observers} if self.lockstep else {}

    def start_flight(
        self,
        bundle_dir: str,
        goal,
        sim: dict | None = None,
        policy: dict | None = None,
        safety: dict | None = None,
        observers: int = 1,
    ) -> None:
        """The Crazyflie: sim bridge, policy node, safety node. Lock-step time starts once the policy, the
        safety node and `observers` more readers (an Observer) read odometry, so on a loaded machine an observer
        still being discovered misses none of a short flight's first mode changes."""
        self.start(
            "sim_bridge", "sim_bridge", {"lockstep": self.lockstep, **self._start_gate(observers), **(sim or {})}
        )
        self.start("policy", "policy_node", {"bundle": str(bundle_dir), "goal": list(goal), **(policy or {})})
        self.start("safety", "safety_node", {"bundle": str(bundle_dir), **(safety or {})})

    def start_reach(
        self,
        bundle_dir: str,
        target,
        sim: dict | None = None,
        policy: dict | None = None,
        safety: dict | None = None,
        observers: int = 1,
    ) -> None:
        """The arm: sim bridge (ros2_control topics), policy node (bundle IK -> joint targets), arm safety.
        Lock-step time starts once they and `observers` more readers read joint_states (as for the flight)."""
        sim = {"lockstep": self.lockstep, "target": list(target), **self._start_gate(observers), **(sim or {})}
        self.start("sim_bridge", "arm_sim_bridge", sim)
        inputs = ["joint_states:arm_joints", "target_position:point"]
        # The bridge publishes one joint_states per control period (in both modes) and the policy acts on
        # each. On a timer of the same rate the policy would see a state up to one period old, depending on
        # the phase of the two timers: measured 0.5 mm to 23 mm hold error from run to run.
        act_on = {"act_on": "joint_states"}
        self.start("policy", "policy_node", {"bundle": str(bundle_dir), "inputs": inputs, **act_on, **(policy or {})})
        self.start("safety", "arm_safety_node", {"bundle": str(bundle_dir), **(safety or {})})

    def start_walk(
        self,
        bundle_dir: str,
        command,
        sim: dict | None = None,
        policy: dict | None = None,
        safety: dict | None = None,
    ) -> None:
        """The quadruped: sim bridge (Go1 driver topics), policy node (velocity command), leg safety."""
        self.start("sim_bridge", "quadruped_sim_bridge", {"lockstep": self.lockstep, **(sim or {})})
        inputs = ["joint_states:leg_joints", "imu:imu", "odom:body_velocity"]
        act_on = {"act_on": "joint_states"}  # one state per control period, as for the arm
        params = {"bundle": str(bundle_dir), "inputs": inputs, "command": list(command), **act_on, **(policy or {})}
        self.start("policy", "policy_node", params)
        self.start("safety", "leg_safety_node", {"bundle": str(bundle_dir), **(safety or {})})

    def start_swarm(
        self,
        bundle_dir: str,
        num_drones: int,
        scene: int = 0,
        sim: dict | None = None,
        policy: dict | None = None,
        safety: dict | None = None,
        observers: int = 1,
        prefix: str = "cf",
    ) -> list[str]:
        """A Crazyflie team: one swarm sim bridge (root namespace) and, per drone /<prefix>i, a policy node
        (its odometry, setpoint and ToF, the others' odometry as broadcasts) and a safety node in motors mode.
        Time starts once every drone's odom has all its readers: its policy and safety nodes, the other
        policies (their neighbour) and `observers`. Returns the namespaces; process names are '<ns>_policy',
        '<ns>_safety' and 'sim_bridge'."""
        names = [f"{prefix}{i + 1}" for i in range(num_drones)]
        # readers of each odom: its drone's policy and safety nodes, every other drone's policy and safety node
        # (neighbours) and the observers
        readers = {"start_after_subscribers": 2 * num_drones + observers} if self.lockstep else {}
        bridge = {"lockstep": self.lockstep, "num_drones": num_drones, "scene": scene, "prefix": prefix}
        self.start("sim_bridge", "swarm_sim_bridge", {**bridge, **readers, **(sim or {})}, namespace="")
        origin = {"neighbour_origin_s": 1.0} if self.lockstep else {}  # the bridge's clock_offset_s: time 0
        for name in names:
            others = [n for n in names if n != name]
            params = {"bundle": str(bundle_dir), "inputs": ["odom:odometry", "setpoint:setpoint", "tof:ranges"],
                      "act_on": "all_inputs", "neighbours": others, **origin, **(policy or {})}  # fmt: skip
            self.start(f"{name}_policy", "policy_node", params, namespace=name)
            # The team flies closer than the one-drone default separation (training's hit distance is 0.12 m)
            # inside an 8 x 8 x 3 m room; the simulated team starts in the air, with no thrust lock to open.
            guard = {"bundle": str(bundle_dir), "action_mode": "motors", "unlock_setpoints": 0,
                     "neighbours": others, "min_separation_m": 0.12, "fence_low": [-4.0, -4.0, -0.2],
                     "fence_high": [4.0, 4.0, 3.0]}  # fmt: skip
            self.start(f"{name}_safety", "safety_node", {**guard, **(safety or {})}, namespace=name)
        return names

    def stop(self, name: str, sig: int = signal.SIGINT, timeout: float = 5.0) -> None:
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _log_path(self, name: str) -> Path:
        return self.log_dir / f"{self.namespace}_{name}_{self.domain_id}.log"

    def log(self, name: str) -> str:
        return self._log_path(name).read_text()

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def __enter__(self) -> SitlGraph:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _ObserverNode:
    """A recording node in its own rclpy context and executor (loopback DDS, the given domain), spun on demand."""

    def __init__(self, name: str, domain_id: int, use_sim_time: bool, namespace: str | None = None):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter

        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain_id)
        ns = {} if namespace is None else {"namespace": f"/{namespace}"}
        self.node = rclpy.create_node(name, context=self.ctx, **ns,
                                      parameter_overrides=[Parameter("use_sim_time", value=use_sim_time)])  # fmt: skip
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(self.node)
        # Arrival (DDS reception, wall ns) of every /clock sample, so that a message's simulated time can
        # be recovered from its own arrival even when this node's Python thread stalls and reads a backlog.
        self.use_sim_time = use_sim_time
        self.clock_log: list[tuple[int, float]] = []
        if use_sim_time:
            from rosgraph_msgs.msg import Clock

            from robot_rl_ros import qos
            from robot_rl_ros.msgs import stamp_to_s

            def on_clock(m, info):
                self.clock_log.append((int(info["received_timestamp"]), stamp_to_s(m.clock)))

            self.node.create_subscription(Clock, "/clock", on_clock, qos.RECORD)

    def arrival_times(self, received_ns: list[int]) -> np.ndarray:
        """ROS time at which messages arrived (DDS reception stamps): the newest /clock received before
        each under sim time (0 before the first), the wall clock otherwise."""
        ns = np.asarray(received_ns, dtype=np.int64)
        if not self.use_sim_time:
            return ns * 1e-9
        log = sorted(self.clock_log)
        clock_ns = np.array([r for r, _ in log], dtype=np.int64)
        clock_s = np.array([0.0] + [c for _, c in log])
        return clock_s[np.searchsorted(clock_ns, ns, side="right")]

    def now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def spin_until(self, done, wall_timeout_s: float) -> bool:
        t_end = time.monotonic() + wall_timeout_s
        while time.monotonic() < t_end:
            self.executor.spin_once(timeout_sec=0.02)
            if done():
                return True
        return False

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.ctx.try_shutdown()


class Observer(_ObserverNode):
    """An independent node that records what the robot saw and what it was commanded."""

    def __init__(self, namespace: str, domain_id: int, use_sim_time: bool, robot: str = "crazyflie"):
        """robot 'crazyflie': states are positions from odom, commands rpyt from cmd_vel_legacy;
        'arm': states are the 9 joint positions from joint_states, commands the joint targets;
        'quadruped': states are [x, y, z, vx, vy (body), yaw rate] from odom, commands the 36 motor fields."""
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray, String

        from robot_rl_ros import qos
        from robot_rl_ros.msgs import arm_joint_arrays, odometry_to_raw, stamp_to_s, twist_to_rpyt

        super().__init__("sitl_observer", domain_id, use_sim_time, namespace)
        self.states: list[tuple[float, np.ndarray]] = []
        self.commands: list[tuple[float, float, np.ndarray]] = []  # (ros time, wall time, rpyt)
        self.command_received_ns: list[int] = []  # DDS arrival of each command, for arrival_times()
        self.safety: dict[str, str] = {}
        self.safety_events: list[str] = []
        self.policy: dict[str, str] = {}  # the policy node's latest /diagnostics: published, skipped, last skip
        self.modes: list[tuple[float, str]] = []  # (ROS time at receipt, 'MODE: reason')
        ns = f"/{namespace}/safety"

        def on_odom(m):
            self.states.append((stamp_to_s(m.header.stamp), odometry_to_raw(m)["position"]))

        def on_cmd(m, info):
            self.commands.append((self.now(), time.monotonic(), twist_to_rpyt(m)))
            self.command_received_ns.append(int(info["received_timestamp"]))

        def on_diag(m):
            for st in m.status:
                if st.name == ns:
                    self.safety = {kv.key: kv.value for kv in st.values}
                    self.safety_events += [f"{kv.key} {kv.value}" for kv in st.values if kv.key.startswith("event.")]
                elif st.name == f"/{namespace}/policy":
                    self.policy = {kv.key: kv.value for kv in st.values}

        def on_mode(m):
            self.modes.append((self.now(), m.data))

        def on_joints(m):
            self.states.append((stamp_to_s(m.header.stamp), arm_joint_arrays(m)[0]))

        def on_joint_cmd(m, info):
            self.commands.append((self.now(), time.monotonic(), np.asarray(m.data, dtype=np.float64)))
            self.command_received_ns.append(int(info["received_timestamp"]))

        def on_body(m):
            p, v = m.pose.pose.position, m.twist.twist.linear
            self.states.append(
                (stamp_to_s(m.header.stamp), np.array([p.x, p.y, p.z, v.x, v.y, m.twist.twist.angular.z]))
            )

        if robot == "quadruped":
            self.node.create_subscription(Odometry, "odom", on_body, qos.SENSOR)
            self.node.create_subscription(Float64MultiArray, "joint_commands", on_joint_cmd, qos.RECORD)
        elif robot == "arm":
            self.node.create_subscription(JointState, "joint_states", on_joints, qos.SENSOR)
            cmd_topic = "forward_position_controller/commands"
            self.node.create_subscription(Float64MultiArray, cmd_topic, on_joint_cmd, qos.RECORD)
        else:
            self.node.create_subscription(Odometry, "odom", on_odom, qos.SENSOR)
            self.node.create_subscription(Twist, "cmd_vel_legacy", on_cmd, qos.RECORD)
        self.node.create_subscription(String, "safety/mode", on_mode, qos.LATCHED)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, qos.DIAGNOSTICS)


class SwarmObserver(_ObserverNode):
    """Records a team: each drone's odometry, motor commands, observation/command pairs and safety mode."""

    def __init__(self, names: list[str], domain_id: int, use_sim_time: bool):
        from nav_msgs.msg import Odometry
        from std_msgs.msg import Float32MultiArray, Float64MultiArray, String

        from robot_rl_ros import qos
        from robot_rl_ros.msgs import odometry_to_raw, stamp_to_s

        super().__init__("swarm_observer", domain_id, use_sim_time)
        self.names = names
        self.states: dict[str, list[tuple[float, np.ndarray]]] = {n: [] for n in names}  # (stamp, [p, v])
        self.commands: dict[str, list[tuple[float, np.ndarray]]] = {n: [] for n in names}  # (ROS time, motors)
        self.command_received_ns: dict[str, list[int]] = {n: [] for n in names}
        self.state_received_ns: dict[str, list[int]] = {n: [] for n in names}
        self.pairs: dict[str, list[tuple[float, np.ndarray]]] = {n: [] for n in names}  # (ROS time, obs + command)
        self.modes: dict[str, list[tuple[float, str]]] = {n: [] for n in names}
        for n in names:

            def on_odom(m, info, n=n):
                raw = odometry_to_raw(m)
                self.states[n].append((stamp_to_s(m.header.stamp), np.concatenate([raw["position"], raw["velocity"]])))
                self.state_received_ns[n].append(int(info["received_timestamp"]))

            sub = self.node.create_subscription
            sub(Odometry, f"/{n}/odom", on_odom, qos.SENSOR)

            def on_motors(m, info, n=n):
                self.commands[n].append((self.now(), np.asarray(m.data)))
                self.command_received_ns[n].append(int(info["received_timestamp"]))

            sub(Float64MultiArray, f"/{n}/cmd_motors", on_motors, qos.RECORD)
            sub(Float32MultiArray, f"/{n}/policy/observation",
                lambda m, n=n: self.pairs[n].append((self.now(), np.float32(m.data))), qos.RECORD)  # fmt: skip
            sub(String, f"/{n}/safety/mode", lambda m, n=n: self.modes[n].append((self.now(), m.data)), qos.LATCHED)

    def sim_seconds(self) -> float:
        """Simulated time the slowest drone's odometry covers."""
        spans = [s[-1][0] - s[0][0] if s else 0.0 for s in self.states.values()]
        return min(spans)


def fly_swarm(
    bundle_dir: str,
    num_drones: int = 3,
    scene: int = 0,
    seconds: float = 5.0,
    sim: dict | None = None,
    policy: dict | None = None,
    safety: dict | None = None,
    wall_timeout_s: float | None = None,
) -> dict:
    """Fly a swarm bundle's team in lock-step SITL (one bridge, a policy and a safety node per drone) for
    `seconds` of simulated time from the scene's start; returns per drone the start, final position, goal,
    commands and safety modes, plus the raw records (observer) for further checks."""
    policy = {"publish_observation": True, **(policy or {})}
    with SitlGraph("swarm", lockstep=True) as graph:
        names = [f"cf{i + 1}" for i in range(num_drones)]
        obs = SwarmObserver(names, graph.domain_id, use_sim_time=True)
        try:
            graph.start_swarm(bundle_dir, num_drones, scene, sim=sim, policy=policy, safety=safety)
            finished = obs.spin_until(lambda: obs.sim_seconds() >= seconds, wall_timeout_s or 30.0 + 15.0 * seconds)
            obs.spin_until(lambda: False, 0.3)
        finally:
            obs.close()
            graph.close()
    if not all(obs.states.values()):
        raise RuntimeError(
            f"no state from some drones in swarm SITL (domain {graph.domain_id}); logs in {graph.log_dir}"
        )
    drones = {}
    for n in names:
        t = np.array([s[0] for s in obs.states[n]])
        x = np.array([s[1] for s in obs.states[n]])
        ct = [c for c in obs.arrival_times(obs.command_received_ns[n]) if c >= t[0]]
        drones[n] = {
            "start": x[0, 0:3].tolist(),
            "final": x[-1, 0:3].tolist(),
            "commands": len(obs.commands[n]),
            "pairs": len(obs.pairs[n]),
            "max_command_gap_s": _max_gap(ct),
            "modes": [m for _, m in obs.modes[n]],
        }
    return {"finished": finished, "sim_seconds": obs.sim_seconds(), "drones": drones, "observer": obs,
            "graph_logs": str(graph.log_dir), "domain_id": graph.domain_id}  # fmt: skip


def _run(namespace: str, lockstep: bool, robot: str, start, seconds: float, wall_timeout_s: float) -> tuple:
    """Start a graph with start(graph), record it with an Observer for `seconds` of robot time.
    Returns (observer, finished, graph)."""
    with SitlGraph(namespace, lockstep=lockstep) as graph:
        obs = Observer(namespace, graph.domain_id, use_sim_time=lockstep, robot=robot)
        try:
            start(graph)
            t0: list[float] = []

            def done() -> bool:
                if not obs.states:
                    return False
                if not t0:
                    t0.append(obs.states[0][0])
                return obs.states[-1][0] - t0[0] >= seconds

            finished = obs.spin_until(done, wall_timeout_s)
            obs.spin_until(lambda: False, 0.3)  # let the last diagnostics arrive
        finally:
            obs.close()
            graph.close()
    if not obs.states:
        raise RuntimeError(f"no robot state received in SITL (domain {graph.domain_id}); logs in {graph.log_dir}")
    return obs, finished, graph


def _max_gap(times: list[float]) -> float:
    return float(np.diff(times).max()) if len(times) > 1 else float("inf")


def _command_gap(obs: Observer, since: float) -> float:
    """Longest simulated time between commands arriving from `since` on (DDS arrival, see arrival_times)."""
    return _max_gap([c for c in obs.arrival_times(obs.command_received_ns) if c >= since])


def _summary(obs: Observer, finished: bool, graph: SitlGraph) -> dict:
    """What every SITL run reports: the command stream (judged from the first state on: commands before
    the observer's first /clock carry time 0), the safety node's mode, counters and interventions, the
    policy node's counters, and when the run did not end ACTIVE the end of each node's log."""
    t = np.array([s[0] for s in obs.states])
    ok = finished and obs.safety.get("mode") == "ACTIVE"
    return {
        "log_tails": {} if ok else {name: graph.log(name)[-1500:] for name in graph.procs},
        "finished": finished,
        "sim_seconds": float(t[-1] - t[0]),
        "commands": len(obs.commands),
        "max_command_gap_s": _command_gap(obs, t[0]),
        "commands_nonfinite": int(sum(not np.all(np.isfinite(c[2])) for c in obs.commands)),
        "mode": obs.safety.get("mode", "unknown"),
        "reason": obs.safety.get("reason", ""),
        "interventions": obs.safety_events,
        "counters": {k: v for k, v in obs.safety.items() if not k.startswith("event.")},
        "policy": obs.policy,
    }


def fly(
    bundle_dir: str,
    seconds: float = 15.0,
    goal=(0.0, 0.0, 1.0),
    lockstep: bool = True,
    hold_s: float | None = None,
    namespace: str = "cf1",
    sim: dict | None = None,
    safety: dict | None = None,
    wall_timeout_s: float | None = None,
) -> dict:
    """Fly a bundle in SITL from the ground; returns errors, commands seen and safety interventions."""
    goal = np.asarray(goal, dtype=np.float64)
    hold_s = min(10.0, seconds / 2) if hold_s is None else hold_s
    obs, finished, graph = _run(
        namespace, lockstep, "crazyflie", lambda g: g.start_flight(bundle_dir, goal, sim=sim, safety=safety),
        seconds, wall_timeout_s or (10.0 + seconds * (3.0 if lockstep else 1.5)),
    )  # fmt: skip
    t = np.array([s[0] for s in obs.states])
    pos = np.array([s[1] for s in obs.states])
    err = np.linalg.norm(pos - goal, axis=1)
    hold = err[t >= t[-1] - hold_s]
    return {
        **_summary(obs, finished, graph),
        "final_position": pos[-1].tolist(),
        "final_error_m": float(err[-1]),
        "hold_max_error_m": float(hold.max()),
        "hold_median_error_m": float(np.median(hold)),
        "hold_s": hold_s,
    }


def reach(
    bundle_dir: str,
    target=(0.5, 0.0, 0.3),
    seconds: float = 8.0,
    lockstep: bool = True,
    hold_s: float = 2.0,
    namespace: str = "arm",
    sim: dict | None = None,
    safety: dict | None = None,
    wall_timeout_s: float | None = None,
) -> dict:
    """Run an arm reach bundle in SITL from the home pose; returns TCP errors (FK of the reported
    joints with the bundle's kinematics), commands seen and safety interventions."""
    from robot_rl.deploy import load_bundle
    from robot_rl.deploy.arm_ik import IKSpec, forward_kinematics

    target = np.asarray(target, dtype=np.float64)
    spec = IKSpec.from_dict(load_bundle(bundle_dir).extra["ik"])
    obs, finished, graph = _run(
        namespace, lockstep, "arm", lambda g: g.start_reach(bundle_dir, target, sim=sim, safety=safety),
        seconds, wall_timeout_s or (15.0 + seconds * (4.0 if lockstep else 1.5)),
    )  # fmt: skip
    t = np.array([s[0] for s in obs.states])
    q = np.array([s[1] for s in obs.states])
    tcp = forward_kinematics(spec, q[:, :7]).tcp[:, :3, 3]
    err = np.linalg.norm(tcp - target, axis=1)
    hold = err[t >= t[-1] - hold_s]
    return {
        **_summary(obs, finished, graph),
        "final_tcp": tcp[-1].tolist(),
        "final_error_m": float(err[-1]),
        "hold_max_error_m": float(hold.max()),
        "hold_median_error_m": float(np.median(hold)),
        "hold_max_command_gap_s": _command_gap(obs, t[-1] - hold_s),
        "first_within_2cm_s": float(t[np.argmax(err < 0.02)] - t[0]) if np.any(err < 0.02) else None,
    }


def walk(
    bundle_dir: str,
    command=(0.5, 0.0, 0.0),
    seconds: float = 8.0,
    lockstep: bool = True,
    settle_s: float = 2.0,
    namespace: str = "go1",
    safety: dict | None = None,
    wall_timeout_s: float | None = None,
) -> dict:
    """Walk a quadruped bundle in SITL at a constant velocity command; returns the tracking errors
    after settle_s (body-frame velocity from the state estimator), commands seen and interventions."""
    command = np.asarray(command, dtype=np.float64)
    obs, finished, graph = _run(
        namespace, lockstep, "quadruped", lambda g: g.start_walk(bundle_dir, command, safety=safety),
        seconds, wall_timeout_s or (20.0 + seconds * (5.0 if lockstep else 1.5)),
    )  # fmt: skip
    t = np.array([s[0] for s in obs.states])
    x = np.array([s[1] for s in obs.states])
    after = t >= t[0] + settle_s
    return {
        **_summary(obs, finished, graph),
        "lin_vel_error": float(np.mean(np.linalg.norm(x[after, 3:5] - command[:2], axis=1))),
        "yaw_rate_error": float(np.mean(np.abs(x[after, 5] - command[2]))),
        "min_trunk_height_m": float(x[:, 2].min()),
        "distance_m": float(np.linalg.norm(x[-1, :2] - x[0, :2])),
        "settled_max_command_gap_s": _command_gap(obs, t[0] + settle_s),
    }

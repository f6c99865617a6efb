"""SITL observers: nodes in the test's own process that record what the robots saw and were commanded."""

from __future__ import annotations

import os
import time

import numpy as np


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
        self.node = rclpy.create_node(
            name, context=self.ctx, **ns, parameter_overrides=[Parameter("use_sim_time", value=use_sim_time)]
        )
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
        from geometry_msgs.msg import PointStamped, PoseStamped, Twist
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
        self.objects: list[tuple[float, np.ndarray]] = []  # arm, pick-and-place: (stamp, object position)
        self.goal: np.ndarray | None = None  # arm, pick-and-place: the last goal position reported
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

        def on_object(m):
            p = m.pose.position
            self.objects.append((stamp_to_s(m.header.stamp), np.array([p.x, p.y, p.z])))

        def on_goal(m):
            self.goal = np.array([m.point.x, m.point.y, m.point.z])

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
            self.node.create_subscription(PoseStamped, "object_pose", on_object, qos.SENSOR)
            self.node.create_subscription(PointStamped, "goal_position", on_goal, qos.SENSOR)
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
            sub(
                Float32MultiArray,
                f"/{n}/policy/observation",
                lambda m, n=n: self.pairs[n].append((self.now(), np.float32(m.data))),
                qos.RECORD,
            )
            sub(String, f"/{n}/safety/mode", lambda m, n=n: self.modes[n].append((self.now(), m.data)), qos.LATCHED)

    def sim_seconds(self) -> float:
        """Simulated time the slowest drone's odometry covers."""
        spans = [s[-1][0] - s[0][0] if s else 0.0 for s in self.states.values()]
        return min(spans)

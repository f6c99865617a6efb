"""SITL scenarios: fly a drone or a team, reach with the arm, walk the quadruped; each returns a summary."""

from __future__ import annotations

from operator import methodcaller

import numpy as np

from robot_rl_ros.sitl_graph import SitlGraph, pick_place_policy
from robot_rl_ros.sitl_observers import Observer, SwarmObserver


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
    return {
        "finished": finished,
        "sim_seconds": obs.sim_seconds(),
        "drones": drones,
        "observer": obs,
        "graph_logs": str(graph.log_dir),
        "domain_id": graph.domain_id,
    }


def _run(
    namespace: str,
    lockstep: bool,
    robot: str,
    start,
    seconds: float,
    wall_timeout_s: float | None,
    startup_s: float,
    lockstep_slowdown: float,
) -> tuple:
    """Start a graph with start(graph), record it with an Observer for `seconds` of robot time, within
    wall_timeout_s of wall time (None or 0: startup_s plus the flight at lockstep_slowdown x real time in lock
    step, 1.5x otherwise). Returns (observer, finished, graph)."""
    if not wall_timeout_s:
        wall_timeout_s = startup_s + seconds * (lockstep_slowdown if lockstep else 1.5)
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


def _states(obs) -> tuple[np.ndarray, np.ndarray]:
    """The observed states as arrays: stamps (T,) and state vectors (T, D)."""
    return np.array([s[0] for s in obs.states]), np.array([s[1] for s in obs.states])


def _hold_errors(t: np.ndarray, err: np.ndarray, hold_s: float) -> dict:
    """The final error and the error statistics over the last hold_s seconds."""
    hold = err[t >= t[-1] - hold_s]
    return {
        "final_error_m": float(err[-1]),
        "hold_max_error_m": float(hold.max()),
        "hold_median_error_m": float(np.median(hold)),
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
    start = methodcaller("start_flight", bundle_dir, goal, sim=sim, safety=safety)
    obs, finished, graph = _run(namespace, lockstep, "crazyflie", start, seconds, wall_timeout_s, 10.0, 3.0)
    t, pos = _states(obs)
    err = np.linalg.norm(pos - goal, axis=1)
    return {
        **_summary(obs, finished, graph),
        "final_position": pos[-1].tolist(),
        **_hold_errors(t, err, hold_s),
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
    start = methodcaller("start_reach", bundle_dir, target, sim=sim, safety=safety)
    obs, finished, graph = _run(namespace, lockstep, "arm", start, seconds, wall_timeout_s, 15.0, 4.0)
    t, q = _states(obs)
    tcp = forward_kinematics(spec, q[:, :7]).tcp[:, :3, 3]
    err = np.linalg.norm(tcp - target, axis=1)
    return {
        **_summary(obs, finished, graph),
        "final_tcp": tcp[-1].tolist(),
        **_hold_errors(t, err, hold_s),
        "hold_max_command_gap_s": _command_gap(obs, t[-1] - hold_s),
        "first_within_2cm_s": float(t[np.argmax(err < 0.02)] - t[0]) if np.any(err < 0.02) else None,
    }


# The pick-and-place task's success check (sim.tasks.arm.pick_place.ArmPickPlace.in_bowl, its default radius):
# the object's centre within 6 cm of the bowl's axis and below 6 cm over the table (in it, not held above it).
BOWL_RADIUS_M = 0.06
BOWL_MAX_HEIGHT_M = 0.06


def pick_place(
    bundle_dir: str,
    layout: int,
    seconds: float = 8.0,
    namespace: str = "arm",
    sim: dict | None = None,
    safety: dict | None = None,
    wall_timeout_s: float | None = None,
) -> dict:
    """Run a plan-guided pick-and-place bundle in lock-step SITL on layout `layout` of the pick-and-place pool;
    returns where the object ended against the goal (as the bridge reported them), whether it is in the bowl,
    when it first was, the commands seen and the safety node's interventions."""
    start = methodcaller("start_pick_place", bundle_dir, layout, sim=sim, safety=safety)
    obs, finished, graph = _run(namespace, True, "arm", start, seconds, wall_timeout_s, 15.0, 4.0)
    if not obs.objects or obs.goal is None:
        raise RuntimeError(f"no object pose or goal received in SITL; logs in {graph.log_dir}")
    t = np.array([s[0] for s in obs.objects])
    pos = np.array([s[1] for s in obs.objects])
    inside = (np.linalg.norm(pos[:, :2] - obs.goal[:2], axis=1) < BOWL_RADIUS_M) & (pos[:, 2] < BOWL_MAX_HEIGHT_M)
    return {
        **_summary(obs, finished, graph),
        "object_start": pos[0].tolist(),
        "object_final": pos[-1].tolist(),
        "goal": obs.goal.tolist(),
        "in_goal": bool(inside[-1]),
        "first_in_goal_s": float(t[np.argmax(inside)] - t[0]) if inside.any() else None,
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
    start = methodcaller("start_walk", bundle_dir, command, safety=safety)
    obs, finished, graph = _run(namespace, lockstep, "quadruped", start, seconds, wall_timeout_s, 20.0, 5.0)
    t, x = _states(obs)
    after = t >= t[0] + settle_s
    return {
        **_summary(obs, finished, graph),
        "lin_vel_error": float(np.mean(np.linalg.norm(x[after, 3:5] - command[:2], axis=1))),
        "yaw_rate_error": float(np.mean(np.abs(x[after, 5] - command[2]))),
        "min_trunk_height_m": float(x[:, 2].min()),
        "distance_m": float(np.linalg.norm(x[-1, :2] - x[0, :2])),
        "settled_max_command_gap_s": _command_gap(obs, t[0] + settle_s),
    }


# Goal steps that excite thrust, attitude and yaw-free translation, held 2 s each (relative to the first goal).
EXCITATION_GOALS = [(0.0, 0.0, 1.0), (0.5, 0.0, 1.2), (0.5, 0.5, 0.8), (-0.3, 0.2, 1.3), (0.0, -0.4, 1.0)]


def fly_recorded(
    bundle_dir: str,
    out: str,
    seconds: float = 12.0,
    physical_params: str = "",
    goals=EXCITATION_GOALS,
    goal_hold_s: float = 2.0,
    sim: dict | None = None,
    namespace: str = "cf1",
) -> dict:
    """Fly a bundle in lock-step SITL through a sequence of goals (excitation for system identification) with the
    recorder writing every topic to `out` (MCAP). physical_params: the sim bridge's hidden parameters (JSON).
    The recorder starts first and the bridge holds time until it and the nodes read odometry, so the log begins
    with the drone at rest. The bridge publishes the goal in effect with each state, before the odometry the policy
    acts on, so each goal is in effect from the step the log gives it (measured: 4-6 of ~1,000 commands superseded
    within a step, alone and beside two busy loops; 33-49 with goals from another node's wall timer). Returns
    the flight summary and the recorder's topic counts."""
    goals = [tuple(float(x) for x in g) for g in goals]
    nodes = {
        "policy": ("policy_node", {"bundle": str(bundle_dir), "goal": list(goals[0]), "act_on": "odom"}),
        "safety": ("safety_node", {"bundle": str(bundle_dir)}),
    }
    flat = [x for g in goals for x in g]
    bridge = {"physical_params": physical_params, "goals": flat, "goal_hold_s": float(goal_hold_s), **(sim or {})}
    return _recorded(namespace, "crazyflie", out, seconds, nodes, "cmd_vel_legacy", ("sim_bridge", bridge))


# Reach targets (m, base frame, inside the reach task's box) the arm moves through, held 2 s each: every joint
# moves, and each new target starts a transient the servos' stiffness, damping and the inertia shape.
EXCITATION_TARGETS = [(0.5, 0.0, 0.3), (0.62, 0.22, 0.42), (0.38, -0.22, 0.18), (0.68, -0.12, 0.45), (0.33, 0.25, 0.3)]


def reach_recorded(
    bundle_dir: str,
    out: str,
    seconds: float = 10.0,
    physical_params: str = "",
    targets=EXCITATION_TARGETS,
    target_hold_s: float = 2.0,
    sim: dict | None = None,
    namespace: str = "arm",
) -> dict:
    """Run an arm reach bundle in lock-step SITL through a sequence of targets (each held target_hold_s; the bridge
    publishes the one in effect on target_position with each state, as perception would) with the recorder writing
    every topic to `out` (MCAP). physical_params: the arm sim bridge's hidden parameters (JSON,
    sim.tasks.arm.physical)."""
    targets = [tuple(float(x) for x in g) for g in targets]
    policy = {"bundle": str(bundle_dir), "inputs": ["joint_states:arm_joints", "target_position:point"]}
    nodes = {
        # once a period's joint states and target have both arrived: a target published by another node on a
        # wall timer reached the policy a step before or after the step the log gave it, at random
        "policy": ("policy_node", {**policy, "act_on": "all_inputs"}),
        "safety": ("arm_safety_node", {"bundle": str(bundle_dir)}),
    }
    flat = [x for g in targets for x in g]
    bridge = {"physical_params": physical_params, "target": list(targets[0]), "targets": flat,
              "target_hold_s": float(target_hold_s), **(sim or {})}  # fmt: skip
    return _recorded(namespace, "arm", out, seconds, nodes, "forward_position_controller/commands",
                     ("arm_sim_bridge", bridge))  # fmt: skip


def pick_place_recorded(
    bundle_dir: str,
    out: str,
    layout: int,
    seconds: float = 8.0,
    physical_params: str = "",
    sim: dict | None = None,
    namespace: str = "arm",
) -> dict:
    """A plan-guided pick-and-place bundle in lock-step SITL on layout `layout` of the pool (as pick_place), with
    the recorder writing every topic to `out` (MCAP): joint states, commands, and the object's pose and the goal
    as the bridge's perception reports them. physical_params: the arm sim bridge's hidden parameters (JSON)."""
    nodes = {
        "policy": ("policy_node", pick_place_policy(bundle_dir, layout)),
        "safety": ("arm_safety_node", {"bundle": str(bundle_dir)}),
    }
    bridge = {"physical_params": physical_params, "scene": "arm_pick_place", "layout": int(layout),
              "publish_target": False, **(sim or {})}  # fmt: skip
    return _recorded(namespace, "arm", out, seconds, nodes, "forward_position_controller/commands",
                     ("arm_sim_bridge", bridge))  # fmt: skip


# Velocity commands (vx m/s, vy m/s, yaw rate rad/s) the quadruped walks through, held 2 s each: gait starts and
# stops, turns and a side step load every motor and put the feet on the floor at speed.
EXCITATION_COMMANDS = [(0.5, 0.0, 0.0), (0.0, 0.3, 0.0), (0.3, 0.0, 0.8), (0.0, 0.0, 0.0), (0.7, 0.0, -0.5)]


def walk_recorded(
    bundle_dir: str,
    out: str,
    seconds: float = 10.0,
    physical_params: str = "",
    commands=EXCITATION_COMMANDS,
    command_hold_s: float = 2.0,
    sim: dict | None = None,
    namespace: str = "go1",
) -> dict:
    """Walk a quadruped bundle in lock-step SITL through a sequence of velocity commands (published on `command`
    as an operator's joystick would) with the recorder writing every topic to `out` (MCAP). physical_params: the
    quadruped sim bridge's hidden parameters (JSON, sim.tasks.quadruped.physical)."""
    commands = [tuple(float(x) for x in c) for c in commands]
    inputs = ["joint_states:leg_joints", "imu:imu", "odom:body_velocity", "command:point"]
    nodes = {
        # the bridge publishes the command in effect with each state (as an operator's joystick, stamped alike),
        # before the joint states: acting on those, the policy sees each switch at the step the log has
        "policy": ("policy_node", {"bundle": str(bundle_dir), "inputs": inputs, "act_on": "joint_states",
                                   "command": list(commands[0])}),
        "safety": ("leg_safety_node", {"bundle": str(bundle_dir)}),
    }  # fmt: skip
    # joint_states' readers: the policy, the safety node and the recorder (the observer reads odom)
    flat = [x for c in commands for x in c]
    bridge = {"physical_params": physical_params, "start_after_subscribers": 3, "commands": flat,
              "command_hold_s": float(command_hold_s), **(sim or {})}  # fmt: skip
    return _recorded(namespace, "quadruped", out, seconds, nodes, "joint_commands", ("quadruped_sim_bridge", bridge))


def _recorded(
    namespace: str,
    robot: str,
    out: str,
    seconds: float,
    nodes: dict,
    command_topic: str,
    bridge: tuple[str, dict],
) -> dict:
    """A lock-step SITL run with the recorder on: recorder first, then an Observer, the nodes (name -> (module,
    params)), and once the recorder reads the command topics the bridge (module, params), which holds time until the
    policy, the safety node, the observer and the recorder read its state. Setpoints (goals, targets, velocity
    commands) come from the bridge with each state, on simulated time."""
    with SitlGraph(namespace, lockstep=True) as graph:
        graph.start("recorder", "recorder", {"output": str(out), "use_sim_time": False})
        obs = Observer(namespace, graph.domain_id, use_sim_time=True, robot=robot)
        try:
            _wait_for_log(graph, "recorder", "recording all topics", 60.0, obs)
            for name, (module, params) in nodes.items():
                graph.start(name, module, params)
            topics = [f"/{namespace}/{command_topic}", f"/{namespace}/policy/action", "/diagnostics"]
            _wait_for_log(graph, "recorder", [f"+ {t} " for t in topics], 60.0, obs)
            obs.spin_until(lambda: False, 0.5)  # the recorder's new readers match the writers
            module, params = bridge
            graph.start("sim_bridge", module, {"lockstep": True, "start_after_subscribers": 4, **params})

            def done() -> bool:
                return len(obs.states) > 1 and obs.states[-1][0] - obs.states[0][0] >= seconds

            finished = obs.spin_until(done, 30.0 + 4.0 * seconds)
            for name in ("sim_bridge", *nodes):
                graph.stop(name)
            obs.spin_until(lambda: False, 0.3)
        finally:
            obs.close()
        graph.stop("recorder")
        summary = _summary(obs, finished, graph)
        recorder_log = graph.log("recorder")
    if not obs.states:
        raise RuntimeError(f"no robot state received in SITL (domain {graph.domain_id}); logs in {graph.log_dir}")
    return {**summary, "log": str(out), "recorder_tail": recorder_log[-600:]}


def _wait_for_log(graph: SitlGraph, node: str, needles, timeout_s: float, obs: Observer) -> None:
    """Spin the observer until the node's log holds every needle (its output is how a node says it is ready)."""
    needles = [needles] if isinstance(needles, str) else list(needles)
    if not obs.spin_until(lambda: all(n in graph.log(node) for n in needles), timeout_s):
        raise RuntimeError(f"{node} did not report {needles} within {timeout_s:.0f} s:\n{graph.log(node)[-1500:]}")

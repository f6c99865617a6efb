"""The SITL process graph: nodes as separate processes in one namespace and one private DDS domain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from robot_rl_ros.rosenv import local_dds_env, next_domain_id


def _pythonpath() -> str:
    """The node processes' PYTHONPATH: ros_nodes/ and the folder holding robot_rl/ and sim/ first, so nodes
    run from a source tree; robot_rl.deploy, the one part of robot_rl this package imports, locates it."""
    import robot_rl.deploy as deploy

    here = Path(__file__).resolve().parent.parent  # ros_nodes/
    root = Path(deploy.__file__).resolve().parents[2]  # robot_rl/deploy/__init__.py -> holds robot_rl/ and sim/
    parts = [str(here), str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def _ros_arg(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
        return "[" + ",".join(f"'{x}'" for x in v) + "]"
    if isinstance(v, (list, tuple, np.ndarray)):
        return "[" + ",".join(_ros_arg(float(x)) for x in v) + "]"
    if isinstance(v, str) and (not v or any(c in v for c in "{}[]:,'\"#")):
        return "'" + v.replace("'", "''") + "'"  # a YAML single-quoted string: JSON or flow syntax stays text
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

    def start_pick_place(
        self,
        bundle_dir: str,
        layout: int,
        sim: dict | None = None,
        policy: dict | None = None,
        safety: dict | None = None,
        observers: int = 1,
    ) -> None:
        """The arm on the pick-and-place table: the sim bridge shows layout `layout` (sim may give the pool's
        layouts and layout_seed, the run's task.params) and reports the object's pose and the goal as
        perception would; the policy node follows the plan-guided bundle's plan `layout`; arm safety."""
        sim = {
            "lockstep": self.lockstep,
            "scene": "arm_pick_place",
            "layout": int(layout),
            "publish_target": False,
            **self._start_gate(observers),
            **(sim or {}),
        }
        self.start("sim_bridge", "arm_sim_bridge", sim)
        self.start("policy", "policy_node", {**pick_place_policy(bundle_dir, layout), **(policy or {})})
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
        act_on = {"act_on": "joint_states"}  # one state per control period (the bridge publishes them last)
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
            params = {
                "bundle": str(bundle_dir),
                "inputs": ["odom:odometry", "setpoint:setpoint", "tof:ranges"],
                "act_on": "all_inputs",
                "neighbours": others,
                **origin,
                **(policy or {}),
            }
            self.start(f"{name}_policy", "policy_node", params, namespace=name)
            # The team flies closer than the one-drone default separation (training's hit distance is 0.12 m)
            # inside an 8 x 8 x 3 m room; the simulated team starts in the air, with no thrust lock to open.
            guard = {
                "bundle": str(bundle_dir),
                "action_mode": "motors",
                "unlock_setpoints": 0,
                "discovery_settle_s": 0.0,
                "neighbours": others,
                "min_separation_m": 0.12,
                "fence_low": [-4.0, -4.0, -0.2],
                "fence_high": [4.0, 4.0, 3.0],
            }
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


def pick_place_policy(bundle_dir: str, layout: int) -> dict:
    """The policy node's parameters on the pick-and-place table: joint states and what perception reports of the
    object and the goal, the bundle's plan `layout`."""
    inputs = ["joint_states:arm_joints", "object_pose:object_pose", "goal_position:point"]
    # the three are published each period with one stamp: act once all of a period's have arrived
    return {"bundle": str(bundle_dir), "inputs": inputs, "act_on": "all_inputs", "plan_index": int(layout)}

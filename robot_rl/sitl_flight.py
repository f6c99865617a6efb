"""`robot-rl sitl`: fly a bundle in software in the loop, through the ROS 2 nodes when their package is installed
(one drone, or a swarm bundle's team), else through the deploy runtime in-process; an arm bundle reaches, or
with its plan (a plan-guided bundle) picks and places, through the nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_rl.config import ConfigError
from robot_rl.ros_package import ros_function
from robot_rl.training.run_dir import write_json_atomic


def fly_sitl(
    bundle_dir: Path, seconds: float = 10.0, ros: str = "auto", out: Path | None = None, layout: int = 0
) -> dict:
    """Fly a bundle from the floor to its goal: through the ROS 2 nodes when rclpy is here, else in-process.
    An arm bundle runs through the nodes: reach, or a plan-guided bundle's pick-and-place on layout `layout`."""
    from robot_rl.deploy import load_bundle
    from robot_rl.deploy.arm_ik import ARM_ACTION_MODES

    bundle = load_bundle(bundle_dir)
    if bundle.action.mode in ARM_ACTION_MODES:
        if ros == "false":
            raise ConfigError("sitl: an arm bundle runs through the ROS 2 nodes, not with ros=false")
        return _arm_sitl(bundle_dir, bundle.plan is not None, seconds, layout, out)
    if "swarm" in bundle.extra:
        return _fly_swarm_sitl(bundle_dir, int(bundle.extra["swarm"]["num_drones"]), seconds, out)
    result = None
    if ros in ("auto", "true"):
        try:
            fly = ros_function("sitl_fly")
        except ImportError as e:
            if ros == "true":
                raise ConfigError(f"ros=true but the ROS 2 package is not importable: {e}") from None
        else:
            result = dict(fly(str(bundle_dir), seconds, (0.0, 0.0, 1.0), lockstep=True))
            result.update(
                transport="ros2 (policy, safety and sim-bridge nodes over DDS)",
                final_position_error_m=result["final_error_m"],
                crashed=result["mode"] != "ACTIVE",
            )
    if result is None:
        result = _fly_in_process(bundle_dir, seconds)
    extra = f", safety mode {result['mode']}, {result['commands']} commands" if "mode" in result else ""
    print(
        f"sitl ({result['transport']}): {seconds:.0f} s flight from the floor, final position error "
        f"{result['final_position_error_m'] * 100:.1f} cm{extra}"
    )
    if out is not None:
        write_json_atomic(out, result)
    return result


def fly_recorded_sitl(bundle_dir: Path, record: Path, seconds: float, physical: str | None) -> dict:
    """A Crazyflie bundle flown through goal steps in lock-step SITL over the ROS 2 nodes with every topic
    recorded to MCAP; physical: a YAML file of sim.tasks.crazyflie.physical parameters the simulated drone
    hides (a "real" robot for `robot-rl sysid`), or None for the model's own."""
    import json

    import yaml

    from sim.tasks.crazyflie.physical import CrazyflieParams

    params = ""
    if physical:
        try:
            values = yaml.safe_load(Path(physical).read_text())
            if not isinstance(values, dict):
                raise ValueError("expected a mapping of parameter: value")
            CrazyflieParams.from_mapping(values)
        except (OSError, yaml.YAMLError, ValueError, TypeError) as e:
            raise ConfigError(f"sitl physical={physical}: {type(e).__name__}: {e}") from None
        params = json.dumps({k: float(v) for k, v in values.items()})
    try:
        fly = ros_function("sitl_fly_recorded")
    except ImportError as e:
        raise ConfigError(f"sitl record= flies through the ROS 2 nodes, which are not importable: {e}") from None
    record.parent.mkdir(parents=True, exist_ok=True)
    result = fly(str(bundle_dir), str(record), seconds=seconds, physical_params=params)
    print(
        f"sitl (ros2, recorded): {result['sim_seconds']:.1f} s through {len(result.get('interventions', []))} "
        f"safety interventions, mode {result['mode']}; wrote {record}"
    )
    return result


def _arm_sitl(bundle_dir: Path, plan: bool, seconds: float, layout: int, out: Path | None) -> dict:
    """An arm bundle in lock-step SITL through the arm sim bridge, policy and arm safety nodes: a plan-guided bundle
    picks and places on its plan `layout` (the bridge shows that layout of the pick-and-place pool), another reaches
    the bridge's default marker."""
    name = "sitl_pick_place" if plan else "sitl_reach"
    try:
        run = ros_function(name)
    except ImportError as e:
        raise ConfigError(f"an arm bundle runs in SITL through the ROS 2 nodes, not importable here: {e}") from None
    if plan:
        result = run(str(bundle_dir), layout=layout, seconds=seconds)
        first = result["first_in_goal_s"]
        what = f"pick-and-place layout {layout}: object in its bowl {result['in_goal']}" + (
            f" (first at {first:.2f} s)" if first is not None else ""
        )
    else:
        result = run(str(bundle_dir), seconds=seconds)
        what = f"reach: final TCP {np.round(result['final_tcp'], 3).tolist()}"
    print(f"sitl (ros2, arm over DDS): {result['sim_seconds']:.1f} s; {what}; safety mode {result['mode']}")
    if out is not None:
        write_json_atomic(out, result)
    return result


def _fly_swarm_sitl(bundle_dir: Path, num_drones: int, seconds: float, out: Path | None) -> dict:
    """A swarm bundle's team in lock-step SITL through the ROS 2 nodes (one namespace per drone, scene 0)."""
    try:
        fly_swarm = ros_function("sitl_fly_swarm")
    except ImportError as e:
        raise ConfigError(
            f"a swarm bundle flies in SITL through the ROS 2 nodes, which are not importable: {e}"
        ) from None
    result = fly_swarm(str(bundle_dir), num_drones, 0, seconds)
    result.pop("observer")
    modes = {name: (d["modes"] or ["unknown"])[-1] for name, d in result["drones"].items()}
    print(f"sitl (ros2 swarm, {num_drones} drones over DDS): {result['sim_seconds']:.1f} s; modes {modes}")
    if out is not None:
        write_json_atomic(out, result)
    return result


def _fly_in_process(bundle_dir: Path, seconds: float) -> dict:
    from robot_rl.deploy import PolicyRuntime
    from sim.crazyflie_sitl import CrazyflieSitl

    runtime = PolicyRuntime(bundle_dir)
    goal = np.array([0.0, 0.0, 1.0])
    sim = CrazyflieSitl(seed=0, randomize=False, goal=goal)
    sim.reset()
    errors = []
    for _ in range(int(seconds / sim.dt)):
        raw = sim.state()
        raw["goal"] = goal
        sim.step(runtime.act(raw))
        errors.append(float(np.linalg.norm(sim.state()["position"] - goal)))
    return {
        "transport": "in-process deploy runtime",
        "final_position_error_m": errors[-1],
        "crashed": sim.crashed,
        "max_error_last_2s_m": max(errors[-200:]),
    }

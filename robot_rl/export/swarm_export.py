"""A swarm checkpoint -> one drone's policy bundle.

The team actor applies one shared-weight network to each drone's observation, so what a drone runs is that
network alone: policy.onnx maps ONE drone's raw observation (D values, normalization inside) to its four raw
outputs, policy.yaml describes how that drone builds its observation from what it can measure and hear (its own
state, the planner setpoint, the k nearest neighbours' broadcasts, its ToF zones), and the C header and source
of the same network (c_export) are written beside it for on-board flight. The deploy runtime rebuilds the
observation with the bundle's terms; the neighbour tokens use the k_nearest_relative op over the received
neighbour states.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from robot_rl.deploy.bundle import ActionSpec, PolicyBundle, write_bundle
from robot_rl.deploy.observation import FAR_NEIGHBOUR_M, ObsTerm
from robot_rl.export.c_export import OneDrone, export_c
from robot_rl.export.onnx_export import export_module_onnx
from robot_rl.policies.swarm_attention import SELF_DIM

C_NAME = "robot_rl_policy"


def swarm_obs_terms(k_neighbours: int, num_beams: int) -> list[ObsTerm]:
    """One drone's observation in sim.tasks.crazyflie.swarm's order, from raw state a drone has.

    Raw keys: position, velocity (world, m, m/s), quaternion (ROS xyzw, body to world), angular_velocity (body,
    rad/s), setpoint_position, setpoint_velocity (the planner's, world), neighbour_states ((M, 6): each received
    broadcast [p, v], world) and tof (num_beams ranges, m). No scaling: the network normalizes its input itself.
    """
    inf = float("inf")
    return [
        ObsTerm("position_error", "difference", ("position", "setpoint_position"), 3, 1.0, inf),
        ObsTerm("velocity_error", "difference", ("velocity", "setpoint_velocity"), 3, 1.0, inf),
        ObsTerm("rotation", "rotmat_from_quat_xyzw", ("quaternion",), 9, 1.0, inf),
        ObsTerm("angular_velocity", "identity", ("angular_velocity",), 3, 1.0, inf),
        ObsTerm(
            "neighbours", "k_nearest_relative", ("position", "velocity", "neighbour_states"), 6 * k_neighbours, 1.0, inf
        ),
        ObsTerm("tof", "identity", ("tof",), num_beams, 1.0, inf),
    ]


def swarm_extra(task) -> dict:
    """What a swarm drone's nodes need beyond the terms: team size, how neighbours are heard, the ToF layout,
    and the observation's blocks with their units (what the C function's obs[] holds, too)."""
    k, b = int(task.k_neighbours), int(task.num_beams)
    s = task.sensor_cfg
    return {
        "swarm": {
            "num_drones": int(task.num_drones),
            "k_neighbours": k,
            "num_beams": b,
            "neighbour_rate_hz": float(task.neighbour_rate_hz),
            "neighbour_latency_s": float(task.neighbour_latency_s),
            "neighbour_padding_m": FAR_NEIGHBOUR_M,
            "blocks": [
                {
                    "name": "self",
                    "start": 0,
                    "size": SELF_DIM,
                    "holds": "position - setpoint (m, world), velocity - setpoint velocity (m/s, world), rotation "
                    "matrix body to world (row-major), body rates (rad/s)",
                },
                {
                    "name": "neighbours",
                    "start": SELF_DIM,
                    "size": 6 * k,
                    "tokens": k,
                    "holds": "k nearest received broadcasts, nearest first: [p_j - p (m), v_j - v (m/s)], world frame; "
                    f"missing neighbours padded at {FAR_NEIGHBOUR_M} m, still",
                },
                {
                    "name": "tof",
                    "start": SELF_DIM + 6 * k,
                    "size": b,
                    "holds": f"ToF zone ranges (m) from the sensor, floored to cm, clipped at {s.clip} m (invalid "
                    "zones read the clip)",
                },
            ],
            "tof": {
                "layout": str(task.tof),
                "rate_hz": float(s.rate_hz),
                "clip_m": float(s.clip),
                "yaw_deg": [float(x) for x in s.yaw_deg],
                "pitch_deg": [float(x) for x in s.pitch_deg],
            },
            "action": "motor commands in [0, 1] of each motor's maximum thrust (0.15 N), m1..m4 as in the MJCF",
            "c_source": [f"{C_NAME}.c", f"{C_NAME}.h"],
        }
    }


def export_swarm_bundle(policy: torch.nn.Module, task, out_dir: Path, source: dict) -> PolicyBundle:
    """Write policy.onnx (one drone), policy.yaml and the C source of a stand-alone swarm policy
    (robot_rl.policies.swarm_actor.extract_policy / policy_from_checkpoint) for the task it was trained on."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    policy = policy.cpu().eval()
    if policy.obs_dim != task.per_drone_obs_dim:
        raise ValueError(f"the policy reads {policy.obs_dim} values per drone, the task gives {task.per_drone_obs_dim}")
    export_module_onnx(OneDrone(policy), policy.obs_dim, out_dir / "policy.onnx")
    c_info = export_c(policy, out_dir, C_NAME)
    spec = task.action_spec
    extra = swarm_extra(task)
    extra["swarm"]["c_parameters"] = c_info["parameters"]
    bundle = PolicyBundle(
        path=out_dir,
        robot=task.robot,
        task=task.name,
        control_rate_hz=1.0 / task.control_dt,
        observation=swarm_obs_terms(task.k_neighbours, task.num_beams),
        action=ActionSpec(
            mode="motors",
            names=["m1", "m2", "m3", "m4"],
            offset=np.array(spec["offset"][:4], dtype=np.float64),
            scale=np.array(spec["scale"][:4], dtype=np.float64),
            low=np.array(spec["low"][:4], dtype=np.float64),
            high=np.array(spec["high"][:4], dtype=np.float64),
        ),
        onnx_file="policy.onnx",
        onnx_sha256="",
        normalizer={
            "applied_in_onnx": True,
            "mean": [float(x) for x in policy.obs_mean.flatten()],
            "std": [float(x) for x in policy.obs_std.flatten()],
        },
        source=json.loads(json.dumps(source, default=str)),
        extra=extra,
    )
    if bundle.obs_dim != policy.obs_dim:
        raise ValueError(f"observation terms hold {bundle.obs_dim} values, the policy reads {policy.obs_dim}")
    write_bundle(bundle)
    return bundle

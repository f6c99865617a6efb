"""One simulated Go1-like quadruped driven by low-level motor commands: the plant for legged SITL.

The same task physics as training (PD motors at 200 Hz, command latency, optional DR), stepped one
50 Hz control period per call with what a Go1's low-level command carries per joint: a position
target and the PD gains (kp = 0 with kd > 0 is its damping mode).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from sim.env import sitl_env
from sim.observation_layout import quat_xyzw_to_rotmat, to_body
from sim.tasks.quadruped import QuadrupedVelocity
from sim.tasks.quadruped.constants import JOINT_NAMES
from sim.tasks.quadruped.physical import QuadrupedParams, write_params

__all__ = ["JOINT_NAMES", "QuadrupedSitl"]


class QuadrupedSitl:
    """physical: parameters that differ from the model's (sim.tasks.quadruped.physical), e.g. a "real" robot whose
    motor strength, friction and payload the sim-to-real tests fit."""

    def __init__(self, seed: int = 0, randomize: bool = False, physical: Mapping[str, float] | None = None):
        if physical and randomize:
            raise ValueError("SITL takes either fixed physical parameters or randomization, not both")
        self.env = sitl_env(QuadrupedVelocity(terrain="flat", command_resample_s=0.0), seed, randomize)
        self.task = self.env.task
        if physical:
            values = {k: v for k, v in QuadrupedParams.from_mapping(physical).as_dict().items() if k in physical}
            write_params(self.task, torch.tensor([0]), values)
        self.dt = self.task.control_dt
        self.time = 0.0

    def reset(self) -> None:
        """Standing in the default pose at the origin, facing +x, at rest."""
        self.env.reset_worlds(torch.tensor([0]))
        b = self.env.backend
        b.qpos[0, 0:2] = 0.0
        b.qpos[0, 3:7] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
        b.qvel[0] = 0.0
        b.forward(torch.tensor([0]))
        self.time = 0.0

    def place(self, qpos: np.ndarray, qvel: np.ndarray, targets: np.ndarray | None = None) -> None:
        """Put the robot in this state (the model's qpos (19) and qvel (18): trunk, then the 12 joints), e.g. a log's,
        with the motors on these joint targets (default: the joints' positions) until the next step's arrive."""
        b = self.env.backend
        b.qpos[0] = torch.as_tensor(np.asarray(qpos, dtype=np.float64).reshape(b.qpos.shape[1]))
        b.qvel[0] = torch.as_tensor(np.asarray(qvel, dtype=np.float64).reshape(b.qvel.shape[1]))
        held = b.qpos[0, 7:] if targets is None else torch.as_tensor(np.asarray(targets, dtype=np.float64))
        self.task.target[0] = held.reshape(12)
        b.forward(torch.tensor([0]))
        self.task.after_physics()

    def step(self, q_des: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> None:
        cmd = [torch.as_tensor(np.asarray(x, dtype=np.float64)).reshape(1, 12) for x in (q_des, kp, kd)]
        if not all(torch.all(torch.isfinite(c)) for c in cmd):
            raise ValueError("SITL motor command is not finite")
        self.task.set_joint_gains(cmd[1], cmd[2])
        self.env.advance(self.task.joint_target_controls(cmd[0]))
        self.time += self.dt

    def state(self) -> dict[str, np.ndarray]:
        """What a Go1 reports: joints, IMU (attitude xyzw, body rates), and a state estimator's body-frame
        velocity; plus the trunk position and whether it touched the ground (for tests)."""
        b = self.env.backend
        q = b.qpos[:1, 3:7]
        quat = torch.cat([q[:, 1:4], q[:, 0:1]], dim=1)
        rot = quat_xyzw_to_rotmat(quat)
        return {
            "joint_position": b.qpos[0, 7:].numpy().copy(),
            "joint_velocity": b.qvel[0, 6:].numpy().copy(),
            "quaternion": quat[0].numpy().copy(),
            "angular_velocity": b.qvel[0, 3:6].numpy().copy(),
            "base_linear_velocity": to_body(b.qvel[:1, 0:3], rot)[0].numpy().copy(),
            "position": b.qpos[0, 0:3].numpy().copy(),
        }

    @property
    def fell(self) -> bool:
        return bool(self.task.fell[0])

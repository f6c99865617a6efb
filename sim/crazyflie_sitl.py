"""One simulated Crazyflie driven by commands in robot units: the plant for software-in-the-loop.

The same task physics as training (firmware model, motor lag, latency), stepped one 100 Hz
control period per call with a setpoint as cflib's send_setpoint takes it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from sim.env import sitl_env
from sim.tasks.crazyflie import REST_Z, CrazyflieHover
from sim.tasks.crazyflie.physical import CrazyflieParams, write_params


class CrazyflieSitl:
    """physical: parameters that differ from the model's (sim.tasks.crazyflie.physical), e.g. a "real" robot
    whose mass and motors the log must reveal; they hold for the whole flight (no randomization on top)."""

    def __init__(
        self,
        seed: int = 0,
        randomize: bool = False,
        goal=(0.0, 0.0, 1.0),
        physical: Mapping[str, float] | None = None,
    ):
        if physical and randomize:
            raise ValueError("SITL takes either fixed physical parameters or randomization, not both")
        self.env = sitl_env(CrazyflieHover(goal=tuple(goal)), seed, randomize, action_latency=bool(physical) or None)
        self.task = self.env.task
        self.dt = self.task.control_dt
        self.time = 0.0
        if physical:
            values = {k: v for k, v in CrazyflieParams.from_mapping(physical).as_dict().items() if k in physical}
            write_params(self.task, torch.tensor([0]), values)

    def reset(self, position=(0.0, 0.0, REST_Z)) -> None:
        """Place the drone at rest (level, still) at position; motors idle."""
        ids = torch.tensor([0])
        self.env.reset_worlds(ids)
        b = self.env.backend
        b.qpos[0, 0:3] = torch.tensor(position, dtype=torch.float64)
        b.qpos[0, 3:7] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
        b.qvel[0] = 0.0
        b.forward(ids)
        self.time = 0.0

    def step(self, cmd: np.ndarray) -> None:
        cmd = torch.as_tensor(np.asarray(cmd, dtype=np.float64)).reshape(1, 4)
        if not torch.all(torch.isfinite(cmd)):
            raise ValueError("SITL command is not finite")
        self.env.advance(self.task.command_controls(cmd))
        self.time += self.dt

    def state(self) -> dict[str, np.ndarray]:
        raw = self.task.raw_state(noisy=False)
        return {k: raw[k][0].numpy().copy() for k in ("position", "velocity", "quaternion", "angular_velocity")}

    @property
    def crashed(self) -> bool:
        return bool(self.task.crashed[0])

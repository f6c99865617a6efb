"""One world of the crazyflie_swarm task driven by per-drone motor commands: the plant for a team's
software-in-the-loop.

The same physics, scene, planner and ToF sensors as training (sim.tasks.crazyflie_swarm), one world of N
drones, stepped one 100 Hz control period per call. The drones start where an episode of that scene starts:
in the air at their start slots, still, level. Domain randomization and observation noise are off; the ToF
noise and dropout are off unless tof_noise=True, so a flight can be replayed exactly.
"""

from __future__ import annotations

import numpy as np
import torch

from sim.env import sitl_env
from sim.tasks.crazyflie import CrazyflieSwarm


def swarm_task(
    num_drones: int, scene: int, scenario: str = "clutter", tof_noise: bool = False, **params
) -> CrazyflieSwarm:
    """The task of one held-out scene (scene_set test, scene HELD_OUT_BASE + scene for world 0)."""
    noise = {} if tof_noise else {"tof_noise_std": 0.0, "tof_dropout": 0.0}
    return CrazyflieSwarm(
        num_drones=num_drones, scene_set="test", scene_offset=int(scene), scenario=scenario, **{**noise, **params}
    )


class CrazyflieSwarmSitl:
    def __init__(
        self,
        num_drones: int = 6,
        scene: int = 0,
        seed: int = 0,
        randomize: bool = False,
        scenario: str = "clutter",
        tof_noise: bool = False,
        **params,
    ):
        task = swarm_task(num_drones, scene, scenario, tof_noise, **params)
        self.env = sitl_env(task, seed, randomize, action_latency=False)
        self.task = self.env.task
        self.num_drones = num_drones
        self.dt = self.task.control_dt
        self.time = 0.0

    def reset(self) -> None:
        """Start the scene's episode again (same scene, starts and goals)."""
        self.task.scene_counter = 0
        self.env.reset_worlds(torch.tensor([0]))
        self.time = 0.0

    def step(self, motors: np.ndarray) -> None:
        """One control period with motor commands (N, 4) in [0, 1] of each motor's maximum thrust."""
        cmd = torch.as_tensor(np.asarray(motors, dtype=np.float64)).reshape(1, self.num_drones, 4)
        if not torch.all(torch.isfinite(cmd)):
            raise ValueError("swarm SITL motor command is not finite")
        self.env.advance(self.task.motor_controls(cmd.clamp(0.0, 1.0)))
        self.time += self.dt

    def state(self, i: int) -> dict[str, np.ndarray]:
        """Drone i's state: position, velocity (world), quaternion (MuJoCo wxyz, body to world), body rates."""
        t = self.task
        return {
            "position": t.pos[0, i].numpy().copy(),
            "velocity": t.vel[0, i].numpy().copy(),
            "quaternion_wxyz": t.quat[0, i].numpy().copy(),
            "angular_velocity": t.omega[0, i].numpy().copy(),
        }

    def setpoint(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The planner's setpoint of drone i now: position (m) and velocity (m/s), world frame."""
        return self.task.sp_pos[0, i].numpy().copy(), self.task.sp_vel[0, i].numpy().copy()

    def tof(self, i: int) -> np.ndarray:
        """Drone i's ToF zone ranges (m, clipped as in training), in the task's zone order."""
        return self.task.tof[0, i].numpy().copy()

    def goal(self, i: int) -> np.ndarray:
        return self.task.goal[0, i].numpy().copy()

    def observation(self) -> np.ndarray:
        """What the task's own policy sees now: (N, D) per-drone observations (noise off)."""
        return self.task.observations()["policy"].reshape(self.num_drones, -1).numpy().copy()

    def crashed(self) -> np.ndarray:
        return self.task.crashed[0].numpy().copy()

"""ArmPickPlace: pick up the named object and leave it in the named bowl ("put the red cube in the blue bowl")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from robot_conventions.options import FINITE, NONNEG, POSITIVE, option
from sim.tasks.arm.base import ArmTask
from sim.tasks.arm.observations import OBJECT_TERMS
from sim.tasks.arm.scene import BOWLS, FINGER_OPEN, OBJECT_HALF_HEIGHT, TABLE_Z


@dataclass
class PickPlaceRewards:
    reach: float = 0.5
    grasp: float = 0.5
    lift: float = 1.0
    transport: float = 1.5
    place: float = 3.0
    release: float = 1.0
    action_rate: float = -0.02
    joint_velocity: float = -0.002
    drop: float = -10.0


@dataclass
class ArmPickPlace(ArmTask):
    """Pick up the named object and leave it resting inside the named bowl."""

    success_radius: float = option(0.06, POSITIVE)  # object centre from the bowl axis (inner radius 8.5 cm)
    success_hold_s: float = option(0.2, NONNEG)
    rewards: PickPlaceRewards = option(factory=PickPlaceRewards, rule=FINITE)
    name = "arm_pick_place"
    obs_terms: ClassVar[list[dict]] = OBJECT_TERMS

    def _sample_goal(self, ids: torch.Tensor, dest_xy: torch.Tensor) -> None:
        self._choose(ids, BOWLS)
        self.site_rgba[ids, self.target_site, 3] = 0.0  # the reach marker is not part of this task
        wid = ids.unsqueeze(1)
        self.body_pos[wid, self.bowl_body, 0:2] = dest_xy.to(self.body_pos.dtype)
        self.body_pos[wid, self.bowl_body, 2] = TABLE_Z
        self.body_pos[wid, self.pad_body] = torch.tensor(
            [-1.5, 0.0, -0.5], dtype=self.body_pos.dtype, device=self.device
        )
        chosen = dest_xy[torch.arange(len(ids), device=self.device), self.goal_idx[ids]]
        z = torch.full((len(ids), 1), TABLE_Z + 0.008 + OBJECT_HALF_HEIGHT, device=self.device)
        self.goal_pos[ids] = torch.cat([chosen, z], 1)

    def goal_error(self) -> torch.Tensor:
        return (self.obj_pos - self.goal_pos).norm(dim=1)

    def in_bowl(self) -> torch.Tensor:
        xy = (self.obj_pos[:, :2] - self.goal_pos[:, :2]).norm(dim=1)
        return (xy < self.success_radius) & (self.obj_pos[:, 2] < TABLE_Z + 0.06)

    def success_now(self) -> torch.Tensor:
        return self.in_bowl()

    def dense_terms(self) -> dict[str, torch.Tensor]:
        w = self.rewards
        d_reach = (self.tcp_pos - self.obj_pos).norm(dim=1)
        closing = self.action[:, -1] < 0.0
        grasped = closing & (d_reach < 0.025) & (self.width > 0.035)
        height = ((self.obj_pos[:, 2] - TABLE_Z - OBJECT_HALF_HEIGHT) / 0.1).clamp(0.0, 1.0)
        above_goal = self.goal_pos + torch.tensor([0.0, 0.0, 0.12], dtype=torch.float64, device=self.device)
        lifted = (self.obj_pos[:, 2] > TABLE_Z + 0.05).double()
        inside = self.in_bowl().double()
        return {
            "reach": w.reach * torch.exp(-d_reach / 0.1),
            "grasp": w.grasp * grasped.double(),
            "lift": w.lift * grasped.double() * height,
            "transport": w.transport * lifted * torch.exp(-(self.obj_pos - above_goal).norm(dim=1) / 0.1),
            "place": w.place * inside,
            "release": w.release * inside * (self.width / (2 * FINGER_OPEN)),
            **self._penalties(w),
            "drop": w.drop * self.dropped.double(),
        }

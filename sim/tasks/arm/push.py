"""ArmPush: push the named object onto the named pad ("push the red cube onto the white pad")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from robot_conventions.options import FINITE, NONNEG, POSITIVE, Range, option
from sim.tasks.arm.base import ArmTask
from sim.tasks.arm.observations import OBJECT_TERMS
from sim.tasks.arm.scene import OBJ_QPOS0, OBJECT_HALF_HEIGHT, OBJECTS, PADS, TABLE_Z


@dataclass
class PushRewards:
    reach: float = 0.5  # TCP to the point behind the object, on the far side from the pad
    push: float = 1.0
    near: float = 1.0
    success: float = 2.0
    action_rate: float = -0.02
    joint_velocity: float = -0.002
    drop: float = -10.0  # object knocked off the table (terminates)


@dataclass
class ArmPush(ArmTask):
    """Push the named object onto the named pad (centre within success_radius in the plane)."""

    success_radius: float = option(0.04, POSITIVE)
    success_hold_s: float = option(0.2, NONNEG)
    # The short-push variant: the named pad sits push_distance_m = [lo, hi] beyond the named object,
    # straight away from the robot (+x), instead of in the far row; the other pad is left out.
    # Its distance is part of a pooled layout, measured from the layout's (unjittered) object place.
    push_distance_m: list[float] | None = option(None, Range(0.05, 0.3, optional=True, ordered=True))
    distractors: bool = True  # False: the objects not named rest on the floor, out of the way
    rewards: PushRewards = option(factory=PushRewards, rule=FINITE)
    name = "arm_push"
    obs_terms: ClassVar[list[dict]] = OBJECT_TERMS

    def __post_init__(self):
        super().__post_init__()
        if self.push_distance_m is not None:
            lo, hi = (float(x) for x in self.push_distance_m)
            if not 0.05 <= lo <= hi <= 0.3:
                raise ValueError(f"push_distance_m must be [lo, hi] within 0.05..0.3 m, got {self.push_distance_m}")

    def _sample_goal(self, ids: torch.Tensor, dest_xy: torch.Tensor) -> None:
        self._choose(ids, PADS)
        self.site_rgba[ids, self.target_site, 3] = 0.0  # the reach marker is not part of this task
        wid = ids.unsqueeze(1)
        if self.push_distance_m is not None:
            dest_xy = self._pad_ahead(ids)
        if not self.distractors:
            self._park_distractors(ids)
        self.body_pos[wid, self.pad_body, 0:2] = dest_xy.to(self.body_pos.dtype)
        self.body_pos[wid, self.pad_body, 2] = TABLE_Z
        self.body_pos[wid, self.bowl_body] = torch.tensor(
            [-1.5, 0.0, -0.5], dtype=self.body_pos.dtype, device=self.device
        )
        chosen = dest_xy[torch.arange(len(ids), device=self.device), self.goal_idx[ids]]
        z = torch.full((len(ids), 1), TABLE_Z + OBJECT_HALF_HEIGHT, device=self.device)
        self.goal_pos[ids] = torch.cat([chosen, z], 1)

    def _pad_ahead(self, ids: torch.Tensor) -> torch.Tensor:
        """Pad places (k, 2, 2) of the short-push variant: the named one ahead of the named object
        (from the pool's layout when there is one, so pose noise stays noise), the other off the table."""
        k = len(ids)
        if self.pool is not None:
            pick = self.layout_id[ids]
            obj_xy = self.pool["obj_xy"][pick, self.obj_idx[ids]]
            u = self.pool["goal_u"][pick, :2]
        else:
            obj_xy = self._objects()[ids, self.obj_idx[ids], :2]
            u = torch.rand(k, 2, generator=self.rng, dtype=torch.float64, device=self.device)
        lo, hi = self.push_distance_m
        named = obj_xy + torch.stack([lo + (hi - lo) * u[:, 0], 0.04 * (u[:, 1] - 0.5)], dim=1)
        dest = torch.tensor([-1.5, 1.0], dtype=torch.float64, device=self.device).repeat(k, 2, 1)
        dest[torch.arange(k, device=self.device), self.goal_idx[ids]] = named
        return dest

    def _park_distractors(self, ids: torch.Tensor) -> None:
        """Rest every object the instruction does not name on the floor behind the robot."""
        b = self.backend
        for j in range(len(OBJECTS)):
            rows = ids[self.obj_idx[ids] != j]
            base = OBJ_QPOS0 + 7 * j
            b.qpos[rows, base : base + 3] = torch.tensor(
                [-0.8, 0.3 * j - 0.45, -0.75 + OBJECT_HALF_HEIGHT], dtype=b.qpos.dtype, device=self.device
            )

    def goal_error(self) -> torch.Tensor:
        return (self.obj_pos[:, :2] - self.goal_pos[:, :2]).norm(dim=1)

    def success_now(self) -> torch.Tensor:
        return (self.goal_error() < self.success_radius) & (self.obj_pos[:, 2] < TABLE_Z + 0.04)

    def dense_terms(self) -> dict[str, torch.Tensor]:
        w = self.rewards
        to_goal = self.goal_pos[:, :2] - self.obj_pos[:, :2]
        direction = to_goal / to_goal.norm(dim=1, keepdim=True).clamp(min=1e-6)
        behind = torch.cat([self.obj_pos[:, :2] - 0.05 * direction, self.obj_pos[:, 2:3]], dim=1)
        d_reach = (self.tcp_pos - behind).norm(dim=1)
        d = self.goal_error()
        return {
            "reach": w.reach * torch.exp(-d_reach / 0.1),
            "push": w.push * torch.exp(-d / 0.15),
            "near": w.near * torch.exp(-d / 0.03),
            "success": w.success * self.success_now().double(),
            **self._penalties(w),
            "drop": w.drop * self.dropped.double(),
        }

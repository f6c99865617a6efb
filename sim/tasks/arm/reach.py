"""ArmReach: bring the TCP to a coloured marker ("reach the pink marker")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from robot_conventions.options import FINITE, NONNEG, POSITIVE, option
from sim.tasks.arm.base import ArmTask
from sim.tasks.arm.scene import MARKERS

REACH_TERMS = [
    # the error vector, scaled up: the last 2 cm are what success is measured on
    {"name": "target_error", "op": "difference", "inputs": ["target_position", "ee_position"], "dim": 3,
     "scale": 5.0, "clip": 3.0},
]  # fmt: skip


@dataclass
class ReachRewards:
    distance: float = 1.0
    near: float = 1.0
    precision: float = 1.0
    action_rate: float = -0.02
    joint_velocity: float = -0.002


@dataclass
class ArmReach(ArmTask):
    """Bring the TCP to a marker drawn uniformly in a 0.5 x 0.6 x 0.4 m box in front of the robot."""

    target_low: tuple[float, float, float] = option((0.25, -0.3, 0.1), FINITE)
    target_high: tuple[float, float, float] = option((0.75, 0.3, 0.5), FINITE)
    success_radius: float = option(0.02, POSITIVE)
    success_hold_s: float = option(0.2, NONNEG)
    rewards: ReachRewards = option(factory=ReachRewards, rule=FINITE)
    name = "arm_reach"
    obs_terms: ClassVar[list[dict]] = REACH_TERMS

    def _sample_goal(self, ids: torch.Tensor, dest_xy: torch.Tensor) -> None:
        self._choose(ids, [(c, "marker") for c in MARKERS])
        lo = torch.tensor(self.target_low, dtype=torch.float64, device=self.device)
        hi = torch.tensor(self.target_high, dtype=torch.float64, device=self.device)
        u = self.pool["goal_u"][self.layout_id[ids]] if self.pool is not None else None
        if u is None:
            u = torch.rand(len(ids), 3, generator=self.rng, dtype=torch.float64, device=self.device)
        self.goal_pos[ids] = lo + (hi - lo) * u
        self.site_pos[ids, self.target_site] = self.goal_pos[ids]
        rgba = torch.tensor(list(MARKERS.values()), dtype=torch.float64, device=self.device)
        self.site_rgba[ids, self.target_site] = rgba[self.goal_idx[ids]].float().to(self.site_rgba.dtype)
        # bowls and pads are not part of this task: park them beside the table
        self._park(ids)

    def _park(self, ids: torch.Tensor) -> None:
        wid = ids.unsqueeze(1)
        parked = torch.tensor([[-1.5, -1.0, 0.0], [-1.5, 1.0, 0.0]], dtype=torch.float64, device=self.device)
        self.body_pos[wid, self.bowl_body] = parked.to(self.body_pos.dtype)
        self.body_pos[wid, self.pad_body] = parked.to(self.body_pos.dtype) + torch.tensor(
            [0.0, 0.0, -0.5], device=self.device
        )

    def goal_error(self) -> torch.Tensor:
        return (self.tcp_pos - self.goal_pos).norm(dim=1)

    def success_now(self) -> torch.Tensor:
        return self.goal_error() < self.success_radius

    def terminated(self) -> torch.Tensor:
        return torch.zeros(self.n, dtype=torch.bool, device=self.device)  # knocked objects do not matter when reaching

    def episode_outcome(self, ids: torch.Tensor, time_outs: torch.Tensor) -> dict[str, torch.Tensor]:
        out = super().episode_outcome(ids, time_outs)
        out["crash"] = torch.zeros(len(ids), dtype=torch.float64, device=self.device)
        hold = max(1, int(round(self.success_hold_s / self.control_dt)))
        out["success"] = (time_outs[ids] & (self.good_steps[ids] >= hold)).double()
        return out

    def dense_terms(self) -> dict[str, torch.Tensor]:
        w, d = self.rewards, self.goal_error()
        return {
            "distance": w.distance * torch.exp(-d / 0.3),
            "near": w.near * torch.exp(-d / 0.05),
            "precision": w.precision * torch.exp(-((d / 0.015) ** 2)),
            **self._penalties(w),
        }

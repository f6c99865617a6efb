"""Crazyflie go-to: the hover task with goals drawn anywhere in a volume, a new one every goal_period_s."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from robot_conventions.options import FINITE, POSITIVE, option
from sim.tasks.crazyflie.hover import CrazyflieHover


@dataclass
class CrazyflieGoto(CrazyflieHover):
    """Fly to goals drawn anywhere in a 3 x 3 x 1.5 m volume; a new goal every goal_period_s."""

    goal_period_s: float = option(4.0, POSITIVE)
    goal_low: tuple[float, float, float] = option((-1.5, -1.5, 0.5), FINITE)
    goal_high: tuple[float, float, float] = option((1.5, 1.5, 2.0), FINITE)
    name = "crazyflie_goto"

    def sample_goals(self, ids: torch.Tensor) -> None:
        lo = torch.tensor(self.goal_low, dtype=torch.float64, device=self.device)
        hi = torch.tensor(self.goal_high, dtype=torch.float64, device=self.device)
        self.goal_pos[ids] = lo + (hi - lo) * torch.rand(
            len(ids), 3, generator=self.rng, dtype=torch.float64, device=self.device
        )

    def interval_events(self, step: torch.Tensor) -> None:
        super().interval_events(step)
        every = int(self.goal_period_s / self.control_dt)
        due = ((step % every) == 0).nonzero().flatten()
        if due.numel():
            self.sample_goals(due)

"""What both learners report of the episodes that ended: recent returns and success, and per-term episode logs."""

from __future__ import annotations

import numpy as np
import torch


class EpisodeStats:
    """Returns of the last 200 ended episodes and success of the last 500 that ran out their time or crashed
    (success is defined at an episode's end, so a crash counts as a failure), plus the env's per-term episode
    logs since the last take_logs()."""

    def __init__(self, num_envs: int):
        self.ret_sum = torch.zeros(num_envs)
        self.returns: list[float] = []
        self.success: list[float] = []
        self.logs: list[dict] = []

    def record(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict) -> None:
        self.ret_sum += rewards.to(self.ret_sum.device, self.ret_sum.dtype)
        done_ids = dones.nonzero().flatten().cpu()
        if not done_ids.numel():
            return
        self.returns = (self.returns + self.ret_sum[done_ids].tolist())[-200:]
        self.ret_sum[done_ids] = 0.0
        final, timed_out = extras["final"], extras["time_outs"][done_ids]
        self.success = (self.success + final["success"][timed_out | (final["crash"] > 0)].tolist())[-500:]
        self.logs.append(extras["episode"])

    def take_logs(self) -> list[dict]:
        logs, self.logs = self.logs, []
        return logs

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.success)) if self.success else float("nan")


def write_episode_scalars(writer, it: int, mean_return: float, success_rate: float, logs: list[dict]) -> None:
    """Train/mean_reward, Train/success_rate and the mean of each Episode/<term> over the iteration's logs."""
    writer.add_scalar("Train/mean_reward", mean_return, it)
    writer.add_scalar("Train/success_rate", success_rate, it)
    for k in sorted(set().union(*[d.keys() for d in logs]) if logs else ()):
        writer.add_scalar(f"Episode/{k}", float(np.mean([float(d[k]) for d in logs if k in d])), it)

"""What both learners report: recent returns and success of ended episodes, per-term episode logs, the
iteration's scalars, when a checkpoint is due and the summary learn() returns."""

from __future__ import annotations

import numpy as np
import torch


class EpisodeStats:
    """Returns of the last 200 ended episodes and success of the last 500 that ran out their time or crashed
    (success is defined at an episode's end, so a crash counts as a failure), plus the env's per-term episode
    logs of the current iteration."""

    def __init__(self, num_envs: int, device: torch.device | str = "cpu"):
        self.ret_sum = torch.zeros(num_envs, device=device)  # the env's device: no copy of the rewards per step
        self.returns: list[float] = []
        self.success: list[float] = []
        self.logs: list[dict] = []

    def record(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict) -> None:
        self.ret_sum += rewards.to(self.ret_sum.device, self.ret_sum.dtype)
        done_ids = dones.nonzero().flatten()
        if not done_ids.numel():
            return
        self.returns = (self.returns + self.ret_sum[done_ids].tolist())[-200:]
        self.ret_sum[done_ids] = 0.0
        final, timed_out = extras["final"], extras["time_outs"][done_ids]
        self.success = (self.success + final["success"][timed_out | (final["crash"] > 0)].tolist())[-500:]
        self.logs.append(extras["episode"])

    def start_iteration(self) -> None:
        """The episode logs are the current iteration's."""
        self.logs = []

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.success)) if self.success else float("nan")


def write_iteration_scalars(
    writer, it: int, losses: dict, episodes: EpisodeStats, total_steps: int, train_time_s: float
) -> None:
    """Loss/<name>, Train/mean_reward, Train/success_rate, the mean of each Episode/<term> over the
    iteration's episode logs, and the curves' other x axes: Perf/total_env_steps and Perf/train_time_s
    (both cumulative over resumes, as the checkpoint carries them)."""
    writer.add_scalar("Perf/total_env_steps", total_steps, it)
    writer.add_scalar("Perf/train_time_s", train_time_s, it)
    for k, v in losses.items():
        writer.add_scalar(f"Loss/{k}", v, it)
    mean_return, success_rate, logs = episodes.mean_return, episodes.success_rate, episodes.logs
    writer.add_scalar("Train/mean_reward", mean_return, it)
    writer.add_scalar("Train/success_rate", success_rate, it)
    for k in sorted(set().union(*[d.keys() for d in logs]) if logs else ()):
        writer.add_scalar(f"Episode/{k}", float(np.mean([float(d[k]) for d in logs if k in d])), it)


def checkpoint_due(iteration: int, save_every: int, iterations: int) -> bool:
    """Every save_every iterations, and at the last one."""
    return iteration % save_every == 0 or iteration == iterations


def learn_result(iteration: int, total_steps: int, train_time_s: float, episodes: EpisodeStats) -> dict:
    """What learn() returns (the train command records it in meta.json)."""
    return {
        "iterations": iteration,
        "total_steps": total_steps,
        "train_time_s": train_time_s,
        "mean_return": episodes.mean_return,
        "train_success": episodes.success_rate,
    }

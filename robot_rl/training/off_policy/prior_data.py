"""Prior data: episodes recorded by `robot-rl collect`, in the replay ring's own layout, for RLPD-style learning.

A dataset is two files, `<name>.npz` (numpy, read with allow_pickle=False: nothing in it can run) and
`<name>.json` (what it holds). The arrays are the replay ring's, (steps, worlds, ...) in step order:

    obs, next_obs            float32 (T, W, obs_dim)      next_obs is the final observation where done
    critic_obs, next_critic_obs  float32 (T, W, critic_dim)  only when the env has a critic group
    actions                  float32 (T, W, num_actions)  in policy space [-1, 1]
    rewards                  float32 (T, W)
    done, terminated         bool (T, W)                  done: ended here; terminated: nothing to bootstrap
    episode                  int32 (T, W)                 index into the episode arrays
    episode_success          int8 (E,)                    1 success, 0 failure, -1 unfinished when collecting ended
    episode_return           float32 (E,)

The JSON names the task, robot, observation layout, action mode and dims, the source (policy kind, run and
checkpoint), seed, randomization, and the episode counts. An off-policy run reads one with
`algo.prior_data=<name>.npz`: each batch then holds `algo.prior_ratio` of prior transitions (RLPD's
symmetric sampling at 0.5), drawn with the same n-step windows as online ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from robot_rl.schema import ConfigError
from robot_rl.training.off_policy.replay import ReplayBuffer

RING_KEYS = ("obs", "next_obs", "actions", "rewards", "done", "terminated")
CRITIC_KEYS = ("critic_obs", "next_critic_obs")


class DatasetError(ConfigError):
    """A prior-data file that cannot be used; the message says which and why."""


class EpisodeLabels:
    """Per world-step episode indices and per-episode success and return, while collecting."""

    def __init__(self, num_worlds: int):
        self.current = torch.arange(num_worlds, dtype=torch.int32)  # each world's running episode
        self.success: list[int] = [-1] * num_worlds
        self.returns: list[float] = [0.0] * num_worlds
        self.rows: list[torch.Tensor] = []

    def record(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict) -> None:
        self.rows.append(self.current.clone())
        for w, r in zip(self.current.tolist(), rewards.tolist(), strict=True):
            self.returns[w] += float(r)
        done_ids = dones.nonzero().flatten()
        if not done_ids.numel():
            return
        ended = extras["final"]["success"] > 0
        for i, w in enumerate(done_ids.tolist()):
            self.success[int(self.current[w])] = int(bool(ended[i]))
            self.current[w] = len(self.success)
            self.success.append(-1)
            self.returns.append(0.0)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "episode": torch.stack(self.rows).numpy().astype(np.int32),
            "episode_success": np.asarray(self.success, dtype=np.int8),
            "episode_return": np.asarray(self.returns, dtype=np.float32),
        }


def write_dataset(path: Path, buffer: ReplayBuffer, labels: EpisodeLabels, meta: dict) -> dict:
    """<path>.npz and <path>.json from a filled ring (oldest step first) and its episode labels."""
    path = Path(path).with_suffix("")
    state = buffer.state_dict()
    arrays = {k: v.numpy() for k, v in state["data"].items()} | labels.arrays()
    success = arrays["episode_success"]
    meta = meta | {
        "format": "robot_rl prior data v1",
        "steps": int(state["filled"]),
        "worlds": int(state["num_envs"]),
        "transitions": int(state["filled"]) * int(state["num_envs"]),
        "episodes": {"finished": int((success >= 0).sum()), "successful": int((success == 1).sum())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path.with_suffix(".npz"))
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    return meta


def load_prior(path: Path, obs_dim: int, critic_dim: int | None, act_dim: int, device) -> ReplayBuffer:
    """A dataset as a read-only replay ring; refuses one of other dimensions, or a file that is not one."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError) as e:
        raise DatasetError(f"{path} is not a prior-data file ({type(e).__name__}: {e})") from None
    keys = RING_KEYS + (CRITIC_KEYS if critic_dim is not None else ())
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise DatasetError(f"{path} lacks {', '.join(missing)} (recorded from another env or observation groups?)")
    steps, worlds = arrays["rewards"].shape if arrays["rewards"].ndim == 2 else (0, 0)
    want = {"obs": obs_dim, "next_obs": obs_dim, "actions": act_dim}
    want |= {"critic_obs": critic_dim, "next_critic_obs": critic_dim} if critic_dim is not None else {}
    for k, dim in want.items():
        if arrays[k].shape != (steps, worlds, dim):
            raise DatasetError(f"{path}: {k} is {arrays[k].shape}, this run needs ({steps}, {worlds}, {dim})")
    for k in ("rewards", "done", "terminated"):
        if arrays[k].shape != (steps, worlds):
            raise DatasetError(f"{path}: {k} is {arrays[k].shape}, expected ({steps}, {worlds})")
    if steps < 1 or not all(np.isfinite(arrays[k]).all() for k in ("obs", "next_obs", "actions", "rewards")):
        raise DatasetError(f"{path} holds no steps, or values that are not finite")
    ring = ReplayBuffer(steps * worlds, worlds, obs_dim, act_dim, critic_dim, device)
    ring.load_state_dict(
        {
            "rows": ring.rows,
            "num_envs": worlds,
            "filled": steps,
            "data": {k: torch.from_numpy(np.ascontiguousarray(arrays[k])) for k in keys},
        }
    )
    return ring

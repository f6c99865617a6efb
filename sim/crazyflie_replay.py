"""Logged commands replayed open loop in simulated Crazyflies, from logged states, under candidate physical
parameters: the predictions behind `robot-rl replay` and `robot-rl sysid`.

A log holds the kinematic state only. The rest (motor thrusts, commands in flight, the firmware's PID state)
is rebuilt by an observer pass: one world per parameter set steps through the log under the logged commands
with its kinematics reset to the logged state at every step, so its hidden state is what these parameters
would have made it. From each window start, a world then flies free from the logged state with that hidden
state, and its prediction is compared with what the log shows next.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from sim.env import BatchedEnv, EnvConfig
from sim.tasks.crazyflie import CrazyflieHover
from sim.tasks.crazyflie.physical import write_params

STATE_KEYS = ("position", "velocity", "quaternion", "angular_velocity")  # quaternion xyzw, as raw state
FIRMWARE_STATE = ("att_int", "rate_int", "rate_prev_err")


def _env(num_worlds: int, seed: int) -> BatchedEnv:
    cfg = EnvConfig(
        num_worlds=num_worlds,
        seed=seed,
        nthread=1,
        episode_length_s=1e9,
        randomization="none",
        obs_noise=False,
        action_latency=True,
        pushes=False,
    )
    return BatchedEnv(CrazyflieHover(), cfg)


def _kinematics(states: Mapping[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """MuJoCo qpos (wxyz) and qvel rows from raw states (..., d)."""
    q = np.asarray(states["quaternion"], dtype=np.float64)
    qpos = np.concatenate([states["position"], q[..., 3:4], q[..., 0:3]], axis=-1)
    qvel = np.concatenate([states["velocity"], states["angular_velocity"]], axis=-1)
    return torch.as_tensor(qpos, dtype=torch.float64), torch.as_tensor(qvel, dtype=torch.float64)


class CrazyflieReplay:
    def __init__(self, seed: int = 0):
        self.seed = seed
        self._envs: dict[int, BatchedEnv] = {}

    def env(self, num_worlds: int) -> BatchedEnv:
        if num_worlds not in self._envs:
            self._envs[num_worlds] = _env(num_worlds, self.seed)
        return self._envs[num_worlds]

    def predict(
        self,
        params: Mapping[str, np.ndarray],
        states: Mapping[str, np.ndarray],
        commands: np.ndarray,
        starts: np.ndarray,
        horizon: int,
    ) -> dict[str, np.ndarray]:
        """Open-loop predictions from each start under each parameter set.

        params: PARAM_NAMES of sim.tasks.crazyflie.physical -> (P,); states: STATE_KEYS -> (T, d), the logged
        state at each step; commands: (T, 4) rpyt (send_setpoint units), the command in effect after each state;
        starts: (K,) step indices with start + horizon < T. Returns STATE_KEYS -> (P, K, horizon, d): entry
        [p, j, h] predicts states[starts[j] + h + 1].
        """
        sizes = {len(np.atleast_1d(v)) for v in params.values()}
        if len(sizes) != 1:
            raise ValueError(f"parameter sets of different lengths {sorted(sizes)}")
        p_count, starts = sizes.pop(), np.asarray(starts, dtype=np.int64)
        if starts.size == 0 or starts.max() + horizon >= len(commands):
            raise ValueError(f"window starts must leave {horizon} steps before the log's end ({len(commands)})")
        hidden = self._observe(params, states, commands, starts)
        k = len(starts)
        env = self.env(p_count * k)
        task, b = env.task, env.backend
        ids = torch.arange(p_count * k)
        write_params(
            task, ids, {n: torch.as_tensor(v, dtype=torch.float64).repeat_interleave(k) for n, v in params.items()}
        )
        env.reset_worlds(ids)
        qpos, qvel = _kinematics({key: v[starts] for key, v in states.items()})
        b.qpos[:] = qpos.repeat(p_count, 1)
        b.qvel[:] = qvel.repeat(p_count, 1)
        b.act[:] = hidden["act"].reshape(p_count * k, -1)
        task.cmd_hist[:] = hidden["cmd_hist"].reshape(p_count * k, *task.cmd_hist.shape[1:])
        for name in FIRMWARE_STATE:
            getattr(task.firmware, name)[:] = hidden[name].reshape(p_count * k, -1)
        cmds = torch.as_tensor(commands, dtype=torch.float64)
        window = starts[None, :] + np.arange(horizon)[:, None]  # (horizon, K)
        out = {key: np.empty((p_count * k, horizon, 4 if key == "quaternion" else 3)) for key in STATE_KEYS}
        for h in range(horizon):
            env.advance(task.command_controls(cmds[window[h]].repeat(p_count, 1)))
            raw = task.raw_state(noisy=False)
            for key in STATE_KEYS:
                out[key][:, h] = raw[key].numpy()
        return {key: v.reshape(p_count, k, horizon, -1) for key, v in out.items()}

    def _observe(self, params, states, commands, starts) -> dict[str, torch.Tensor]:
        """The observer pass: hidden state at each start, (P, K, ...) per field."""
        p_count = len(np.atleast_1d(next(iter(params.values()))))
        env = self.env(p_count)
        task, b = env.task, env.backend
        ids = torch.arange(p_count)
        write_params(task, ids, {n: torch.as_tensor(v, dtype=torch.float64) for n, v in params.items()})
        env.reset_worlds(ids)
        task.cmd_hist[:] = 0.0  # a log starts with the motors idle
        b.act[:] = 0.0
        qpos, qvel = _kinematics(states)
        cmds = torch.as_tensor(commands, dtype=torch.float64)
        snap: dict[str, list[torch.Tensor]] = {n: [] for n in ("act", "cmd_hist", *FIRMWARE_STATE)}
        todo = sorted(set(starts.tolist()))
        index = {s: i for i, s in enumerate(todo)}
        taken: list[dict[str, torch.Tensor]] = [None] * len(todo)  # type: ignore[list-item]
        for t in range(todo[-1] + 1):
            b.qpos[:] = qpos[t]
            b.qvel[:] = qvel[t]
            if t in index:
                taken[index[t]] = {
                    "act": b.act.clone(),
                    "cmd_hist": task.cmd_hist.clone(),
                    **{n: getattr(task.firmware, n).clone() for n in FIRMWARE_STATE},
                }
            if t < todo[-1]:
                env.advance(task.command_controls(cmds[t].expand(p_count, 4)))
        for s in starts.tolist():
            for n in snap:
                snap[n].append(taken[index[s]][n])
        return {n: torch.stack(v, dim=1) for n, v in snap.items()}

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()

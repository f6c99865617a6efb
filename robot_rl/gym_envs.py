"""Gymnasium registration: one world of a task as a plain gymnasium.Env (robot_rl/CrazyflieHover-v0).

For the wider ecosystem (Stable-Baselines3 and friends). Gymnasium 1.x loads no plugins, so an id names the
module that registers it: gymnasium.make("robot_rl.gym_envs:robot_rl/CrazyflieHover-v0") works in a fresh
interpreter (after `import robot_rl.gym_envs`, the bare id does). Training here uses the batched env,
which steps 1024 worlds at a time; bench/env_throughput.py measures the difference.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from sim.env import BatchedEnv, EnvConfig
from sim.tasks import make_task


class SingleWorldEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(
        self,
        task: str = "crazyflie_hover",
        randomization: str = "train",
        render_mode: str | None = None,
        seed: int = 0,
        episode_length_s: float = 8.0,
        **task_params,
    ):
        self._task_name, self._randomization, self._task_params = task, randomization, task_params
        self._episode_length_s = float(episode_length_s)
        self.render_mode = render_mode
        self._env = self._make(seed)
        self._next_obs: np.ndarray | None = None  # the next episode's first observation, after an episode ended
        obs_dim = self._env.get_observations()["policy"].shape[1]
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (self._env.num_actions,), np.float32)

    def _make(self, seed: int) -> BatchedEnv:
        cfg = EnvConfig(
            num_worlds=1,
            seed=seed,
            nthread=1,
            randomization=self._randomization,
            episode_length_s=self._episode_length_s,
            final_observation=True,
        )
        return BatchedEnv(make_task(self._task_name, **self._task_params), cfg)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new episode. After an episode ended, the world has already been reset inside that step (the
        batched env resets ended worlds at once): its first observation is returned and nothing is reset
        again, unless a seed asks for a fresh, seeded start."""
        super().reset(seed=seed)
        if seed is not None:
            self._env.rng.manual_seed(seed)
        if seed is None and self._next_obs is not None:
            obs = self._next_obs
        else:
            obs = self._env.reset()["policy"][0].numpy()
        self._next_obs = None
        return obs, {}

    def step(self, action):
        obs, reward, dones, extras = self._env.step(torch.as_tensor(action, dtype=torch.float64).reshape(1, -1))
        truncated = bool(extras["time_outs"][0])
        terminated = bool(dones[0]) and not truncated
        info = {}
        policy_obs = obs["policy"][0].numpy()
        if "final" in extras:
            info = {k: float(v[0]) for k, v in extras["final"].items() if k not in ("ids", "terms")}
            # Gymnasium's API: the observation of the state the episode ended in, not of the next episode
            self._next_obs = policy_obs
            policy_obs = extras["final_observation"]["policy"][0].numpy()
        return policy_obs, float(reward[0]), terminated, truncated, info

    def render(self):
        return self._env.backend.render(0, camera="chase")

    def close(self):
        self._env.close()


def register_envs() -> None:
    """Called on import (and by Gymnasium 0.x through the 'gymnasium.envs' entry point)."""
    for env_id, task in (
        ("robot_rl/CrazyflieHover-v0", "crazyflie_hover"),
        ("robot_rl/CrazyflieGoto-v0", "crazyflie_goto"),
    ):
        if env_id not in gym.registry:
            gym.register(
                id=env_id, entry_point="robot_rl.gym_envs:SingleWorldEnv", kwargs={"task": task}, max_episode_steps=None
            )


register_envs()

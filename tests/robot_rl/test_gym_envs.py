"""The Gymnasium wrapper against Gymnasium's own checker and its episode-end semantics."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import robot_rl.gym_envs  # noqa: F401  (registers the envs)
from robot_rl.gym_envs import SingleWorldEnv
from sim.env import BatchedEnv, EnvConfig
from sim.tasks.crazyflie import CrazyflieHover

ENV_IDS = [env_id for env_id in gym.registry if env_id.startswith("robot_rl/")]


def test_every_registered_env_is_checked():
    assert {"robot_rl/CrazyflieHover-v0", "robot_rl/CrazyflieGoto-v0"} <= set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env(env_id):
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


class _NeverEnds(CrazyflieHover):
    """The same task and physics, without terminations: its observation after any step is the world's
    state at that step, which no reset has replaced."""

    def terminated(self) -> torch.Tensor:
        return torch.zeros_like(self.crashed)


def _twin(task, episode_length_s: float) -> BatchedEnv:
    """A batched env started as SingleWorldEnv(seed=0).reset(seed=7) starts its env."""
    env = BatchedEnv(task, EnvConfig(num_worlds=1, seed=0, nthread=1, episode_length_s=episode_length_s))
    env.rng.manual_seed(7)
    env.reset()
    return env


def _run_to_end(env: SingleWorldEnv, action: np.ndarray) -> tuple[list[np.ndarray], bool, bool]:
    obs = [env.reset(seed=7)[0]]
    for _ in range(400):
        o, _, terminated, truncated, _ = env.step(action)
        obs.append(o)
        if terminated or truncated:
            return obs, terminated, truncated
    raise AssertionError("no episode end in 400 steps")


# full thrust flies out of the 3.5 m bound (a termination) within 4 s; hover thrust times out after 1 s
@pytest.mark.parametrize("action, seconds, ends_by", [(np.array([0.0, 0.0, 0.0, 1.0]), 4.0, "termination"),
                                                      (np.zeros(4), 1.0, "time-out")])  # fmt: skip
def test_episode_end_returns_the_pre_reset_state_and_reset_resets_once(action, seconds, ends_by):
    env = SingleWorldEnv(seed=0, episode_length_s=seconds)
    obs, terminated, truncated = _run_to_end(env, action.astype(np.float32))
    assert (terminated, truncated) == ((True, False) if ends_by == "termination" else (False, True))
    steps = len(obs) - 1

    # the same episode where nothing ends: its observation at the last step is the world before the reset
    never = _twin(_NeverEnds(), episode_length_s=100.0)
    for _ in range(steps):
        o, _, dones, _ = never.step(torch.as_tensor(action, dtype=torch.float64).reshape(1, -1))
    assert not dones.any()
    np.testing.assert_array_equal(obs[-1], o["policy"][0].numpy())

    # the same episode in the batched env, which resets the ended world inside that step: reset() must
    # hand over that first observation of the next episode (a second reset would start elsewhere)
    batched = _twin(CrazyflieHover(), episode_length_s=seconds)
    for _ in range(steps):
        o, _, dones, _ = batched.step(torch.as_tensor(action, dtype=torch.float64).reshape(1, -1))
    assert dones.all()
    first, _ = env.reset()
    np.testing.assert_array_equal(first, o["policy"][0].numpy())
    assert not np.array_equal(first, obs[-1])
    # and the world is the one the batched env started: the next step agrees too
    o2, _, _, _ = batched.step(torch.zeros(1, 4, dtype=torch.float64))
    np.testing.assert_array_equal(env.step(np.zeros(4, np.float32))[0], o2["policy"][0].numpy())


def test_a_seeded_reset_after_an_episode_starts_fresh():
    env = SingleWorldEnv(seed=0, episode_length_s=1.0)
    _run_to_end(env, np.zeros(4, np.float32))
    a, _ = env.reset(seed=11)
    b, _ = SingleWorldEnv(seed=0).reset(seed=11)
    np.testing.assert_array_equal(a, b)


def test_gymnasium_make_works_in_a_fresh_interpreter():
    """Gymnasium 1.x loads no plugins: the id's module prefix is its documented way to import the registration,
    with nothing imported by hand first."""
    import subprocess
    import sys

    code = (
        "import gymnasium\n"
        "for name in ('CrazyflieHover', 'CrazyflieGoto'):\n"
        "    env = gymnasium.make(f'robot_rl.gym_envs:robot_rl/{name}-v0')\n"
        "    obs, _ = env.reset(seed=0)\n"
        "    print(name, obs.shape, env.step(env.action_space.sample())[0].shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.split("\n")[:2] == ["CrazyflieHover (25,) (25,)", "CrazyflieGoto (25,) (25,)"]

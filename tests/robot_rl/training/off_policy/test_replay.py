"""The replay ring keeps the newest env steps, and n-step returns match a hand-computed case."""

import pytest
import torch

from robot_rl.training.off_policy.replay import ReplayBuffer


def _fill(buf: ReplayBuffer, steps: int, done=(), terminated=()) -> None:
    """Step t: obs t, next_obs 100 + t, reward t + 1 (one world)."""
    for t in range(steps):
        buf.add(
            obs=torch.full((1, 1), float(t)),
            next_obs=torch.full((1, 1), 100.0 + t),
            actions=torch.zeros(1, 1),
            rewards=torch.tensor([t + 1.0]),
            done=torch.tensor([t in done or t in terminated]),
            terminated=torch.tensor([t in terminated]),
        )


def _by_start(buf: ReplayBuffer, n_step: int, gamma: float) -> dict[int, tuple[float, float, float]]:
    torch.manual_seed(0)
    b = buf.sample(4096, n_step, gamma)
    out = {}
    for o, r, nxt, disc in zip(b["obs"][:, 0], b["returns"], b["next_obs"][:, 0], b["discount"], strict=True):
        out.setdefault(int(o), (float(r), float(nxt), float(disc)))
    return out


def test_n_step_returns_stop_at_episode_ends_and_bootstrap_time_outs_only():
    buf = ReplayBuffer(capacity=8, num_envs=1, obs_dim=1, act_dim=1)
    _fill(buf, 6, done={2}, terminated={4})  # step 2 times out, step 4 terminates, step 5 is the newest
    got = _by_start(buf, n_step=3, gamma=0.5)
    expected = {
        0: (1 + 0.5 * 2 + 0.25 * 3, 102.0, 0.125),  # the window reaches the time-out: bootstrap its final obs
        1: (2 + 0.5 * 3, 102.0, 0.25),
        2: (3.0, 102.0, 0.5),
        3: (4 + 0.5 * 5, 104.0, 0.0),  # ends in a termination: nothing to bootstrap
        4: (5.0, 104.0, 0.0),
        5: (6.0, 105.0, 0.5),  # the newest row: its window is cut short, bootstrapped at once
    }
    assert got.keys() == expected.keys()
    for t, want in expected.items():
        assert got[t] == pytest.approx(want), t


def test_full_n_step_window_without_episode_end():
    buf = ReplayBuffer(capacity=8, num_envs=1, obs_dim=1, act_dim=1)
    _fill(buf, 6)
    r, nxt, disc = _by_start(buf, n_step=3, gamma=0.9)[1]
    assert (r, nxt, disc) == pytest.approx((2 + 0.9 * 3 + 0.81 * 4, 103.0, 0.9**3))


def test_ring_wraps_and_keeps_the_newest_steps_with_windows_in_order():
    buf = ReplayBuffer(capacity=4, num_envs=1, obs_dim=1, act_dim=1)
    _fill(buf, 7)  # rows hold steps 3..6 after wrapping
    assert len(buf) == 4 and buf.ptr == 3
    got = _by_start(buf, n_step=2, gamma=0.5)
    assert sorted(got) == [3, 4, 5, 6]
    assert got[5] == pytest.approx((6 + 0.5 * 7, 106.0, 0.25))  # the window crosses the ring's end (rows 1 -> 2)
    assert got[6] == pytest.approx((7.0, 106.0, 0.5))


def test_worlds_keep_their_own_windows_and_the_ring_is_sized_in_env_steps():
    buf = ReplayBuffer(capacity=10, num_envs=4, obs_dim=1, act_dim=1)
    assert buf.rows == 3  # ceil(10 / 4) env steps
    for t in range(3):
        buf.add(
            obs=torch.arange(4.0).unsqueeze(1) * 10 + t,
            next_obs=torch.arange(4.0).unsqueeze(1) * 10 + t + 1,
            actions=torch.zeros(4, 1),
            rewards=torch.arange(4.0) * 10 + t,
            done=torch.zeros(4, dtype=torch.bool),
            terminated=torch.zeros(4, dtype=torch.bool),
        )
    b = buf.sample(512, n_step=2, gamma=1.0)
    world, t = (b["obs"][:, 0] // 10), (b["obs"][:, 0] % 10)
    expected = torch.where(t < 2, 2 * (world * 10 + t) + 1, world * 10 + t)
    assert torch.equal(b["returns"], expected)


def test_state_dict_round_trip_keeps_order_after_wrap():
    a = ReplayBuffer(capacity=4, num_envs=1, obs_dim=1, act_dim=1)
    _fill(a, 6)
    b = ReplayBuffer(capacity=4, num_envs=1, obs_dim=1, act_dim=1)
    b.load_state_dict(a.state_dict())
    assert _by_start(a, 2, 0.5) == _by_start(b, 2, 0.5)
    with pytest.raises(ValueError, match="does not fit"):
        ReplayBuffer(capacity=8, num_envs=1, obs_dim=1, act_dim=1).load_state_dict(a.state_dict())

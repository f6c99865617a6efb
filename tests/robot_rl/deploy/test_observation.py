"""robot_rl.deploy.observation: the k_nearest_relative op of swarm bundles."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.deploy.observation import FAR_NEIGHBOUR_M, ObsTerm, build_observation

TERM = {"name": "neighbours", "op": "k_nearest_relative", "inputs": ["position", "velocity", "neighbour_states"],
        "dim": 12}  # fmt: skip


def test_nearest_first_relative_and_padded_far_and_still():
    raw = {"position": np.zeros(3), "velocity": np.array([0.1, 0.0, 0.0]),
           "neighbour_states": np.array([[3.0, 0, 0, 0, 0, 0], [1.0, 0, 0, 0, 0.5, 0]])}  # fmt: skip
    obs = build_observation([ObsTerm.from_dict(TERM)], raw)
    np.testing.assert_allclose(obs[:6], [1.0, 0, 0, -0.1, 0.5, 0], atol=1e-6)  # the nearer one first
    np.testing.assert_allclose(obs[6:], [3.0, 0, 0, -0.1, 0, 0], atol=1e-6)
    one = build_observation([ObsTerm.from_dict(TERM)], dict(raw, neighbour_states=raw["neighbour_states"][1:]))
    np.testing.assert_allclose(one[6:], [FAR_NEIGHBOUR_M] * 3 + [0, 0, 0])  # a missing slot: far away and still


def test_a_dim_that_is_not_six_k_is_refused_at_load():
    with pytest.raises(ValueError, match="6 k"):
        ObsTerm.from_dict(dict(TERM, dim=10))


def test_batched_neighbours_give_each_drones_own_tokens():
    rng = np.random.default_rng(0)
    pos, vel, nb = rng.normal(size=(4, 5, 3)), rng.normal(size=(4, 5, 3)), rng.normal(size=(4, 5, 3, 6))
    term = [ObsTerm.from_dict(dict(TERM, dim=24))]  # k = 4 > 3 heard: one padded slot each
    batched = build_observation(term, {"position": pos, "velocity": vel, "neighbour_states": nb})
    assert batched.shape == (4, 5, 24)
    for i in range(4):
        for j in range(5):
            one = build_observation(term, {"position": pos[i, j], "velocity": vel[i, j], "neighbour_states": nb[i, j]})
            np.testing.assert_array_equal(batched[i, j], one)
    np.testing.assert_allclose(batched[..., 18:21], FAR_NEIGHBOUR_M)

"""One torch-vs-numpy parity test per observation op: sim's torch op (training) and the deploy runtime's numpy op
(the robot) on the same random inputs, keyed by the names in robot_conventions.observation_ops."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from robot_conventions import observation_ops as ops
from robot_rl.deploy import observation as deploy_obs
from sim import observation_layout as sim_obs

RNG = np.random.default_rng(0)
BATCH = 64


def _quat_xyzw(n: int) -> np.ndarray:
    q = RNG.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _vec(n: int, dim: int = 3) -> np.ndarray:
    return RNG.normal(scale=2.0, size=(n, dim))


def _sim_op(name: str, *args: np.ndarray) -> np.ndarray:
    """sim's torch op on float64 tensors, through its table, with the rotation its layout builder would pass."""
    tensors = [torch.from_numpy(a) for a in args]
    return sim_obs.OPS[name](sim_obs.quat_xyzw_to_rotmat, *tensors).numpy()


def _deploy_op(name: str, *args: np.ndarray) -> np.ndarray:
    return deploy_obs.OPS[name][0](*args)


# op -> its inputs (float64, batched)
INPUTS = {
    ops.IDENTITY: lambda: (_vec(BATCH, 7),),
    ops.DIFFERENCE: lambda: (_vec(BATCH), _vec(BATCH)),
    ops.ROTMAT_FROM_QUAT_XYZW: lambda: (_quat_xyzw(BATCH),),
    ops.BODY_FRAME: lambda: (_vec(BATCH), _quat_xyzw(BATCH)),
    ops.BODY_FRAME_DIFFERENCE: lambda: (_vec(BATCH), _vec(BATCH), _quat_xyzw(BATCH)),
}


def test_every_op_is_named_once_and_both_tables_use_the_names():
    assert len(set(ops.OBSERVATION_OPS)) == len(ops.OBSERVATION_OPS)
    assert set(ops.OP_ARITY) == set(ops.OBSERVATION_OPS)
    assert tuple(deploy_obs.OPS) == ops.OBSERVATION_OPS
    assert {name: arity for name, (_, arity) in deploy_obs.OPS.items()} == ops.OP_ARITY
    # sim's table: every op but the swarm's neighbour tokens, which the swarm task computes itself
    assert set(sim_obs.OPS) == set(ops.OBSERVATION_OPS) - {ops.K_NEAREST_RELATIVE}
    # every op has a parity test below
    assert set(INPUTS) | {ops.K_NEAREST_RELATIVE} == set(ops.OBSERVATION_OPS)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_torch_and_numpy_op_agree(name):
    args = INPUTS[name]()
    want = _deploy_op(name, *args)
    got = _sim_op(name, *args)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # and in training's float32, to float32 precision
    got32 = sim_obs.OPS[name](sim_obs.quat_xyzw_to_rotmat, *(torch.from_numpy(a).float() for a in args)).numpy()
    np.testing.assert_allclose(got32, want, rtol=0, atol=1e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_the_parity_check_sees_a_wrong_op(name):
    """The comparison above fails when one side computes something else (here: the inputs' order reversed or
    one input perturbed)."""
    args = INPUTS[name]()
    wrong = [a.copy() for a in args]
    wrong[0] = wrong[0] + 1e-3
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(_sim_op(name, *wrong), _deploy_op(name, *args), rtol=0, atol=1e-6)


def _sim_neighbours(received: np.ndarray, own: np.ndarray, k: int) -> np.ndarray:
    """The swarm task's torch neighbour tokens (W, N, k, 6), its own method run on a stand-in for the task."""
    from sim.tasks.crazyflie.swarm import CrazyflieSwarm

    task = types.SimpleNamespace(num_drones=received.shape[1], k_neighbours=k, received=torch.from_numpy(received))
    return CrazyflieSwarm._observed_neighbours(task, torch.from_numpy(own)).numpy()


@pytest.mark.parametrize("num_drones,k", [(6, 3), (3, 4)])  # enough neighbours, and too few (padded)
def test_k_nearest_relative_torch_and_numpy_agree(num_drones, k):
    worlds = 8
    received = RNG.normal(scale=3.0, size=(worlds, num_drones, 6))  # each drone's broadcast [p, v]
    own = received + RNG.normal(scale=0.01, size=received.shape)  # a drone's own state, as it knows it
    got = _sim_neighbours(received, own, k).reshape(worlds, num_drones, 6 * k)
    # the deploy runtime of drone i hears the other drones' broadcasts
    others = np.stack([np.delete(received, i, axis=1) for i in range(num_drones)], axis=1)  # (W, N, N - 1, 6)
    term = deploy_obs.ObsTerm.from_dict(
        {"name": "nb", "op": ops.K_NEAREST_RELATIVE, "inputs": ["p", "v", "nb"], "dim": 6 * k}
    )
    raw = {"p": own[..., 0:3], "v": own[..., 3:6], "nb": others}
    want = deploy_obs.build_observation([term], raw)  # float32, as the policy gets it
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=0, atol=1e-6 * max(1.0, float(np.abs(want).max())))
    if num_drones - 1 < k:
        assert np.all(got[..., -6:-3] == ops.FAR_NEIGHBOUR_M)
    # able to fail: neighbours out of order
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(got[..., ::-1].astype(np.float32), want, rtol=0, atol=1e-6)

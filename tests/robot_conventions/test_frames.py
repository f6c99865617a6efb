"""robot_conventions.frames: the quaternion order converters round trip, and the torch rotations sim computes
agree with the numpy ones the deploy runtime computes."""

from __future__ import annotations

import numpy as np
import torch

from robot_conventions import frames

RNG = np.random.default_rng(1)


def _unit(n: int) -> np.ndarray:
    q = RNG.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def test_quaternion_order_round_trips_bit_for_bit():
    q = _unit(200)
    assert np.array_equal(frames.quat_xyzw_to_wxyz(frames.quat_wxyz_to_xyzw(q)), q)
    assert np.array_equal(frames.quat_wxyz_to_xyzw(frames.quat_xyzw_to_wxyz(q)), q)
    assert frames.quat_wxyz_to_xyzw([1.0, 0.0, 0.0, 0.0]).tolist() == [0.0, 0.0, 0.0, 1.0]
    assert frames.quat_xyzw_to_wxyz([0.0, 0.0, 0.0, 1.0]).tolist() == [1.0, 0.0, 0.0, 0.0]
    # the conversion is not the identity (a round trip of one direction twice is not one)
    assert not np.array_equal(frames.quat_wxyz_to_xyzw(frames.quat_wxyz_to_xyzw(q)), q)


def test_index_tuples_are_the_converters():
    q = _unit(50)
    assert np.array_equal(q[..., list(frames.XYZW_FROM_WXYZ)], frames.quat_wxyz_to_xyzw(q))
    assert np.array_equal(q[..., list(frames.WXYZ_FROM_XYZW)], frames.quat_xyzw_to_wxyz(q))
    t = torch.from_numpy(q)
    assert np.array_equal(t[..., list(frames.XYZW_FROM_WXYZ)].numpy(), frames.quat_wxyz_to_xyzw(q))
    assert (frames.QUAT_ORDER_SIM, frames.QUAT_ORDER_ROS) == ("wxyz", "xyzw")


def test_euler_round_trip():
    rpy = np.stack([RNG.uniform(-3, 3, 200), RNG.uniform(-1.5, 1.5, 200), RNG.uniform(-3, 3, 200)], axis=1)
    q = frames.euler_rpy_to_quat_wxyz(rpy[:, 0], rpy[:, 1], rpy[:, 2])
    np.testing.assert_allclose(frames.quat_wxyz_to_euler_rpy(q), rpy, atol=1e-9)


def test_sim_torch_rotations_agree_with_numpy():
    from sim.observation_layout import quat_xyzw_to_rotmat
    from sim.robots.crazyflie_firmware import quat_wxyz_to_rpy_deg
    from sim.sensors.tof import quat_wxyz_to_rotmat

    q = _unit(100)
    want = frames.quat_wxyz_to_rotmat(q)
    np.testing.assert_allclose(quat_wxyz_to_rotmat(torch.from_numpy(q)).numpy(), want, rtol=0, atol=1e-12)
    got = quat_xyzw_to_rotmat(torch.from_numpy(frames.quat_wxyz_to_xyzw(q))).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # fed in the wrong order, the rotation is another one
    assert not np.allclose(quat_xyzw_to_rotmat(torch.from_numpy(q)).numpy(), want, atol=1e-3)
    rpy = np.rad2deg(frames.quat_wxyz_to_euler_rpy(q))
    np.testing.assert_allclose(quat_wxyz_to_rpy_deg(torch.from_numpy(q)).numpy(), rpy, rtol=0, atol=1e-9)


def test_arm_quaternion_from_rotation_agrees():
    from robot_rl.deploy.arm_ik import quat_xyzw_from_rotmat as deploy_from_rotmat
    from sim.robots.diff_ik import quat_xyzw_from_rotmat as sim_from_rotmat

    q = _unit(100)
    q[:, 0] = np.abs(q[:, 0])  # w >= 0, the sign both return
    r = frames.quat_wxyz_to_rotmat(q)
    want = frames.quat_wxyz_to_xyzw(q)
    np.testing.assert_allclose(deploy_from_rotmat(r), want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sim_from_rotmat(torch.from_numpy(r)).numpy(), want, rtol=0, atol=1e-12)

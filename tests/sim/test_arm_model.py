"""Arm model sanity: the MJCF matches the published DH table, holds its pose, and the IK moves the TCP."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from sim.backends import load_model
from sim.robots.diff_ik import PANDA_Q_HIGH, PANDA_Q_HOME, PANDA_Q_LOW, DiffIK, forward_kinematics, tcp_jacobian
from sim.tasks.arm import MODEL_PATH


def dh_reference(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Independent numpy FK straight from the Franka modified DH table: flange and TCP (4x4)."""
    table = [(0, 0.333, 0), (0, 0, -np.pi / 2), (0, 0.316, np.pi / 2), (0.0825, 0, np.pi / 2),
             (-0.0825, 0.384, -np.pi / 2), (0, 0, np.pi / 2), (0.088, 0, np.pi / 2), (0, 0.107, 0)]  # fmt: skip
    t = np.eye(4)
    for (a, d, alpha), theta in zip(table, list(q) + [0.0], strict=True):
        ca, sa, ct, st = np.cos(alpha), np.sin(alpha), np.cos(theta), np.sin(theta)
        t = t @ np.array(
            [[ct, -st, 0, a], [st * ca, ct * ca, -sa, -sa * d], [st * sa, ct * sa, ca, ca * d], [0, 0, 0, 1]]
        )
    c, s = np.cos(-np.pi / 4), np.sin(-np.pi / 4)
    hand = np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0.1034], [0, 0, 0, 1]])
    return t, t @ hand


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return load_model(MODEL_PATH)


def test_mjcf_forward_kinematics_match_dh_table(model):
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    qs = rng.uniform(PANDA_Q_LOW, PANDA_Q_HIGH, size=(50, 7))
    kin = forward_kinematics(torch.tensor(qs))
    for i, q in enumerate(qs):
        data.qpos[:7] = q
        mujoco.mj_kinematics(model, data)
        flange, tcp = dh_reference(q)
        assert np.linalg.norm(data.site("flange").xpos - flange[:3, 3]) < 1e-3
        assert np.linalg.norm(data.site("tcp").xpos - tcp[:3, 3]) < 1e-3
        assert np.abs(data.site("tcp").xmat.reshape(3, 3) - tcp[:3, :3]).max() < 1e-6
        assert np.linalg.norm(kin.tcp[i, :3, 3].numpy() - tcp[:3, 3]) < 1e-9


def test_ready_pose_tcp_matches_published_value(model):
    # Franka's "ready" pose puts the flange at (0.307, 0, 0.590) in the base frame
    _, tcp = dh_reference(np.array(PANDA_Q_HOME))
    flange, _ = dh_reference(np.array(PANDA_Q_HOME))
    assert np.allclose(flange[:3, 3], [0.307, 0.0, 0.590], atol=1e-3)
    assert tcp[2, 3] < flange[2, 3]  # gripper points down


def test_jacobian_matches_mujoco(model):
    data = mujoco.MjData(model)
    q = np.random.default_rng(1).uniform(PANDA_Q_LOW, PANDA_Q_HIGH, size=(10, 7))
    jac = tcp_jacobian(forward_kinematics(torch.tensor(q))).numpy()
    for i in range(len(q)):
        data.qpos[:7] = q[i]
        mujoco.mj_forward(model, data)
        jp, jr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jp, jr, model.site("tcp").id)
        assert np.allclose(np.vstack([jp, jr])[:, :7], jac[i], atol=1e-9)


def test_arm_holds_pose_under_gravity(model):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("home").id)
    mujoco.mj_forward(model, data)
    start = data.site("tcp").xpos.copy()
    for _ in range(int(5.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert np.linalg.norm(data.site("tcp").xpos - start) < 1e-3
    assert np.abs(data.qvel[:7]).max() < 1e-3


def test_gripper_closes_and_opens_fully_in_free_air(model):
    """A shut command closes the fingers and holds them still. With a velocity gain on the force-limited finger
    servos the fingers instead chattered between 2.2 and 3.0 cm each (never closing), which left a 4.4-6 cm gap
    that let a pushed cube slip between them."""
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("home").id)
    fingers = [model.joint("finger_left").qposadr[0], model.joint("finger_right").qposadr[0]]
    actuators = [model.actuator("finger_left").id, model.actuator("finger_right").id]
    data.qpos[fingers] = 0.04
    data.ctrl[actuators] = 0.0
    widths = []
    for _ in range(int(0.3 / model.opt.timestep)):
        mujoco.mj_step(model, data)
        widths.append(data.qpos[fingers].sum())
    assert max(widths[int(0.1 / model.opt.timestep) :]) < 0.002  # shut within 0.1 s and stays shut
    assert np.abs(data.qvel[fingers]).max() < 1e-3
    data.ctrl[actuators] = 0.04
    for _ in range(int(0.2 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert data.qpos[fingers].sum() > 0.078 and np.abs(data.qvel[fingers]).max() < 1e-3


@pytest.mark.parametrize("joint", range(7))
def test_joint_servo_follows_a_step_within_a_few_control_steps(model, joint):
    # joint impedance at libfranka's default stiffness: a 0.02 rad target step is 90% done in < 0.1 s
    # (2.5 control steps at 25 Hz) with little overshoot; the old 800 / 250 N m/rad servos took ~0.2 s
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("home").id)
    mujoco.mj_forward(model, data)
    q0 = data.qpos[joint]
    data.ctrl[joint] = q0 + 0.02
    frac = []
    for _ in range(int(0.3 / model.opt.timestep)):
        mujoco.mj_step(model, data)
        frac.append((data.qpos[joint] - q0) / 0.02)
    frac = np.array(frac)
    assert frac[int(0.1 / model.opt.timestep) - 1] > 0.9
    assert frac.max() < 1.1 and abs(frac[-1] - 1.0) < 0.01


def test_diff_ik_step_moves_tcp_as_asked():
    q = torch.tensor(PANDA_Q_HOME, dtype=torch.float64).repeat(3, 1)
    kin = forward_kinematics(q)
    d_pos = torch.tensor([[0.01, 0.0, 0.0], [0.0, -0.01, 0.0], [0.0, 0.0, 0.01]], dtype=torch.float64)
    q_new = DiffIK().solve(q, kin, d_pos, torch.zeros(3, 3, dtype=torch.float64))
    moved = forward_kinematics(q_new).tcp[:, :3, 3] - kin.tcp[:, :3, 3]
    assert torch.allclose(moved, d_pos, atol=5e-4)
    rot = forward_kinematics(q_new).tcp[:, :3, :3]
    assert (rot - kin.tcp[:, :3, :3]).abs().max() < 5e-3  # orientation held


def test_diff_ik_reference_is_the_previous_target_within_a_bound():
    ik = DiffIK()
    q = torch.tensor(PANDA_Q_HOME, dtype=torch.float64).repeat(2, 1)
    target = q.clone()
    target[0, 0] += 0.03  # lagging servo: integrate on the target
    target[1, 1] += 0.5  # blocked or pushed arm: re-anchor to within max_target_lead of the joints
    ref = ik.reference(target, q)
    assert torch.allclose(ref[0], target[0])
    assert torch.allclose(ref[1, 1], q[1, 1] + ik.max_target_lead) and torch.allclose(ref[1, 2:], q[1, 2:])


def test_diff_ik_respects_joint_limits():
    ik = DiffIK()
    q = torch.tensor(PANDA_Q_HOME, dtype=torch.float64).repeat(4, 1)
    for _ in range(200):  # keep pushing down and back, into the base: joints must stay inside limits
        kin = forward_kinematics(q)
        q = ik.solve(q, kin, torch.tensor([[-0.05, 0.0, -0.05]], dtype=torch.float64).repeat(4, 1),
                     torch.zeros(4, 3, dtype=torch.float64))  # fmt: skip
    assert torch.all(q <= ik.q_high + 1e-12) and torch.all(q >= ik.q_low - 1e-12)
    assert torch.all(torch.isfinite(q))

"""The lean hover model (sim/tasks/crazyflie/lean_model.py) flies exactly as assets/crazyflie/crazyflie.xml.

Both models step in one mujoco.batch from the same states under the same motor commands for 3 s (1,500
substeps): a free-flight manoeuvre, resting on the floor, a take-off from it and a tilted drop onto it.
Tolerance: 1e-12 on position, orientation, velocity and motor state. The lean model only skips work (no
broadphase, no island discovery) and computes the one contact from a pair with the values MuJoCo mixes from
the two geoms, so the same floating-point operations run in the same order: today the trajectories are
bit-identical; 1e-12 leaves room for nothing but reordered rounding, where a changed contact or drag would
show as 1e-6 and more within a few steps.
"""

import mujoco
import mujoco.batch
import numpy as np
import pytest

from sim.tasks import make_task
from sim.tasks.crazyflie import MODEL_PATH, REST_Z
from sim.tasks.crazyflie.lean_model import lean_model_path

TOL = 1e-12
STEPS = 1500  # 3 s at 500 Hz
HOVER = 0.027 * 9.81 / 4  # N per motor


def _commands(kind: str) -> tuple[list[float], list[float], np.ndarray]:
    t = np.arange(STEPS)[:, None] * 0.002
    rng = np.random.default_rng(3)
    if kind == "flight":  # climb, roll/pitch/yaw doublets from differential thrust, noise
        wobble = 0.0005 * np.sin(2 * np.pi * t * [1.0, 1.3, 0.7, 2.1])
        u = 1.05 * HOVER + wobble + 2e-4 * rng.standard_normal((STEPS, 4))
        return [0.2, -0.1, 2.0, 1, 0, 0, 0], [0.5, -0.3, 0.2, 0.1, -0.1, 0.1], u
    if kind == "rest":  # idle motors below weight: it sits on the floor
        return [0.0, 0.0, REST_Z, 1, 0, 0, 0], [0.0] * 6, np.full((STEPS, 4), 0.3 * HOVER)
    if kind == "takeoff":  # 0.5 s idle on the floor, then 1.4x hover thrust
        u = np.where(t < 0.5, 0.0, 1.4 * HOVER) * np.ones(4)
        return [0.0, 0.0, REST_Z, 1, 0, 0, 0], [0.0] * 6, u
    if kind == "drop":  # tilted and sliding onto the floor with the motors off: impact, friction, tipping
        return [0.3, 0.0, 0.15, 0.95, 0.25, 0.1, 0.0], [0.6, 0.2, -0.5, 1.0, 0.0, 3.0], np.zeros((STEPS, 4))
    raise ValueError(kind)


def _trajectory(model: mujoco.MjModel, q0, v0, u: np.ndarray) -> tuple[np.ndarray, int]:
    """(STEPS, qpos+qvel+act) of one world, and the most contacts seen at a step."""
    b = mujoco.batch.Batch(model, 1, nthread=1)
    b.bind("qpos")[:] = q0
    b.bind("qvel")[:] = v0
    ctrl, ncon = b.bind("ctrl"), b.bind("ncon")
    out, most = [], 0
    for k in range(STEPS):
        ctrl[:] = u[k]
        b.step()
        most = max(most, int(ncon[0]))
        out.append(np.concatenate([b.qpos[0], b.qvel[0], b.act[0]]))
    return np.array(out), most


@pytest.mark.parametrize("kind", ["flight", "rest", "takeoff", "drop"])
def test_lean_model_flies_as_the_plain_model(kind):
    plain = mujoco.MjModel.from_xml_path(str(MODEL_PATH))
    lean = mujoco.MjModel.from_xml_path(str(lean_model_path(MODEL_PATH)))
    q0, v0, u = _commands(kind)
    ref, ref_con = _trajectory(plain, q0, v0, u)
    got, got_con = _trajectory(lean, q0, v0, u)
    assert got_con == ref_con
    if kind == "flight":
        assert ref_con == 0 and ref[:, 2].min() > 0.5  # airborne throughout, drag acting
    else:
        assert ref_con >= 1  # the floor contact was exercised
    if kind == "takeoff":
        assert ref[-1, 2] > 0.3  # it left the floor
    if kind == "rest":
        assert abs(ref[-1, 2] - REST_Z) < 2e-3
    err = np.abs(got - ref).max(axis=0)
    for name, cols in (("position", slice(0, 3)), ("orientation", slice(3, 7)), ("velocity", slice(7, 13))):
        assert err[cols].max() <= TOL, f"{kind}: {name} differs by {err[cols].max():.2e}"
    assert err[13:].max() <= TOL, f"{kind}: motor state differs by {err[13:].max():.2e}"


def test_lean_model_skips_broadphase_and_islands():
    lean = mujoco.MjModel.from_xml_path(str(lean_model_path(MODEL_PATH)))
    assert lean.npair == 1 and not lean.geom_contype.any() and not lean.geom_conaffinity.any()
    assert lean.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_ISLAND
    assert lean.ngeom == mujoco.MjModel.from_xml_path(str(MODEL_PATH)).ngeom  # visual geoms kept for rendering
    assert lean_model_path(lean_model_path(MODEL_PATH)) == lean_model_path(MODEL_PATH)  # not applied twice


@pytest.mark.parametrize("impl", ["native", "torch"])
def test_hover_task_steps_the_lean_model(impl):
    m = mujoco.MjModel.from_xml_path(str(make_task("crazyflie_hover", firmware_impl=impl).model_path))
    assert m.npair == 1 and m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_ISLAND

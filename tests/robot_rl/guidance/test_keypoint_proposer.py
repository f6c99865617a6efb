"""Keypoint proposer: camera conventions, keypoints on and attached to their bodies, marks, grid, failures."""

from __future__ import annotations

import json
import logging
import math

import cv2
import mujoco
import numpy as np
import pytest
import torch

from robot_rl.guidance.keypoint_proposer import Camera, camera_from_model, propose_keypoints
from sim.env import BatchedEnv, EnvConfig
from sim.tasks.arm import BOWLS, OBJ_QPOS0, OBJECTS, ArmPickPlace, body_name

W, H = 640, 480
ALL_BODIES = [body_name(*o) for o in OBJECTS + BOWLS]


@pytest.fixture
def env():
    e = BatchedEnv(ArmPickPlace(), EnvConfig(num_worlds=2, seed=0, randomization="none", nthread=1))
    yield e
    e.backend.close()


def place(env, world: int, obj: int, xyz, yaw: float = 0.0) -> None:
    """Teleport object `obj` (index in OBJECTS) of one world and recompute its kinematics."""
    q = env.backend.qpos[world, OBJ_QPOS0 + 7 * obj : OBJ_QPOS0 + 7 * obj + 7]
    q[:3] = torch.tensor(xyz, dtype=q.dtype)
    q[3:] = torch.tensor([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)], dtype=q.dtype)
    env.backend.qvel[world] = 0.0
    env.backend.forward(torch.tensor([world]))


def rot_z(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def body_box(model, body_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Body-frame AABB (lo, hi) of all geoms of a body, from each geom's local AABB and its pose."""
    corners = []
    for g in np.nonzero(model.geom_bodyid == body_id)[0]:
        c, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, model.geom_quat[g])
        corners.append((c + signs * half) @ mat.reshape(3, 3).T + model.geom_pos[g])
    pts = np.vstack(corners)
    return pts.min(axis=0), pts.max(axis=0)


def test_projection_and_backprojection_follow_the_rendered_images(env):
    b = env.backend
    m0 = b.model
    sid = m0.site("target").id
    # The reach-target site is a sphere: its image is a disc whose pixel centroid is the projection of
    # its centre (the perspective bias is ~(r/z)^2 of the off-axis offset, far below a pixel). Enlarge it
    # and put it off the image centre above the free front strip of the table, so the whole disc is seen.
    b.expand("site_pos")[0, sid] = torch.tensor([0.9, 0.2, 0.06], dtype=torch.float64)
    b.expand("site_size")[0, sid, 0] = 0.04
    b.expand("site_rgba")[0, sid] = torch.tensor([1.0, 0.2, 0.8, 1.0])  # tasks may hide it (alpha 0: not drawn)
    m, d = b.world_data(0)
    cam = camera_from_model(m, d, "front", W, H)
    cam_pos = d.cam_xpos[m.camera("front").id].copy()
    seg = b.render(0, "front", W, H, "segmentation")
    depth = b.render(0, "front", W, H, "depth")
    centre = d.site_xpos[sid].copy()
    # segmentation keeps only the object id, so the site (id 0) shares its label with the floor (geom 0);
    # the floor lies more than 1.5 m away, the sphere at ~0.9 m
    disc = (seg == sid) & (depth < 1.5)
    rows, cols = np.nonzero(disc)
    z = cam.to_camera(centre)[0, 2]
    expected_area = math.pi * (cam.K[1, 1] * 0.04 / z) ** 2
    assert abs(len(rows) / expected_area - 1) < 0.1, "the sphere should be fully visible"
    uv = cam.project(centre)[0]
    assert np.hypot(cols.mean() + 0.5 - uv[0], rows.mean() + 0.5 - uv[1]) < 1.0

    # the GL pose as is puts the scene behind the camera; flipping z alone mirrors it vertically
    gl = np.eye(4)
    gl[:3, :3], gl[:3, 3] = d.cam_xmat[m.camera("front").id].reshape(3, 3), cam_pos
    assert np.all(np.isnan(Camera(cam.K, gl, W, H).project(centre)))
    z_only = gl.copy()
    z_only[:3, :3] = gl[:3, :3] @ np.diag([1.0, 1.0, -1.0])
    assert np.linalg.norm(Camera(cam.K, z_only, W, H).project(centre)[0] - uv) > 20

    # back-projection: the sphere's pixel at its projected centre is on the sphere's near surface ...
    one = np.zeros((H, W), dtype=bool)
    one[int(uv[1]), int(uv[0])] = True
    (q,) = cam.backproject(depth, one)
    assert abs(np.linalg.norm(q - centre) - 0.04) < 0.002
    assert np.linalg.norm(q - cam_pos) < np.linalg.norm(centre - cam_pos)
    # ... and every table pixel lands on the table box (top z = 0 or its front face). Depth is exact to
    # ~1e-6 m here, so 0.1 mm also pins the pixel-centre convention: rays through (c, r) instead of
    # (c + 0.5, r + 0.5) leave the plane by ~1 mm, and reading depth as ray length by centimetres.
    table = m.geom("table").id
    pts = cam.backproject(depth, seg == table)
    half, pos = m.geom_size[table], m.geom_pos[table]
    off_surface = np.abs(np.max(np.abs(pts - pos) - half, axis=1))
    assert len(pts) > 50000 and np.mean(off_surface < 1e-4) > 0.995
    # the round trip lands on the pixel centres (a shift along the camera x axis stays in the table plane)
    rows, cols = np.nonzero(seg == table)
    np.testing.assert_allclose(cam.project(pts), np.column_stack([cols, rows]) + 0.5, atol=1e-6)


def test_keypoints_lie_on_their_objects(env):
    prop = propose_keypoints(env.backend, 0, ALL_BODIES, per_object=3, grid=None)
    m, d = env.backend.world_data(0)
    seen = {k.body for k in prop.keypoints}
    assert seen == set(ALL_BODIES), "all objects and bowls are visible from the front camera"
    for k in prop.keypoints:
        lo, hi = body_box(m, k.body_id)
        assert np.all(k.local >= lo - 0.01) and np.all(k.local <= hi + 0.01), (k.body, k.kind, k.local)
        R, x = d.xmat[k.body_id].reshape(3, 3), d.xpos[k.body_id]
        np.testing.assert_allclose(x + R @ k.local, k.world, atol=1e-9)
        np.testing.assert_allclose(prop.camera.project(k.world)[0], k.pixel, atol=1e-6)
    for colour, shape in OBJECTS:
        if shape == "cube":
            half = m.geom_size[m.geom(body_name(colour, shape)).id]
            np.testing.assert_allclose(half, 0.025)
            (c,) = [k for k in prop.keypoints if k.body == body_name(colour, shape) and k.kind == "centroid"]
            assert np.linalg.norm(c.world - d.xpos[c.body_id]) < 0.025


def test_keypoints_move_with_their_body(env):
    b = env.backend
    place(env, 0, 0, (0.42, 0.0, 0.025))  # red cube alone in the middle of the table, yaw 0
    before = propose_keypoints(b, 0, ["red_cube"], per_object=4, grid=None)
    assert len(before.keypoints) == 4
    fps = [k for k in before.keypoints if k.kind == "fps"]
    for k in fps:  # farthest points are on the cube's surface (voxel averaging moves them < 2 mm)
        assert abs(np.max(np.abs(k.local)) - 0.025) < 0.003

    # a small sideways slide barely changes the view: a fresh proposal's centroid is where the old one went
    place(env, 0, 0, (0.42, 0.04, 0.025))
    m, d = b.world_data(0)
    c = before.by_id(1)
    bid = c.body_id
    moved = d.xpos[bid] + d.xmat[bid].reshape(3, 3) @ c.local
    np.testing.assert_allclose(moved, c.world + [0.0, 0.04, 0.0], atol=1e-9)
    again = propose_keypoints(b, 0, ["red_cube"], per_object=1, grid=None)
    assert np.linalg.norm(again.by_id(1).world - moved) < 0.003

    # turn and shift: each body-fixed point follows the pose written in qpos (computed without xmat)
    yaw, pos = math.pi / 2, np.array([0.5, -0.05, 0.025])
    place(env, 0, 0, pos, yaw)
    m, d = b.world_data(0)
    for k in before.keypoints:
        expected = pos + rot_z(yaw) @ (k.world - np.array([0.42, 0.0, 0.025]))
        np.testing.assert_allclose(d.xpos[bid] + d.xmat[bid].reshape(3, 3) @ k.local, expected, atol=1e-9)


def test_marks_are_numbered_drawn_saved_and_deterministic(env, tmp_path):
    prop = propose_keypoints(env.backend, 0, ALL_BODIES, grid=None, seed=3)
    n = len(prop.keypoints)
    assert [k.id for k in prop.keypoints] == list(range(1, n + 1)) and n == 3 * len(ALL_BODIES)
    assert [k.kind for k in prop.keypoints][:3] == ["centroid", "fps", "fps"]
    changed = np.any(prop.image != prop.rgb, axis=2)
    rows, cols = np.mgrid[0:H, 0:W]
    near = np.zeros((H, W), dtype=bool)
    for k in prop.keypoints:
        r, c = int(k.pixel[1]), int(k.pixel[0])
        assert changed[r - 1 : r + 2, c - 1 : c + 2].all(), f"no dot at keypoint {k.id}"
        near |= (cols - k.pixel[0]) ** 2 + (rows - k.pixel[1]) ** 2 < 64**2
    assert changed.sum() > 100 * n and not changed[~near].any()

    path = prop.save(tmp_path / "sub" / "marks.png")
    back = cv2.imread(str(path))
    assert back.shape == (H, W, 3)
    np.testing.assert_array_equal(back[..., ::-1], prop.image)  # lossless, RGB written as BGR
    png = prop.png_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    np.testing.assert_array_equal(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR), back)

    again = propose_keypoints(env.backend, 0, ALL_BODIES, grid=None, seed=3)
    assert json.dumps(prop.marks()) == json.dumps(again.marks())
    assert prop.marks()[0] == {"id": 1, "body": "red_cube", "kind": "centroid", "pixel": prop.marks()[0]["pixel"]}
    assert prop.by_id(n).id == n
    with pytest.raises(KeyError, match="valid ids"):
        prop.by_id(n + 1)


def test_grid_cells_cover_the_workspace(env):
    ws = ((0.25, 0.85), (-0.45, 0.45))
    prop = propose_keypoints(env.backend, 0, [], grid=(5, 4), workspace=ws, table_z=0.0)
    assert len(prop.grid) == 20 and prop.keypoints == []
    np.testing.assert_allclose(prop.cell("A1").world_xy, [0.25 + 0.06, -0.45 + 0.1125])
    np.testing.assert_allclose(prop.grid[-1].world_xy, [0.85 - 0.06, 0.45 - 0.1125])
    assert prop.grid[-1].label == "E4" and prop.cell("e4") is prop.grid[-1]
    xyz = np.array([[*c.world_xy, 0.0] for c in prop.grid])
    np.testing.assert_allclose(prop.camera.project(xyz), np.array([c.pixel for c in prop.grid]), atol=1e-9)
    # rows run along +x (away from the front camera: up the image), columns along +y (right in the image)
    assert prop.cell("A1").pixel[1] < prop.cell("E1").pixel[1] and prop.cell("A1").pixel[0] < prop.cell("A4").pixel[0]
    # a grid line is drawn: the edge x = 0.25 at y = 0 changes the image
    u, v = prop.camera.project(np.array([0.25, 0.0, 0.0]))[0].astype(int)
    assert np.any(prop.image[v - 1 : v + 2, u - 1 : u + 2] != prop.rgb[v - 1 : v + 2, u - 1 : u + 2])
    with pytest.raises(KeyError, match="labels"):
        prop.cell("Z9")


def test_hidden_and_unknown_bodies(env, caplog):
    place(env, 0, 0, (0.4, 0.0, -0.3))  # red cube inside the table: not visible
    with caplog.at_level(logging.WARNING):
        prop = propose_keypoints(env.backend, 0, ["red_cube", "green_cube"], grid=None)
    assert {k.body for k in prop.keypoints} == {"green_cube"}
    assert [k.id for k in prop.keypoints] == [1, 2, 3]
    assert any("red_cube" in r.getMessage() and "not visible" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="known bodies") as err:
        propose_keypoints(env.backend, 0, ["purple_cube"])
    assert "purple_cube" in str(err.value) and "red_cube" in str(err.value)
    with pytest.raises(ValueError, match="cameras"):
        propose_keypoints(env.backend, 0, ["red_cube"], camera="ceiling")

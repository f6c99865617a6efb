"""Keypoint proposals for VLM prompts: numbered marks on object points, plus a labelled grid on the table.

From one world of a batched env: render RGB, depth and segmentation from a task camera, back-project
each requested body's pixels to a point cloud (open3d), take the visible-surface centroid plus
farthest-point samples as candidate keypoints, store each in its body's frame (so it moves with the
body), and draw numbered marks (OpenCV) on the image the model sees.

Pixel convention (project, backproject and the marks all use it): continuous image coordinates
(u, v) = (column, row) with the image's top-left corner at (0, 0). Array element [r, c] of an image
covers [c, c + 1) x [r, r + 1), so its centre is (c + 0.5, r + 0.5) and a projected point (u, v)
falls in element [floor(v), floor(u)]. The principal point (w / 2, h / 2) is the exact image centre,
as in MuJoCo's symmetric frustum.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import mujoco
import numpy as np
import open3d as o3d

log = logging.getLogger(__name__)

# point-cloud cleaning: a 3 mm voxel is about one pixel at 1 m for a 640 px wide, 55 degree view
VOXEL_M = 0.003
OUTLIER_NEIGHBOURS = 12
OUTLIER_STD_RATIO = 2.0
MAX_CLOUD_POINTS = 20000  # larger clouds are subsampled (seeded) before open3d, to keep it fast

# drawing
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_MARK_SCALE = 0.5
_DOT_RADIUS = 4
_GRID_SCALE = 0.35
_GL_TO_CV = np.diag([1.0, -1.0, -1.0])  # MuJoCo/GL camera: x right, y up, looks down -z


@dataclass
class Camera:
    """Pinhole camera in the OpenCV convention (x right, y down, z forward); see the module docstring for pixels."""

    K: np.ndarray
    world_from_cam: np.ndarray
    width: int
    height: int

    def to_camera(self, points_world: np.ndarray) -> np.ndarray:
        """(n, 3) world points -> (n, 3) camera-frame points."""
        p = np.asarray(points_world, dtype=np.float64).reshape(-1, 3)
        R, t = self.world_from_cam[:3, :3], self.world_from_cam[:3, 3]
        return (p - t) @ R  # row-wise R^T (p - t)

    def project(self, points_world: np.ndarray) -> np.ndarray:
        """(n, 3) world points -> (n, 2) continuous pixel (u, v); NaN for points at or behind the camera."""
        pc = self.to_camera(points_world)
        out = np.full((len(pc), 2), np.nan)
        front = pc[:, 2] > 1e-9
        uvw = pc[front] @ self.K.T
        out[front] = uvw[:, :2] / uvw[:, 2:3]
        return out

    def inside(self, uv: np.ndarray) -> np.ndarray:
        """Which (u, v) fall on an image pixel."""
        uv = np.asarray(uv, dtype=np.float64).reshape(-1, 2)
        with np.errstate(invalid="ignore"):
            return (uv[:, 0] >= 0) & (uv[:, 0] < self.width) & (uv[:, 1] >= 0) & (uv[:, 1] < self.height)

    def backproject(self, depth: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """World points (n, 3) of the pixel centres with finite positive depth (and in mask), row-major order.

        depth is MuJoCo's metric depth along the optical axis (z), as backend.render(kind="depth") gives.
        Without a mask the background (far plane) is included.
        """
        depth = np.asarray(depth)
        if depth.shape != (self.height, self.width):
            raise ValueError(f"depth is {depth.shape}, camera is {(self.height, self.width)}")
        valid = np.isfinite(depth) & (depth > 0)
        if mask is not None:
            valid &= np.asarray(mask, dtype=bool)
        rows, cols = np.nonzero(valid)
        z = depth[rows, cols].astype(np.float64)
        fx, fy, cx, cy = self.K[0, 0], self.K[1, 1], self.K[0, 2], self.K[1, 2]  # no skew
        x = (cols + 0.5 - cx) / fx * z
        y = (rows + 0.5 - cy) / fy * z
        pc = np.stack([x, y, z], axis=1)
        return pc @ self.world_from_cam[:3, :3].T + self.world_from_cam[:3, 3]


def _camera_id(model: mujoco.MjModel, camera: str | int) -> int:
    names = [model.camera(i).name for i in range(model.ncam)]
    if isinstance(camera, str):
        if camera not in names:
            raise ValueError(f"unknown camera '{camera}'; cameras: {names}")
        return names.index(camera)
    if not 0 <= int(camera) < model.ncam:
        raise ValueError(f"camera id {camera} out of range (0..{model.ncam - 1}: {names}); the free camera has no pose")
    return int(camera)


def camera_from_model(model: mujoco.MjModel, data: mujoco.MjData, camera: str | int, width: int, height: int) -> Camera:
    """Intrinsics and pose of a model camera (data must be forward-computed) for a width x height render."""
    cid = _camera_id(model, camera)
    if int(model.cam_projection[cid]) != 0 or np.any(model.cam_sensorsize[cid] > 0):
        # sensor-size / orthographic cameras use other frustum maths; none of our scenes has them
        raise ValueError(f"camera {camera!r}: only perspective cameras defined by fovy are supported")
    f = 0.5 * height / math.tan(math.radians(float(model.cam_fovy[cid])) / 2)  # fovy is vertical; square pixels
    K = np.array([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])
    T = np.eye(4)
    T[:3, :3] = data.cam_xmat[cid].reshape(3, 3) @ _GL_TO_CV  # flip y and z: GL -> OpenCV axes
    T[:3, 3] = data.cam_xpos[cid]
    return Camera(K=K, world_from_cam=T, width=int(width), height=int(height))


@dataclass
class Keypoint:
    id: int  # the number drawn on the image (1-based, unique across the image)
    body: str
    body_id: int
    local: np.ndarray  # (3,) in the body frame: world = xpos + xmat @ local
    world: np.ndarray  # (3,) at proposal time
    pixel: np.ndarray  # (2,) continuous (u, v) where the mark's dot is drawn
    kind: str  # "centroid" | "fps"


@dataclass
class GridCell:
    label: str  # row letter (along +x) + column number (along +y), e.g. "B3"
    world_xy: np.ndarray  # (2,) cell centre on the table plane
    pixel: np.ndarray  # (2,) projection of the cell centre (may lie outside the image)


@dataclass
class Proposal:
    keypoints: list[Keypoint]
    grid: list[GridCell]
    image: np.ndarray  # marked RGB (h, w, 3) uint8
    rgb: np.ndarray  # unmarked render
    camera: Camera
    camera_name: str
    _index: dict[int, Keypoint] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._index = {k.id: k for k in self.keypoints}

    def by_id(self, i: int) -> Keypoint:
        if i not in self._index:
            raise KeyError(f"no keypoint {i}; valid ids: {sorted(self._index)}")
        return self._index[i]

    def cell(self, label: str) -> GridCell:
        for c in self.grid:
            if c.label == label.strip().upper():
                return c
        raise KeyError(f"no grid cell '{label}'; labels: {[c.label for c in self.grid]}")

    def marks(self) -> list[dict]:
        """JSON-able summary of the marks; rounded so it is a stable part of a request key."""
        return [
            {
                "id": k.id,
                "body": k.body,
                "kind": k.kind,
                "pixel": [round(float(k.pixel[0]), 1), round(float(k.pixel[1]), 1)],
            }
            for k in self.keypoints
        ]

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not cv2.imwrite(str(path), cv2.cvtColor(self.image, cv2.COLOR_RGB2BGR)):
            raise OSError(f"could not write {path}")
        return path

    def png_bytes(self) -> bytes:
        ok, buf = cv2.imencode(".png", cv2.cvtColor(self.image, cv2.COLOR_RGB2BGR))
        if not ok:
            raise RuntimeError("PNG encoding failed")
        return buf.tobytes()


# -- point clouds ------------------------------------------------------------------------------------------
def _body_ids(model: mujoco.MjModel, bodies: Sequence[str]) -> list[int]:
    known = [model.body(i).name for i in range(model.nbody)]
    unknown = [b for b in bodies if b not in known]
    if unknown:
        raise ValueError(f"unknown bodies {unknown}; known bodies: {[k for k in known if k]}")
    if len(set(bodies)) != len(bodies):
        raise ValueError(f"bodies repeat: {list(bodies)}")
    return [known.index(b) for b in bodies]


def _pixel_bodies(model: mujoco.MjModel, seg: np.ndarray) -> np.ndarray:
    """Body id per pixel (-1 for background).

    backend.render keeps only the object-id channel of the segmentation, so pixels of visible sites
    read as geom ids below nsite (floor, table, arm base here); object geoms come later in the model,
    and a site in front of an object correctly hides those pixels from it.
    """
    out = np.full(seg.shape, -1, dtype=np.int64)
    valid = (seg >= 0) & (seg < model.ngeom)
    out[valid] = model.geom_bodyid[seg[valid]]
    return out


def _clean_cloud(points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Voxel-downsample and drop statistical outliers (open3d); returns points in a canonical (sorted) order."""
    if len(points) > MAX_CLOUD_POINTS:
        points = points[np.sort(rng.choice(len(points), MAX_CLOUD_POINTS, replace=False))]
    pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    pcd = pcd.voxel_down_sample(VOXEL_M)
    if len(pcd.points) > OUTLIER_NEIGHBOURS + 1:
        pcd, _ = pcd.remove_statistical_outlier(nb_neighbors=OUTLIER_NEIGHBOURS, std_ratio=OUTLIER_STD_RATIO)
    pts = np.asarray(pcd.points)
    # the voxel grid is a hash map: sort so farthest-point ties break the same way every run
    return pts[np.lexsort(pts.T[::-1])]


def farthest_points(points: np.ndarray, start: np.ndarray, k: int) -> np.ndarray:
    """k points of the cloud by farthest-point sampling (own numpy), seeded with `start` (not returned).

    Deterministic: ties go to the lowest index. Fewer than k points come back if the cloud runs out.
    """
    d = np.linalg.norm(points - start, axis=1)
    chosen = []
    for _ in range(min(k, len(points))):
        i = int(np.argmax(d))
        if d[i] <= 0:
            break
        chosen.append(i)
        d = np.minimum(d, np.linalg.norm(points - points[i], axis=1))
    return points[chosen].reshape(-1, 3)


# -- drawing -----------------------------------------------------------------------------------------------
def _sub(uv: np.ndarray, shift: int = 4) -> tuple[int, int]:
    """Continuous (u, v) -> OpenCV fixed-point point (pixel index units, `shift` fractional bits)."""
    u, v = np.clip(np.asarray(uv, dtype=np.float64) - 0.5, -1e4, 1e4) * (1 << shift)
    return int(round(u)), int(round(v))


def _grid_cells(
    cam: Camera, grid: tuple[int, int], workspace: tuple[tuple[float, float], tuple[float, float]], z: float
) -> list[GridCell]:
    rows, cols = grid
    if not (1 <= rows <= 26 and cols >= 1):
        raise ValueError(f"grid must be (rows 1..26, cols >= 1), got {grid}")
    (x0, x1), (y0, y1) = workspace
    xs = x0 + (np.arange(rows) + 0.5) * (x1 - x0) / rows
    ys = y0 + (np.arange(cols) + 0.5) * (y1 - y0) / cols
    centres = np.array([[x, y] for x in xs for y in ys])
    pix = cam.project(np.column_stack([centres, np.full(len(centres), z)]))
    labels = [f"{chr(ord('A') + i)}{j + 1}" for i in range(rows) for j in range(cols)]
    return [GridCell(label=lb, world_xy=c, pixel=p) for lb, c, p in zip(labels, centres, pix, strict=True)]


def _draw_grid(img: np.ndarray, cam: Camera, grid: tuple[int, int], workspace, z: float, cells: list[GridCell]) -> None:
    """Thin light lines blended into the image, small outlined labels at the cell centres (in place)."""
    rows, cols = grid
    (x0, x1), (y0, y1) = workspace
    overlay = img.copy()
    segments = []
    for x in np.linspace(x0, x1, rows + 1):
        segments.append(np.column_stack([np.full(17, x), np.linspace(y0, y1, 17), np.full(17, z)]))
    for y in np.linspace(y0, y1, cols + 1):
        segments.append(np.column_stack([np.linspace(x0, x1, 17), np.full(17, y), np.full(17, z)]))
    for pts in segments:  # sampled, so a line partly behind the camera still draws its visible part
        uv = cam.project(pts)
        for a, b in zip(uv[:-1], uv[1:], strict=True):
            if np.all(np.isfinite(a)) and np.all(np.isfinite(b)):
                cv2.line(overlay, _sub(a), _sub(b), (235, 235, 235), 1, cv2.LINE_AA, 4)
    cv2.addWeighted(overlay, 0.55, img, 0.45, 0.0, dst=img)
    for c in cells:  # labels unblended (small, outlined) so they read on light and dark table alike
        if not cam.inside(c.pixel)[0]:
            continue
        (tw, th), _ = cv2.getTextSize(c.label, _FONT, _GRID_SCALE, 1)
        org = (int(c.pixel[0] - tw / 2), int(c.pixel[1] + th / 2))
        cv2.putText(img, c.label, org, _FONT, _GRID_SCALE, (30, 30, 30), 2, cv2.LINE_AA)
        cv2.putText(img, c.label, org, _FONT, _GRID_SCALE, (245, 245, 245), 1, cv2.LINE_AA)


_DIRECTIONS = [(1, -1), (-1, -1), (1, 1), (-1, 1), (0, -1), (0, 1), (1, 0), (-1, 0)]


def _label_boxes(pixels: list[np.ndarray], sizes: list[tuple[int, int]], w: int, h: int) -> list[tuple[int, int]]:
    """Top-left corner of each number's box: next to its dot, inside the image, clear of other boxes and dots."""
    placed: list[tuple[int, int, int, int]] = []
    dots = np.array(pixels).reshape(-1, 2)
    out = []
    for p, (bw, bh) in zip(pixels, sizes, strict=True):
        best = None
        for dist in (15, 26, 40):
            for dx, dy in _DIRECTIONS:
                n = math.hypot(dx, dy)
                cx, cy = p[0] + dist * dx / n, p[1] + dist * dy / n
                x, y = int(round(cx - bw / 2)), int(round(cy - bh / 2))
                if best is None:
                    best = (min(max(x, 0), w - bw), min(max(y, 0), h - bh))  # fallback: the first, clamped
                if x < 0 or y < 0 or x + bw > w or y + bh > h:
                    continue
                if any(
                    x < bx + bw2 + 1 and bx < x + bw + 1 and y < by + bh2 + 1 and by < y + bh + 1
                    for bx, by, bw2, bh2 in placed
                ):
                    continue
                near_x = np.clip(dots[:, 0], x, x + bw) - dots[:, 0]
                near_y = np.clip(dots[:, 1], y, y + bh) - dots[:, 1]
                if np.any(np.hypot(near_x, near_y) < _DOT_RADIUS + 2):
                    continue
                best = (x, y)
                break
            else:
                continue
            break
        placed.append((*best, bw, bh))
        out.append(best)
    return out


def _draw_marks(img: np.ndarray, keypoints: list[Keypoint]) -> None:
    """Per keypoint: a white dot with a black ring at the point, and its number in a white box beside it."""
    h, w = img.shape[:2]
    texts = [str(k.id) for k in keypoints]
    metrics = [cv2.getTextSize(t, _FONT, _MARK_SCALE, 1) for t in texts]
    sizes = [(tw + 6, th + base + 4) for (tw, th), base in metrics]
    boxes = _label_boxes([k.pixel for k in keypoints], sizes, w, h)
    for k, (x, y), (bw, bh) in zip(keypoints, boxes, sizes, strict=True):  # leader lines under everything
        centre = (int(round((x + bw / 2 - 0.5) * 16)), int(round((y + bh / 2 - 0.5) * 16)))
        cv2.line(img, _sub(k.pixel), centre, (0, 0, 0), 3, cv2.LINE_AA, 4)
        cv2.line(img, _sub(k.pixel), centre, (255, 255, 255), 1, cv2.LINE_AA, 4)
    for k in keypoints:
        cv2.circle(img, _sub(k.pixel), _DOT_RADIUS << 4, (255, 255, 255), -1, cv2.LINE_AA, 4)
        cv2.circle(img, _sub(k.pixel), _DOT_RADIUS << 4, (0, 0, 0), 1, cv2.LINE_AA, 4)
    for t, ((_, th), _), (x, y), (bw, bh) in zip(texts, metrics, boxes, sizes, strict=True):
        cv2.rectangle(img, (x, y), (x + bw - 1, y + bh - 1), (255, 255, 255), -1)
        cv2.rectangle(img, (x, y), (x + bw - 1, y + bh - 1), (0, 0, 0), 1)
        cv2.putText(img, t, (x + 3, y + 2 + th), _FONT, _MARK_SCALE, (0, 0, 0), 1, cv2.LINE_AA)


# -- the proposer --------------------------------------------------------------------------------------------
def propose_keypoints(
    backend,
    world: int,
    bodies: Sequence[str],
    camera: str = "front",
    width: int = 640,
    height: int = 480,
    per_object: int = 3,
    grid: tuple[int, int] | None = (5, 5),
    table_z: float = 0.0,
    workspace: tuple[tuple[float, float], tuple[float, float]] = ((0.25, 0.85), (-0.45, 0.45)),
    seed: int = 0,
) -> Proposal:
    """Candidate keypoints on `bodies` as seen by `camera` in one world, with the marked prompt image.

    Per visible body: the centroid of its cleaned visible-surface cloud, then per_object - 1
    farthest-point samples (own numpy FPS seeded with the centroid). Numbered 1..N in the order of
    `bodies`, centroid first; keypoints projecting outside the image are dropped, bodies with no
    visible pixels get none (warning). `seed` only drives the subsampling of very large clouds.
    The grid has rows along +x (letters) and columns along +y (numbers) over `workspace` at z = table_z.
    """
    bodies = list(bodies)
    if per_object < 1:
        raise ValueError(f"per_object must be >= 1, got {per_object}")
    model, data = backend.world_data(world)
    body_ids = _body_ids(model, bodies)
    cam = camera_from_model(model, data, camera, width, height)
    rgb = backend.render(world, camera, width, height, "rgb")
    depth = backend.render(world, camera, width, height, "depth")
    owner = _pixel_bodies(model, backend.render(world, camera, width, height, "segmentation"))
    rng = np.random.default_rng(seed)

    keypoints: list[Keypoint] = []
    for name, bid in zip(bodies, body_ids, strict=True):
        mask = owner == bid
        pts = _clean_cloud(cam.backproject(depth, mask), rng) if mask.any() else np.zeros((0, 3))
        if len(pts) == 0:
            log.warning("body '%s' is not visible from camera '%s' in world %d: no keypoints", name, camera, world)
            continue
        centroid = pts.mean(axis=0)
        cands = np.vstack([centroid, farthest_points(pts, centroid, per_object - 1)])
        kinds = ["centroid"] + ["fps"] * (len(cands) - 1)
        uv = cam.project(cands)
        R, x = data.xmat[bid].reshape(3, 3), data.xpos[bid]
        for p, pix, kind, ok in zip(cands, uv, kinds, cam.inside(uv), strict=True):
            if ok:
                kp = Keypoint(len(keypoints) + 1, name, int(bid), R.T @ (p - x), p.copy(), pix.copy(), kind)
                keypoints.append(kp)

    image = rgb.copy()
    cells = _grid_cells(cam, grid, workspace, table_z) if grid else []
    if grid:
        _draw_grid(image, cam, grid, workspace, table_z, cells)
    _draw_marks(image, keypoints)
    name = camera if isinstance(camera, str) else model.camera(int(camera)).name
    return Proposal(keypoints, cells, image, rgb, cam, name)

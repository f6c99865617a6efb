"""Rough terrain: a heightfield of tiles (rows of x: difficulty levels, columns of y: terrain types), the
MJCF scene around it and legged_gym's terrain-level curriculum."""

import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from sim.tasks.quadruped.constants import ROBOT_PATH

TERRAIN_TYPES = ("rough", "slope_up", "slope_down", "stairs_up", "stairs_down", "obstacles")
TERRAIN_SPACING = 0.1  # m between heightfield samples (legged_gym's horizontal scale)
TERRAIN_BORDER = 5.0  # m of flat ground around the tiles
PLATFORM = 1.0  # m, half width of the flat spawn platform at each tile's centre


def _tile(kind: str, difficulty: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, n) heights (m) of one tile, edge level 0; difficulty in [0, 1]. Sizes are for a Go1-sized robot:
    legged_gym's slopes (up to 0.4), steps up to 0.15 m (its 0.23 m are ANYmal-sized), blocks up to 0.13 m."""
    s = TERRAIN_SPACING
    c = (np.arange(n) + 0.5 - n / 2) * s
    r = np.maximum(np.abs(c)[:, None], np.abs(c)[None, :])  # square rings around the centre
    half = n * s / 2
    inward = half - np.maximum(r, PLATFORM)  # distance from the edge, flat on the platform
    if kind == "rough":
        a = 0.01 + 0.07 * difficulty
        coarse = rng.uniform(-a, a, size=(n // 2 + 1, n // 2 + 1)).round(3)  # 0.2 m cells
        return np.repeat(np.repeat(coarse, 2, axis=0), 2, axis=1)[:n, :n]
    if kind in ("slope_up", "slope_down"):
        h = 0.4 * difficulty * inward + rng.uniform(-0.01, 0.01, size=(n, n))
        return h if kind == "slope_up" else -h
    if kind in ("stairs_up", "stairs_down"):
        step = 0.02 + 0.13 * difficulty
        h = step * np.floor(inward / 0.3)
        return h if kind == "stairs_up" else -h
    if kind == "obstacles":
        h = np.zeros((n, n))
        height = 0.03 + 0.10 * difficulty
        for _ in range(20):
            w, d = rng.integers(4, 11, size=2)  # 0.4-1.0 m blocks
            i, j = rng.integers(0, n - w), rng.integers(0, n - d)
            h[i : i + w, j : j + d] = height * rng.choice([-1.0, 1.0])
        h[r < PLATFORM] = 0.0
        return h
    raise ValueError(f"unknown terrain type '{kind}' ({', '.join(TERRAIN_TYPES)})")


def make_terrain(levels: int, tile_m: float, seed: int) -> np.ndarray:
    """Heights (m), (rows along y, cols along x), of the whole grid: tile (level, type) spans
    x in border + level * tile_m (+ tile_m) and y in border + type * tile_m; the lowest point is 0."""
    rng = np.random.default_rng(seed)
    n = int(round(tile_m / TERRAIN_SPACING))
    b = int(round(TERRAIN_BORDER / TERRAIN_SPACING))
    h = np.zeros((len(TERRAIN_TYPES) * n + 2 * b + 1, levels * n + 2 * b + 1))
    for level in range(levels):
        difficulty = level / max(1, levels - 1)
        for t, kind in enumerate(TERRAIN_TYPES):
            h[b + t * n : b + (t + 1) * n, b + level * n : b + (level + 1) * n] = _tile(kind, difficulty, n, rng)
    return h - h.min()


def write_rough_scene(heights: np.ndarray, tag: str) -> Path:
    """The rough scene: the robot, a heightfield of these heights and a catch plane at the lowest level.

    MuJoCo reads heightfields from a binary file (int32 nrow, int32 ncol, float32 rows from y = -size_y)
    and normalizes them to [0, 1] times size_z, so heights go in divided by their maximum.
    """
    out = Path(tempfile.gettempdir()) / "robot_rl_scenes"
    out.mkdir(parents=True, exist_ok=True)
    nrow, ncol = heights.shape
    top = max(float(heights.max()), 1e-3)
    bin_path = out / f"quadruped_terrain_{tag}.bin"
    tmp = bin_path.with_suffix(f".{os.getpid()}.tmp")  # runs in parallel may write the same terrain
    with open(tmp, "wb") as f:
        np.array([nrow, ncol], dtype=np.int32).tofile(f)
        (heights / top).astype(np.float32).tofile(f)
    os.replace(tmp, bin_path)
    sx, sy = (ncol - 1) * TERRAIN_SPACING / 2, (nrow - 1) * TERRAIN_SPACING / 2
    xml = f"""<mujoco model="go1_like_rough">
  <include file="{ROBOT_PATH}"/>
  <visual>
    <global offwidth="640" offheight="480"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.5 0.5 0.5"/>
    <quality shadowsize="2048"/>
  </visual>
  <asset>
    <texture name="sky" type="skybox" builtin="gradient" rgb1="0.55 0.65 0.78" rgb2="0.12 0.14 0.18" width="512"
             height="3072"/>
    <texture name="grid" type="2d" builtin="checker" rgb1="0.25 0.28 0.32" rgb2="0.2 0.22 0.26" width="256"
             height="256"/>
    <material name="floor" texture="grid" texrepeat="1 1" texuniform="true" reflectance="0.05"/>
    <material name="terrain" rgba="0.45 0.42 0.38 1"/>
    <hfield name="terrain" file="{bin_path}" size="{sx} {sy} {top} 0.1"/>
  </asset>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1" diffuse="0.8 0.8 0.8" castshadow="true" mode="trackcom" target="trunk"/>
    <geom name="floor" type="plane" size="0 0 0.05" material="floor" condim="3" friction="1.0 0.005 0.0001"/>
    <geom name="terrain" type="hfield" hfield="terrain" pos="{sx} {sy} 0" material="terrain" condim="3"
          friction="1.0 0.005 0.0001"/>
  </worldbody>
</mujoco>
"""
    path = out / f"quadruped_rough_{tag}.xml"
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(xml)
    os.replace(tmp, path)
    return path


def ground_height(height_map: torch.Tensor, xy: torch.Tensor, radius: float = 0.4) -> torch.Tensor:
    """(k,) ground under the feet of robots whose trunks are at xy (k, 2): the highest sample within radius."""
    r = int(round(radius / TERRAIN_SPACING))
    col = (xy[:, 0] / TERRAIN_SPACING).round().long()
    row = (xy[:, 1] / TERRAIN_SPACING).round().long()
    off = torch.arange(-r, r + 1, device=xy.device)
    rows = (row[:, None, None] + off[None, :, None]).clamp(0, height_map.shape[0] - 1)
    cols = (col[:, None, None] + off[None, None, :]).clamp(0, height_map.shape[1] - 1)
    return height_map[rows, cols].flatten(1).amax(dim=1)


def next_levels(
    level: torch.Tensor,
    walked: torch.Tensor,
    commanded: torch.Tensor,
    tile_m: float,
    levels: int,
    rng: torch.Generator,
) -> torch.Tensor:
    """legged_gym's terrain curriculum: up a level after walking past the tile's half length, down after
    covering less than half the commanded distance; past the top level, a random level."""
    up = walked > tile_m / 2
    down = (walked < 0.5 * commanded) & ~up
    level = level + up.long() - down.long()
    wrap = level >= levels
    level[wrap] = torch.randint(0, levels, (int(wrap.sum()),), generator=rng, device=level.device)
    return level.clamp(min=0)

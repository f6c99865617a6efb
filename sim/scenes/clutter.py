"""Cluttered room for a Crazyflie team: one MJCF model, a different obstacle layout in every world.

Why mocap obstacles: mujoco.batch shares one MjModel across worlds, and moving static geoms through
per-world model fields would break the world body's precomputed bounding-volume tree. Each obstacle
is instead a mocap body (one geom) whose pose is per-world *state* (mocap_pos, mocap_quat), so a
reset can draw a new layout in any world. Unused obstacle slots are parked below the floor.

Layout (2-D clutter, obstacles span floor to ceiling, as in LEARN / quad-swarm-rl):
- the room is `room` metres (x, y) with 4 static walls; drones start in a strip at one y end and
  fly to a strip at the other; clutter fills the band between them;
- a square grid of cell size c (drawn per world in [cell_min, cell_max]) covers the band; an
  occupied cell holds a column (cylinder of diameter d) or is part of a straight wall (a run of
  occupied cells joined by boxes of thickness <= d from the first to the last cell centre);
- any two obstacles in different cells are therefore >= c - d apart surface to surface, so
  cell_min = d + 0.2 gives gaps down to 0.2 m.
Collision bits: obstacles (contype 2, conaffinity 0) never collide with each other or the floor;
drones (contype 1, conaffinity 3) collide with obstacles, the floor and each other.
Obstacles are massless: the model's air density and viscosity (the drones' fluid drag) would otherwise
make MuJoCo compute fluid forces for all 96 static obstacle bodies every substep, which halves the
team's stepping rate (drone trajectories are bit-identical either way).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import torch

CRAZYFLIE_XML = Path(__file__).resolve().parents[2] / "assets" / "crazyflie" / "crazyflie.xml"
PARK_Z = -10.0  # unused obstacle slots live here, far below the floor and out of every ray's way


@dataclass
class ClutterConfig:
    num_drones: int = 6
    room: tuple[float, float] = (8.0, 8.0)
    height: float = 3.0
    start_margin: float = 1.2  # depth (m) of the start and goal strips at the two y ends
    column_diameter: float = 0.3  # LEARN's obstacle size
    wall_thickness: float = 0.1
    cell_min: float = 0.5  # = column_diameter + 0.2: the narrowest gap is 0.2 m surface to surface
    cell_max: float = 0.8
    density: float = 0.2  # fraction of grid cells occupied
    wall_fraction: float = 0.3  # fraction of occupied cells that belong to walls
    wall_max_cells: int = 4  # longest wall, in cells
    max_columns: int = 64  # obstacle slots in the model (more are never placed)
    max_wall_segments: int = 32
    fly_height: float = 1.0


def drone_names(n: int) -> list[str]:
    return [f"cf{i}" for i in range(n)]


def _drone_xml(template: ET.Element, name: str, pos: tuple[float, float, float]) -> ET.Element:
    """A copy of the single-drone body with every name suffixed, so N copies live in one model."""
    body = ET.fromstring(ET.tostring(template))
    body.set("name", name)
    body.set("pos", " ".join(f"{v:g}" for v in pos))
    for cam in body.findall("camera"):  # chase cameras of N drones would only clutter the model
        body.remove(cam)
    for el in body.iter():
        if el is not body and el.get("name"):
            el.set("name", f"{name}_{el.get('name')}")
    for g in body.iter("geom"):
        if g.get("contype") != "0":  # the collision box
            g.set("contype", "1")
            g.set("conaffinity", "3")
    return body


def build_mjcf(cfg: ClutterConfig) -> str:
    """The team-in-a-room MJCF: drones copied from assets/crazyflie/crazyflie.xml, obstacle slots as mocap bodies."""
    src = ET.parse(CRAZYFLIE_XML).getroot()
    root = ET.Element("mujoco", model=f"crazyflie_swarm_{cfg.num_drones}")
    for tag in ("compiler", "option", "visual", "asset"):
        el = src.find(tag)
        if el is not None:
            root.append(el)
    ET.SubElement(root.find("asset"), "material", name="obstacle", rgba="0.6 0.45 0.3 1")
    world = ET.SubElement(root, "worldbody")
    lx, ly, h = cfg.room[0] / 2, cfg.room[1] / 2, cfg.height
    ET.SubElement(world, "light", pos=f"0 0 {h + 1}", dir="0 0 -1", directional="true")
    ET.SubElement(world, "geom", name="floor", type="plane", size=f"{lx + 1} {ly + 1} 0.05", material="grid")
    for name, pos, size in (
        ("wall_n", f"0 {ly + 0.05} {h / 2}", f"{lx + 0.1} 0.05 {h / 2}"),
        ("wall_s", f"0 {-ly - 0.05} {h / 2}", f"{lx + 0.1} 0.05 {h / 2}"),
        ("wall_e", f"{lx + 0.05} 0 {h / 2}", f"0.05 {ly + 0.1} {h / 2}"),
        ("wall_w", f"{-lx - 0.05} 0 {h / 2}", f"0.05 {ly + 0.1} {h / 2}"),
    ):
        ET.SubElement(world, "geom", name=name, type="box", pos=pos, size=size, rgba="0.8 0.8 0.8 0.2")
    ET.SubElement(world, "camera", name="overview", pos=f"0 {-ly - 2} {h + 4}", xyaxes="1 0 0 0 0.8 0.6")
    # parked mocap bodies that each scene moves into place; collision bits as the module docstring says
    obstacle = {"contype": "2", "conaffinity": "0", "mass": "0", "material": "obstacle"}
    for i in range(cfg.max_columns):
        b = ET.SubElement(world, "body", name=f"column{i}", mocap="true", pos=f"0 0 {PARK_Z}")
        ET.SubElement(b, "geom", type="cylinder", size=f"{cfg.column_diameter / 2} {h / 2}", **obstacle)
    for i in range(cfg.max_wall_segments):
        b = ET.SubElement(world, "body", name=f"wallseg{i}", mocap="true", pos=f"0 0 {PARK_Z}")
        # half length cell_min / 2; sample_layouts tiles longer walls with overlapping segments
        ET.SubElement(b, "geom", type="box", size=f"{cfg.cell_min / 2} {cfg.wall_thickness / 2} {h / 2}", **obstacle)
    template = src.find("worldbody/body")
    actuators = ET.SubElement(root, "actuator")
    for k, name in enumerate(drone_names(cfg.num_drones)):
        world.append(_drone_xml(template, name, (0.3 * k, 0.0, cfg.fly_height)))
        for act in src.find("actuator"):
            a = ET.fromstring(ET.tostring(act))
            a.set("name", f"{name}_{act.get('name')}")
            a.set("site", f"{name}_{act.get('site')}")
            actuators.append(a)
    return ET.tostring(root, encoding="unicode")


def build_model(cfg: ClutterConfig) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(build_mjcf(cfg))


@dataclass
class Layout:
    """Obstacle geometry of a batch of worlds, also used by metrics and classical planners.

    columns: (W, C, 3) x, y, valid;  walls: (W, S, 5) x, y, yaw, half_length, valid (valid 0/1).
    """

    columns: torch.Tensor
    walls: torch.Tensor


def sample_layouts(
    cfg: ClutterConfig, num: int, rng: np.random.Generator, device: torch.device | str = "cpu"
) -> Layout:
    """Draw `num` clutter layouts on the grid (numpy: a reset-time loop over cells, never per step), as tensors
    on `device`."""
    cols = np.zeros((num, cfg.max_columns, 3))
    walls = np.zeros((num, cfg.max_wall_segments, 5))
    lx, ly = cfg.room[0] / 2, cfg.room[1] / 2
    band = ly - cfg.start_margin  # clutter in |y| < band
    for w in range(num):
        c = rng.uniform(cfg.cell_min, cfg.cell_max)
        nx, ny = int((2 * lx - c) // c), int((2 * band) // c)
        x0, y0 = -(nx - 1) * c / 2, -(ny - 1) * c / 2
        occ = np.zeros((nx, ny), dtype=bool)
        target = int(round(cfg.density * nx * ny))
        n_wall_cells = int(round(cfg.wall_fraction * target))
        nseg = 0
        tries = 0
        while n_wall_cells > 0 and tries < 50:  # straight walls of 2..wall_max_cells cells
            tries += 1
            length = int(rng.integers(2, cfg.wall_max_cells + 1))
            horiz = bool(rng.integers(2))
            i, j = int(rng.integers(nx)), int(rng.integers(ny))
            cells = [(i + k, j) if horiz else (i, j + k) for k in range(length)]
            # the wall runs from the first to the last cell centre, tiled by fixed-length segments
            span = (length - 1) * c
            m = math.ceil(span / cfg.cell_min - 1e-9)
            if any(a >= nx or b >= ny or occ[a, b] for a, b in cells) or nseg + m > cfg.max_wall_segments:
                continue
            for a, b in cells:
                occ[a, b] = True
            (a0, b0), (a1, b1) = cells[0], cells[-1]
            p0 = np.array([x0 + a0 * c, y0 + b0 * c])
            axis = np.array([x0 + a1 * c, y0 + b1 * c]) - p0
            axis /= np.linalg.norm(axis)
            step = (span - cfg.cell_min) / (m - 1) if m > 1 else 0.0
            for k in range(m):
                centre = p0 + axis * (cfg.cell_min / 2 + k * step)
                walls[w, nseg] = [centre[0], centre[1], 0.0 if horiz else math.pi / 2, cfg.cell_min / 2, 1]
                nseg += 1
            n_wall_cells -= length
        free = np.flatnonzero(~occ.ravel())
        n_cols = min(cfg.max_columns, max(0, target - int(occ.sum())), free.size)
        for k, idx in enumerate(rng.choice(free, size=n_cols, replace=False)):
            a, b = divmod(int(idx), ny)
            cols[w, k] = [x0 + a * c, y0 + b * c, 1]
    return Layout(torch.from_numpy(cols).to(device), torch.from_numpy(walls).to(device))


def gap_wall(
    cfg: ClutterConfig, gap_x: np.ndarray, gap: float = 0.2, y: float = 0.0, device: torch.device | str = "cpu"
) -> Layout:
    """A wall across the whole room at `y` with one opening per entry of gap_x (num worlds, G): `gap` metres
    wide surface to surface, centred at that x (the gap scenario: each drone's straight path through its own gap),
    as tensors on `device`.

    The wall is tiled by the model's fixed-length segments (cfg.cell_min): a piece between two gaps must be
    at least that long; the end pieces may run on into the room's side walls.
    """
    gap_x = np.atleast_2d(np.asarray(gap_x, dtype=float))
    num = gap_x.shape[0]
    seg, lx = cfg.cell_min, cfg.room[0] / 2
    walls = np.zeros((num, cfg.max_wall_segments, 5))
    for w in range(num):
        xs = np.sort(gap_x[w])
        edges = [-lx, *[e for x in xs for e in (x - gap / 2, x + gap / 2)], lx]
        centres = []
        for i, (a, b) in enumerate(zip(edges[0::2], edges[1::2], strict=True)):
            length = b - a
            if length >= seg - 1e-9:
                centres += list(np.linspace(a + seg / 2, b - seg / 2, math.ceil(length / seg - 1e-9)))
            elif i == 0:  # runs on into the west side wall
                centres.append(b - seg / 2)
            elif i == len(xs):  # ... into the east one
                centres.append(a + seg / 2)
            else:
                raise ValueError(f"gaps at {xs} leave a {length:.3f} m piece of wall, shorter than a {seg} m segment")
        if len(centres) > cfg.max_wall_segments:
            raise ValueError(f"the gap wall needs {len(centres)} segments, the model has {cfg.max_wall_segments}")
        for k, cx in enumerate(centres):
            walls[w, k] = [cx, y, 0.0, seg / 2, 1]
    return Layout(
        torch.zeros(num, cfg.max_columns, 3, dtype=torch.float64, device=device), torch.from_numpy(walls).to(device)
    )


def write_layout(
    layout: Layout,
    ids: torch.Tensor,
    mocap_pos: torch.Tensor,
    mocap_quat: torch.Tensor,
    cfg: ClutterConfig,
    body_to_mocap: torch.Tensor,
) -> None:
    """Place obstacle mocap bodies of worlds `ids` (valid slots at mid-height, the rest parked)."""
    nc = cfg.max_columns
    col_m = body_to_mocap[:nc]
    wall_m = body_to_mocap[nc:]
    z = cfg.height / 2
    cv = layout.columns[:, :, 2] > 0
    mocap_pos[ids.unsqueeze(1), col_m] = torch.stack(
        [layout.columns[:, :, 0], layout.columns[:, :, 1], torch.where(cv, z, PARK_Z)], dim=-1
    )
    wv = layout.walls[:, :, 4] > 0
    mocap_pos[ids.unsqueeze(1), wall_m] = torch.stack(
        [layout.walls[:, :, 0], layout.walls[:, :, 1], torch.where(wv, z, PARK_Z)], dim=-1
    )
    yaw = layout.walls[:, :, 2]
    mocap_quat[ids.unsqueeze(1), wall_m] = torch.stack(
        [torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)], dim=-1
    )
    mocap_quat[ids.unsqueeze(1), col_m] = torch.tensor([1.0, 0, 0, 0], dtype=mocap_quat.dtype, device=mocap_quat.device)


def obstacle_distance(layout: Layout, p: torch.Tensor, wall_thickness: float, column_radius: float):
    """Horizontal surface distance and outward unit normal from points p (W, N, 2) to the nearest obstacles.

    Returns dist (W, N, K) and normal (W, N, K, 2) for all K = C + S obstacle slots (invalid slots: +inf).
    Walls are thin rectangles; segments of a wall overlap at cell centres, which is harmless for distances.
    """
    c = layout.columns.to(p.dtype)
    d_col = p.unsqueeze(2) - c[:, None, :, 0:2]  # (W, N, C, 2)
    r = d_col.norm(dim=-1).clamp(min=1e-9)
    dist_c = torch.where(c[:, None, :, 2] > 0, r - column_radius, torch.inf)
    n_c = d_col / r.unsqueeze(-1)
    w = layout.walls.to(p.dtype)
    rel = p.unsqueeze(2) - w[:, None, :, 0:2]
    cy, sy = torch.cos(w[:, None, :, 2]), torch.sin(w[:, None, :, 2])
    u = rel[..., 0] * cy + rel[..., 1] * sy  # along the wall
    v = -rel[..., 0] * sy + rel[..., 1] * cy  # across
    du = (u.abs() - w[:, None, :, 3]).clamp(min=0) * u.sign()
    dv = (v.abs() - wall_thickness / 2).clamp(min=0) * v.sign()
    dl = torch.stack([du, dv], -1)
    rw = dl.norm(dim=-1)
    inside = rw < 1e-9
    dist_w = torch.where(w[:, None, :, 4] > 0, torch.where(inside, -1e-3, rw), torch.inf)
    nl = dl / rw.clamp(min=1e-9).unsqueeze(-1)
    nl = torch.where(inside.unsqueeze(-1), torch.stack([torch.zeros_like(v), v.sign() + (v == 0)], -1), nl)
    n_w = torch.stack([nl[..., 0] * cy - nl[..., 1] * sy, nl[..., 0] * sy + nl[..., 1] * cy], -1)
    return torch.cat([dist_c, dist_w], dim=2), torch.cat([n_c, n_w], dim=2)

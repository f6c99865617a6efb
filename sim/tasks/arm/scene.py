"""The arm's scene: the model, its state layout, the things on the table and where they are placed.

Objects are free bodies (7 qpos / 6 qvel each, after the arm's 7 joints and 2 fingers); bowls, pads and
the reach marker are static and moved per world through body_pos / site_pos. A layout is the objects'
places and yaws plus the two destinations' places, either drawn fresh per episode or from a fixed pool.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

MODEL_PATH = Path(__file__).resolve().parents[3] / "assets" / "arm" / "scene.xml"
ARM_DOF = 7
CAMERAS = ("front", "top", "wrist", "overview")
FINGER_QPOS = slice(7, 9)
OBJ_QPOS0 = 9  # free joints of the objects follow the arm and fingers, 7 qpos / 6 qvel each
OBJ_QVEL0 = 9
FINGER_OPEN = 0.04  # m per finger (Franka Hand stroke 0.08 m)
TABLE_Z = 0.0

# (colour, shape) -> body name; the order is the object index used in tensors
OBJECTS = [("red", "cube"), ("green", "cube"), ("blue", "cube"), ("yellow", "cylinder")]
OBJECT_HALF_HEIGHT = 0.025
BOWLS = [("blue", "bowl"), ("green", "bowl")]
PADS = [("white", "pad"), ("orange", "pad")]
MARKERS = {"pink": (1.0, 0.3, 0.75, 0.7), "purple": (0.6, 0.2, 0.9, 0.7), "cyan": (0.1, 0.85, 0.9, 0.7)}


def body_name(colour: str, shape: str) -> str:
    return f"{colour}_{shape}"


def random_layout(k: int, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Object xy (k, 4, 2) in the two near rows, destination xy (k, 2, 2) in the far row, object yaw (k, 4).

    Slots are 14-20 cm apart with +-2 cm jitter, so a 9.7 cm bowl never overlaps a cube and
    no rejection sampling is needed.
    """
    dev = rng.device  # the draws' device is the generator's
    jitter = lambda *shape: -0.02 + 0.04 * torch.rand(*shape, generator=rng, dtype=torch.float64, device=dev)  # noqa: E731
    ys = torch.tensor([-0.3, -0.1, 0.1, 0.3], dtype=torch.float64, device=dev)
    rows = torch.tensor([0.36, 0.50], dtype=torch.float64, device=dev)
    near = torch.stack(torch.meshgrid(rows, ys, indexing="ij"), -1)
    near = near.reshape(8, 2)
    pick = torch.argsort(torch.rand(k, 8, generator=rng, device=dev), dim=1)[:, : len(OBJECTS)]
    obj_xy = near[pick] + jitter(k, len(OBJECTS), 2)
    far = torch.argsort(torch.rand(k, 4, generator=rng, device=dev), dim=1)[:, :2]
    dest_xy = torch.stack([torch.full((k, 2), 0.68, dtype=torch.float64, device=dev), ys[far]], -1) + jitter(k, 2, 2)
    yaw = (math.pi / 4) * (2 * torch.rand(k, len(OBJECTS), generator=rng, dtype=torch.float64, device=dev) - 1)
    return obj_xy, dest_xy, yaw


def make_pool(
    count: int, seed: int, destinations: int, templates: int, device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """`count` layouts drawn from their own seed, so every run (and every guidance cache) sees the same ones:
    the places, which object and destination the instruction names, its template and the reach marker's
    place in its box (goal_u, uniform in [0, 1)^3). Drawn on the CPU whatever the device (the same layouts on
    every device), then moved to `device`."""
    cpu = torch.device("cpu")
    rng = torch.Generator(device=cpu).manual_seed(seed)
    pool = {
        **dict(zip(("obj_xy", "dest_xy", "yaw"), random_layout(count, rng), strict=True)),
        "obj_idx": torch.randint(0, len(OBJECTS), (count,), generator=rng, device=cpu),
        "goal_idx": torch.randint(0, destinations, (count,), generator=rng, device=cpu),
        "template": torch.randint(0, templates, (count,), generator=rng, device=cpu),
        "goal_u": torch.rand(count, 3, generator=rng, dtype=torch.float64, device=cpu),
    }
    return {k: v.to(device) for k, v in pool.items()}


def object_quaternion(yaw: torch.Tensor) -> torch.Tensor:
    """(k, 4) wxyz of objects standing upright, turned by yaw (k,) about z."""
    return torch.stack([torch.cos(yaw / 2), 0 * yaw, 0 * yaw, torch.sin(yaw / 2)], 1)

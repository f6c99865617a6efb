"""Torch twin of robot_rl.deploy.observation: the same layout, computed batched during training.

The layout (a list of term dicts) is the contract written into policy.yaml; tests check that
this builder and the deploy runtime's numpy builder agree on recorded states.
"""

from __future__ import annotations

import torch


def quat_xyzw_to_rotmat_flat(q: torch.Tensor) -> torch.Tensor:
    q = q / q.norm(dim=-1, keepdim=True)
    x, y, z, w = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    )  # fmt: skip


def to_body(v: torch.Tensor, q_xyzw: torch.Tensor) -> torch.Tensor:
    """World-frame vector expressed in the body frame (R^T v)."""
    r = quat_xyzw_to_rotmat_flat(q_xyzw).reshape(q_xyzw.shape[:-1] + (3, 3))
    return torch.einsum("...ji,...j->...i", r, v)


OPS = {
    "identity": lambda a: a,
    "difference": lambda a, b: a - b,
    "rotmat_from_quat_xyzw": quat_xyzw_to_rotmat_flat,
    "body_frame": to_body,
    "body_frame_difference": lambda a, b, q: to_body(a - b, q),
}


def layout_size(layout: list[dict]) -> int:
    return sum(int(t["dim"]) for t in layout)


def build_observation(layout: list[dict], raw: dict[str, torch.Tensor]) -> torch.Tensor:
    parts = []
    for t in layout:
        v = OPS[t["op"]](*(raw[k] for k in t["inputs"])) * float(t.get("scale", 1.0))
        c = float(t.get("clip", float("inf")))
        parts.append(v.clamp(-c, c))
    return torch.cat(parts, dim=-1).float()

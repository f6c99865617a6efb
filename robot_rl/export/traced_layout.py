"""The observation layout in plain torch ops that tracers follow (LEAPP records every call; the simulator's
builder, sim.observation_layout, writes in place and gathers, which a trace does not capture faithfully)."""

from __future__ import annotations

import torch

from robot_conventions import observation_ops as ops


def rotmat_xyzw(q: torch.Tensor) -> torch.Tensor:
    """(..., 4) scalar-last quaternion -> (..., 3, 3) body-to-world rotation, the textbook formula."""
    q = q / q.norm(dim=-1, keepdim=True)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], dim=-1),
        torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], dim=-1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], dim=-1),
    ]
    return torch.stack(rows, dim=-2)


def _to_body(v: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return (rotmat_xyzw(q) * v.unsqueeze(-1)).sum(dim=-2)  # R^T v


OPS = {
    ops.IDENTITY: lambda a: a,
    ops.DIFFERENCE: lambda a, b: a - b,
    ops.ROTMAT_FROM_QUAT_XYZW: lambda q: rotmat_xyzw(q).flatten(-2),
    ops.BODY_FRAME: _to_body,
    ops.BODY_FRAME_DIFFERENCE: lambda a, b, q: _to_body(a - b, q),
}


def build_observation(layout: list[dict], raw: dict[str, torch.Tensor]) -> torch.Tensor:
    """The layout's observation (scale, then clip, per term) as the deploy runtime computes it."""
    parts = []
    for t in layout:
        if t["op"] not in OPS:
            raise ValueError(f"observation term '{t['name']}' uses op '{t['op']}', which has no traced form")
        v = OPS[t["op"]](*(raw[k] for k in t["inputs"])) * float(t.get("scale", 1.0))
        c = float(t.get("clip", float("inf")))
        parts.append(v.clamp(-c, c) if c != float("inf") else v)
    return torch.cat(parts, dim=-1)

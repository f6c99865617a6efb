"""Torch twin of robot_rl.deploy.observation: the same layout, computed batched during training.

The layout (a list of term dicts) is the contract written into policy.yaml; tests check that
this builder and the deploy runtime's numpy builder agree on recorded states.
"""

from __future__ import annotations

import torch


def quat_xyzw_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """(..., 4) scalar-last unit quaternions -> (..., 3, 3) body-to-world rotation matrices."""
    q = q / q.norm(dim=-1, keepdim=True)
    x, y, z, w = q.unbind(-1)
    r = torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    )  # fmt: skip
    return r.reshape(q.shape[:-1] + (3, 3))


def to_body(v: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """World-frame vector expressed in the body frame (R^T v), given R (..., 3, 3)."""
    return (rot * v.unsqueeze(-1)).sum(dim=-2)


# Each op gets its inputs and a function that returns the rotation matrix of a quaternion input
# (computed once per build: several terms of one layout use the same attitude).
OPS = {
    "identity": lambda rot, a: a,
    "difference": lambda rot, a, b: a - b,
    "rotmat_from_quat_xyzw": lambda rot, q: rot(q).flatten(-2),
    "body_frame": lambda rot, v, q: to_body(v, rot(q)),
    "body_frame_difference": lambda rot, a, b, q: to_body(a - b, rot(q)),
}


def layout_size(layout: list[dict]) -> int:
    return sum(int(t["dim"]) for t in layout)


def build_observation(
    layout: list[dict], raw: dict[str, torch.Tensor], rotations: dict[str, torch.Tensor] | None = None
) -> torch.Tensor:
    """The layout's observation from raw inputs; rotations: quat_xyzw_to_rotmat of quaternion inputs, by input
    name, where the caller has already computed them."""
    cache: dict[int, torch.Tensor] = {id(raw[k]): r for k, r in (rotations or {}).items()}

    def rot(q: torch.Tensor) -> torch.Tensor:
        if id(q) not in cache:
            cache[id(q)] = quat_xyzw_to_rotmat(q)
        return cache[id(q)]

    parts = []
    for t in layout:
        v = OPS[t["op"]](rot, *(raw[k] for k in t["inputs"]))
        # a scale of 1 and an infinite clip change no bit: skip those passes over the batch
        scale = float(t.get("scale", 1.0))
        if scale != 1.0:
            v = v * scale
        c = float(t.get("clip", float("inf")))
        if c != float("inf"):
            v = v.clamp(-c, c)
        parts.append(v)
    return torch.cat(parts, dim=-1).float()

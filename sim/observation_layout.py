"""Torch twin of robot_rl.deploy.observation: the same layout, computed batched during training.

The layout (a list of term dicts) is the contract written into policy.yaml; tests check that
this builder and the deploy runtime's numpy builder agree on recorded states.
"""

from __future__ import annotations

import torch

from robot_conventions import observation_ops as ops

# quat_xyzw_to_rotmat's nine entries as 2 (a b + c d), from 18 products of gathered components in x, y, z, w
# order: left factors carry the 2 and the sign, which is exact, so each entry rounds as the textbook formula
# 1 - 2 (y y + z z), 2 (x y - w z), ... does, in a dozen torch calls instead of some forty (tasks run it every
# control step over every world).
_ROT_LEFT = torch.tensor([1, 0, 0, 0, 0, 1, 0, 1, 0, 2, 3, 3, 3, 2, 3, 3, 3, 1])
_ROT_RIGHT = torch.tensor([1, 1, 2, 1, 0, 2, 2, 2, 0, 2, 2, 1, 2, 2, 0, 1, 0, 1])
_ROT_COEF = (2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, -2.0, 2.0, 2.0, 2.0, -2.0, -2.0, 2.0, 2.0)
_ROT_SIGN = (-1.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0)  # diagonal: 1 - s computed as (-s) + 1, exactly
_rot_consts: dict = {}


def quat_xyzw_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """(..., 4) scalar-last unit quaternions -> (..., 3, 3) body-to-world rotation matrices."""
    q = q / q.norm(dim=-1, keepdim=True)
    key = (q.dtype, q.device)
    if key not in _rot_consts:
        _rot_consts[key] = (
            _ROT_LEFT.to(q.device),
            _ROT_RIGHT.to(q.device),
            torch.tensor(_ROT_COEF, dtype=q.dtype, device=q.device),
            torch.tensor(_ROT_SIGN, dtype=q.dtype, device=q.device),
        )
    left, right, coef, sign = _rot_consts[key]
    # components first: gathering whole rows is a copy, gathering along the last dimension is slow
    qt = q.movedim(-1, 0).contiguous()
    lead = (-1,) + (1,) * (q.dim() - 1)
    prod = (qt.index_select(0, left) * coef.view(lead)) * qt.index_select(0, right)
    r = (prod[:9] + prod[9:]) * sign.view(lead)
    r[::4].add_(1.0)  # the diagonal rows
    return r.movedim(0, -1).contiguous().view(q.shape[:-1] + (3, 3))  # contiguous, as the stacked formula gave


def to_body(v: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """World-frame vector expressed in the body frame (R^T v), given R (..., 3, 3)."""
    p = rot * v.unsqueeze(-1)
    # the sum over rows written out, in the order and from the +0 start of torch's sum(dim=-2), bit for bit
    # (signed zeros included) at a third of the cost of a reduction over a middle dimension
    return ((p[..., 0, :] + 0.0) + p[..., 1, :]) + p[..., 2, :]


# Each op gets its inputs and a function that returns the rotation matrix of a quaternion input
# (computed once per build: several terms of one layout use the same attitude).
# k_nearest_relative has no entry: the swarm task computes its neighbour tokens itself
# (sim.tasks.crazyflie.swarm.CrazyflieSwarm._observed_neighbours).
OPS = {
    ops.IDENTITY: lambda rot, a: a,
    ops.DIFFERENCE: lambda rot, a, b: a - b,
    ops.ROTMAT_FROM_QUAT_XYZW: lambda rot, q: rot(q).flatten(-2),
    ops.BODY_FRAME: lambda rot, v, q: to_body(v, rot(q)),
    ops.BODY_FRAME_DIFFERENCE: lambda rot, a, b, q: to_body(a - b, rot(q)),
}


def store_raw_rows(
    last_raw: dict[str, torch.Tensor], raw: dict[str, torch.Tensor], ids: torch.Tensor | None, n: int
) -> dict[str, torch.Tensor]:
    """The raw state buffers with the rows `ids` replaced by `raw` (all rows when ids is None). The first
    partial write (the env's first reset) allocates full-size buffers of n rows."""
    if ids is None:
        return raw
    if not last_raw:
        last_raw = {k: torch.zeros((n,) + v.shape[1:], dtype=v.dtype, device=v.device) for k, v in raw.items()}
    for k, v in raw.items():
        last_raw[k][ids] = v
    return last_raw


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

"""Observation vectors from raw robot state, following a bundle's observation layout.

A layout is a list of terms; each term reads named raw-state inputs, applies one operation,
then scales and clips. The same layout is what the simulator task used in training, so a
robot needs policy.yaml alone to rebuild the policy's input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_conventions import observation_ops as ops
from robot_conventions.frames import quat_wxyz_to_rotmat, quat_xyzw_to_wxyz
from robot_conventions.observation_ops import FAR_NEIGHBOUR_M


def _identity(a: np.ndarray) -> np.ndarray:
    return a


def _difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a - b


def _rotmat_from_quat_xyzw(q: np.ndarray) -> np.ndarray:
    r = quat_wxyz_to_rotmat(quat_xyzw_to_wxyz(q))
    return r.reshape(r.shape[:-2] + (9,))


def _to_body(v: np.ndarray, q_xyzw: np.ndarray) -> np.ndarray:
    """World-frame vector expressed in the body frame (R^T v)."""
    r = quat_wxyz_to_rotmat(quat_xyzw_to_wxyz(q_xyzw))
    return np.einsum("...ji,...j->...i", r, v)


def _body_frame_difference(a: np.ndarray, b: np.ndarray, q_xyzw: np.ndarray) -> np.ndarray:
    return _to_body(a - b, q_xyzw)


# FAR_NEIGHBOUR_M (robot_conventions.observation_ops) pads neighbour slots no broadcast fills, as in training
# (sim.tasks.crazyflie.swarm_config.FAR).


def _k_nearest_relative(position: np.ndarray, velocity: np.ndarray, neighbours: np.ndarray, k: int) -> np.ndarray:
    """A swarm drone's neighbour tokens: the k nearest of the received neighbour states (..., M, 6) = [p (3), v (3)]
    (world frame) relative to this drone's own position and velocity (..., 3), nearest first, each [dp (3), dv (3)]
    = neighbour - own; slots beyond M are padded FAR_NEIGHBOUR_M away and still. Output (..., 6 k); batched over
    leading dimensions (one drone: position (3,) and neighbours (M, 6) or flat (6 M,))."""
    own = np.concatenate([position, velocity], axis=-1)
    nb = np.asarray(neighbours, dtype=np.float64).reshape(*own.shape[:-1], -1, 6)
    rel = nb - own[..., None, :]
    order = np.argsort(np.linalg.norm(rel[..., 0:3], axis=-1), axis=-1, kind="stable")[..., :k]
    nearest = np.take_along_axis(rel, order[..., None], axis=-2)
    pad = np.zeros((*own.shape[:-1], k - order.shape[-1], 6))
    pad[..., 0:3] = FAR_NEIGHBOUR_M
    return np.concatenate([nearest, pad], axis=-2).reshape(*own.shape[:-1], 6 * k)


_FUNCTIONS = {
    ops.IDENTITY: _identity,
    ops.DIFFERENCE: _difference,
    ops.ROTMAT_FROM_QUAT_XYZW: _rotmat_from_quat_xyzw,
    ops.BODY_FRAME: _to_body,
    ops.BODY_FRAME_DIFFERENCE: _body_frame_difference,
    # k neighbour slots of 6 values each: k comes from the term's dim (validated at load), not from the inputs,
    # whose number of neighbours heard varies
    ops.K_NEAREST_RELATIVE: _k_nearest_relative,
}
# op name -> (function, number of inputs); a term's size is checked against its layout dim after the op
OPS = {name: (_FUNCTIONS[name], ops.OP_ARITY[name]) for name in ops.OBSERVATION_OPS}


@dataclass(frozen=True)
class ObsTerm:
    name: str
    op: str
    inputs: tuple[str, ...]
    dim: int
    scale: float
    clip: float

    @staticmethod
    def from_dict(d: dict) -> ObsTerm:
        try:
            term = ObsTerm(
                name=str(d["name"]),
                op=str(d["op"]),
                inputs=tuple(str(x) for x in d["inputs"]),
                dim=int(d["dim"]),
                scale=float(d.get("scale", 1.0)),
                clip=float(d.get("clip", np.inf)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"observation term {d!r} is malformed: {e}") from None
        if term.op not in OPS:
            raise ValueError(f"observation term '{term.name}' has unknown op '{term.op}' (known: {sorted(OPS)})")
        if len(term.inputs) != OPS[term.op][1]:
            raise ValueError(f"observation term '{term.name}': op '{term.op}' takes {OPS[term.op][1]} inputs")
        if term.op == ops.K_NEAREST_RELATIVE and (term.dim <= 0 or term.dim % 6):
            raise ValueError(f"observation term '{term.name}': k_nearest_relative needs a dim of 6 k, not {term.dim}")
        return term

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "op": self.op,
            "inputs": list(self.inputs),
            "dim": self.dim,
            "scale": self.scale,
            "clip": self.clip,
        }


@dataclass
class Integrator:
    """A leaky, clipped integral of (a - b) over time, kept by the runtime between control steps.

    Gives a memoryless policy integral action (e.g. the unknown hover thrust of a drone whose mass
    and motors vary). The simulator task keeps the same integral with the same update.
    """

    name: str
    inputs: tuple[str, str]
    dim: int
    leak_s: float
    clip: float

    @staticmethod
    def from_dict(d: dict) -> Integrator:
        try:
            a, b = d["inputs"]
            return Integrator(str(d["name"]), (str(a), str(b)), int(d["dim"]), float(d["leak_s"]), float(d["clip"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"integrator {d!r} is malformed: {e}") from None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "inputs": list(self.inputs),
            "dim": self.dim,
            "leak_s": self.leak_s,
            "clip": self.clip,
        }

    def update(self, state: np.ndarray, raw: dict[str, np.ndarray], dt: float) -> np.ndarray:
        diff = np.asarray(raw[self.inputs[0]], dtype=np.float64) - np.asarray(raw[self.inputs[1]], dtype=np.float64)
        return np.clip(state * (1.0 - dt / self.leak_s) + diff * dt, -self.clip, self.clip)


def build_observation(terms: list[ObsTerm], raw: dict[str, np.ndarray]) -> np.ndarray:
    """Concatenate the layout's terms computed from raw state (leading batch dims allowed).

    Raises ValueError naming the input when one is missing, mis-sized or not finite.
    """
    parts = []
    for term in terms:
        args = []
        for key in term.inputs:
            if key not in raw:
                raise ValueError(f"raw state lacks '{key}' needed by observation term '{term.name}'")
            a = np.asarray(raw[key], dtype=np.float64)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"raw state '{key}' is not finite: {a}")
            args.append(a)
        if term.op == ops.K_NEAREST_RELATIVE:
            value = _k_nearest_relative(*args, k=term.dim // 6)
        else:
            value = OPS[term.op][0](*args)
        if value.shape[-1] != term.dim:
            raise ValueError(f"observation term '{term.name}' has size {value.shape[-1]}, layout says {term.dim}")
        parts.append(np.clip(value * term.scale, -term.clip, term.clip))
    return np.concatenate(parts, axis=-1).astype(np.float32)

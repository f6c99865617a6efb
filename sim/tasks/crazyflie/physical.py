"""A Crazyflie's physical parameters: what system identification fits, what a SITL "robot" can hide, and what
domain randomization can be centred on.

Scales are relative to the model's nominal values (assets/crazyflie/crazyflie.xml and the firmware's PWM curve);
mass and the motor time constant are absolute. Latency is whole physics substeps (2 ms), as the firmware model
delays commands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

import torch

from sim.tasks.crazyflie.hover_config import LATENCY_HISTORY

NOMINAL_MASS_KG = 0.027
NOMINAL_MOTOR_TAU_S = 0.04
SUBSTEP_S = 0.002  # the model's timestep: latency resolution
MAX_LATENCY_SUBSTEPS = 5 * (LATENCY_HISTORY - 1)  # the commands the firmware model keeps in flight


@dataclass(frozen=True)
class CrazyflieParams:
    mass_kg: float = NOMINAL_MASS_KG
    inertia_scale: float = 1.0  # all three principal moments
    thrust_scale: float = 1.0  # the PWM-to-thrust curve's coefficient (kf), per motor
    motor_tau_s: float = NOMINAL_MOTOR_TAU_S  # first-order lag from commanded to produced thrust
    latency_s: float = 0.0  # command latency (radio, queues, ROS hops)

    @classmethod
    def from_mapping(cls, values: Mapping) -> CrazyflieParams:
        """From a mapping of some of the fields; a clear error names an unknown key or an impossible value."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown Crazyflie parameter(s) {unknown}; known: {sorted(known)}")
        out = cls(**{k: float(v) for k, v in values.items()})
        out.check()
        return out

    def check(self) -> None:
        for name in ("mass_kg", "inertia_scale", "thrust_scale", "motor_tau_s"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0.0 <= self.latency_s <= MAX_LATENCY_SUBSTEPS * SUBSTEP_S:
            raise ValueError(f"latency_s must be in [0, {MAX_LATENCY_SUBSTEPS * SUBSTEP_S:.3f}], got {self.latency_s}")

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


PARAM_NAMES = tuple(f.name for f in fields(CrazyflieParams))


def latency_substeps(latency_s: torch.Tensor | float) -> torch.Tensor:
    return torch.round(torch.as_tensor(latency_s, dtype=torch.float64) / SUBSTEP_S).long().clamp(0, MAX_LATENCY_SUBSTEPS)


def write_params(task, ids: torch.Tensor, values: Mapping[str, torch.Tensor | float]) -> None:
    """Write per-world physical parameters into the hover task's worlds `ids` (before their reset: the native
    firmware packs thrust scale and latency at reset). values: any of PARAM_NAMES, scalars or (len(ids),)."""
    b = task.backend
    k = len(ids)

    def col(name: str) -> torch.Tensor:
        return torch.as_tensor(values[name], dtype=torch.float64).expand(k).clone()

    if "mass_kg" in values:
        b.expand("body_mass")[ids, 1] = col("mass_kg")
    if "inertia_scale" in values:
        b.expand("body_inertia")[ids, 1] = task.nominal["inertia"] * col("inertia_scale").unsqueeze(1)
    if "motor_tau_s" in values:
        b.expand("actuator_dynprm")[ids, :, 0] = col("motor_tau_s").unsqueeze(1)
    if "thrust_scale" in values:
        task.firmware.kf_scale[ids, 0] = col("thrust_scale")
    if "latency_s" in values:
        task.latency[ids] = latency_substeps(col("latency_s"))
    b.set_const(ids)

"""A Crazyflie's physical parameters: what system identification fits, what a SITL "robot" can hide, and what
domain randomization can be centred on.

Scales are relative to the model's nominal values (assets/crazyflie/crazyflie.xml and the firmware's PWM curve);
mass and the motor time constant are absolute. Latency is whole physics substeps (2 ms), as the firmware model
delays commands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from sim.tasks.crazyflie.hover_config import LATENCY_HISTORY
from sim.tasks.fit_file import params_from_mapping, read_fit
from sim.tasks.fit_file import span as fit_span

NOMINAL_MASS_KG = 0.027
NOMINAL_MOTOR_TAU_S = 0.04
NOMINAL_TORQUE_RATIO = 0.006  # yaw torque per newton of thrust (m), the actuators' gear
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
        out = params_from_mapping(cls, values, "Crazyflie")
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
    """Substeps of a latency; on the device of a tensor given, on the CPU for a number."""
    device = latency_s.device if isinstance(latency_s, torch.Tensor) else "cpu"
    latency = torch.as_tensor(latency_s, dtype=torch.float64, device=device)
    return torch.round(latency / SUBSTEP_S).long().clamp(0, MAX_LATENCY_SUBSTEPS)


def write_params(task, ids: torch.Tensor, values: Mapping[str, torch.Tensor | float]) -> None:
    """Write per-world physical parameters into the hover task's worlds `ids` (before their reset: the native
    firmware packs thrust scale and latency at reset). values: any of PARAM_NAMES, scalars or (len(ids),)."""
    b = task.backend
    k = len(ids)

    def col(name: str) -> torch.Tensor:
        return torch.as_tensor(values[name], dtype=torch.float64, device=task.device).expand(k).clone()

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


# The narrowest randomization around a fit: a fit is of one drone on one day (battery, props, payload vary).
FIT_FLOOR = {"mass_kg": 0.03, "inertia_scale": 0.05, "thrust_scale": 0.03, "motor_tau_s": 0.1}
FIT_FLOOR_LATENCY_S = 2 * SUBSTEP_S


def load_fit(path: str | Path) -> dict[str, tuple[float, float, float]]:
    """A `robot-rl sysid` parameters file -> name -> (value, low, high), the estimate and its 95% interval.
    A clear ValueError for a file that is not one."""
    out = read_fit(path, "crazyflie_2_1", PARAM_NAMES, "Crazyflie")
    CrazyflieParams.from_mapping({k: v[0] for k, v in out.items()})  # the values are possible ones
    return out


def recentred_ranges(dr: dict, fit: dict[str, tuple[float, float, float]]) -> dict:
    """Domain randomization ranges (hover_config.DR_LEVELS form) centred on a fit: each fitted parameter's range is
    its interval, widened to at least FIT_FLOOR around the value; what was not fitted keeps the level's range."""
    out = dict(dr)
    if "mass_kg" in fit:
        lo, hi = fit_span(fit, "mass_kg", FIT_FLOOR["mass_kg"])
        out["mass"] = (lo / NOMINAL_MASS_KG, hi / NOMINAL_MASS_KG)
    for name, key in (("inertia_scale", "inertia"), ("thrust_scale", "kf"), ("motor_tau_s", "motor_tau")):
        if name in fit:
            out[key] = fit_span(fit, name, FIT_FLOOR[name])
    if "latency_s" in fit:
        value, lo, hi = fit["latency_s"]
        lo, hi = min(lo, value - FIT_FLOOR_LATENCY_S), max(hi, value + FIT_FLOOR_LATENCY_S)
        out["latency_substeps"] = (int(latency_substeps(max(lo, 0.0))), int(latency_substeps(hi)))
    return out


def weight_per_thrust_spread(dr: dict, mass_scale: float, per_thrust: float) -> float:
    """How far (a fraction) weight per unit of thrust can stray across a DR level's mass and kf ranges from a drone
    of mass_scale (x nominal) and per_thrust (1 / its kf): 0 for zero-width ranges."""
    lo = dr["mass"][0] / dr["kf"][1]
    hi = dr["mass"][1] / dr["kf"][0]
    centre = mass_scale * per_thrust
    return max(hi / centre - 1.0, 1.0 - lo / centre, 0.0)


def fixed_ranges(fit: dict[str, tuple[float, float, float]]) -> dict:
    """Zero-width ranges (DR_LEVELS form) at the fitted values, the model's nominal values elsewhere: every world
    is the fitted drone."""
    p = CrazyflieParams.from_mapping({k: v[0] for k, v in fit.items()})
    latency = int(latency_substeps(p.latency_s))
    return {
        "mass": (p.mass_kg / NOMINAL_MASS_KG,) * 2,
        "inertia": (p.inertia_scale,) * 2,
        "kf": (p.thrust_scale,) * 2,
        "torque_ratio": (NOMINAL_TORQUE_RATIO,) * 2,
        "motor_tau": (p.motor_tau_s,) * 2,
        "pid_gain": (1.0, 1.0),
        "latency_substeps": (latency, latency),
    }

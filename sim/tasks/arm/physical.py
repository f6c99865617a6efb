"""The arm's physical parameters: what system identification fits, what a SITL "robot" can hide.

Scales of the model's values (assets/arm/panda.xml) on the seven arm joints; the fingers keep theirs.
- damping_scale: the joint's viscous damping, the joint's own (damping) and the position servo's (kv) together:
  both are a torque -c * qdot on the same joint, so a log tells only their sum (kv is 100 and 30 N m s/rad, the
  joint damping 1: the joint's own alone would be ~1% of what the log shows).
- armature_scale: the rotor inertia reflected through the gearbox (armature), all seven joints.
- kp_scale: the servo stiffness (position actuator kp, its bias -kp * q with it): a motor constant or a gain
  that is not what the controller was told.

The same values are written two ways that agree (tests check it): into an MjSpec (apply_to_spec, what the
sysid model modifiers compile) and into a running batch's per-world model fields (write_params, the SITL robot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

import mujoco
import numpy as np
import torch

from sim.tasks.arm.scene import ARM_DOF
from sim.tasks.fit_file import params_from_mapping, read_fit, span

ARM_JOINTS = tuple(f"joint{i}" for i in range(1, ARM_DOF + 1))  # joint and actuator names in panda.xml
ROBOT = "panda_like"


@dataclass(frozen=True)
class ArmParams:
    damping_scale: float = 1.0
    armature_scale: float = 1.0
    kp_scale: float = 1.0

    @classmethod
    def from_mapping(cls, values: Mapping) -> ArmParams:
        """From a mapping of some of the fields; a clear error names an unknown key or an impossible value."""
        out = params_from_mapping(cls, values, "arm")
        for name in PARAM_NAMES:
            if not getattr(out, name) > 0.0:
                raise ValueError(f"{name} must be positive, got {getattr(out, name)}")
        return out

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


PARAM_NAMES = tuple(f.name for f in fields(ArmParams))


def nominal_values(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    """The model's own per-joint values the scales multiply: (7,) each."""
    dof = np.array([model.jnt_dofadr[model.joint(j).id] for j in ARM_JOINTS])
    act = np.array([model.actuator(j).id for j in ARM_JOINTS])
    return {
        "dof": dof,
        "actuator": act,
        "damping": model.dof_damping[dof].copy(),
        "kv": -model.actuator_biasprm[act, 2].copy(),
        "armature": model.dof_armature[dof].copy(),
        "kp": model.actuator_gainprm[act, 0].copy(),
    }


def apply_to_spec(spec: mujoco.MjSpec, nominal: Mapping[str, np.ndarray], values: Mapping[str, float]) -> None:
    """Write scales (any of PARAM_NAMES) into a spec whose arm joints still hold `nominal` (nominal_values of its
    compiled model)."""
    for i, name in enumerate(ARM_JOINTS):
        joint, act = spec.joint(name), spec.actuator(name)
        if "damping_scale" in values:
            joint.damping[0] = float(nominal["damping"][i] * values["damping_scale"])  # (linear, higher orders)
            act.biasprm[2] = -float(nominal["kv"][i] * values["damping_scale"])
        if "armature_scale" in values:
            joint.armature = float(nominal["armature"][i] * values["armature_scale"])
        if "kp_scale" in values:
            kp = float(nominal["kp"][i] * values["kp_scale"])
            act.gainprm[0], act.biasprm[1] = kp, -kp


# The narrowest randomization around a fit, a fraction of the value either side: a fit is of one arm on one day
# (temperature moves the damping, a payload the reflected inertia).
FIT_FLOOR = {"damping_scale": 0.05, "armature_scale": 0.05, "kp_scale": 0.03}


def load_fit(path) -> dict[str, tuple[float, float, float]]:
    """An arm's `robot-rl sysid` parameters file -> name -> (value, low, high); a clear ValueError otherwise."""
    out = read_fit(path, ROBOT, PARAM_NAMES, "arm")
    ArmParams.from_mapping({k: v[0] for k, v in out.items()})  # the values are possible ones
    return out


def recentred_level(level: dict, fit: dict[str, tuple[float, float, float]]) -> dict:
    """A DR level (randomize.DR_LEVELS form) centred on a fit: the servo gain (servo_kp, all the servos, as the
    level draws it) from kp_scale's interval, and the arm joints' damping and armature scales from theirs, each
    widened to FIT_FLOOR; what the fit does not hold keeps the level's range. The empty level (randomization
    none): zero-width ranges at the fitted values, nominal elsewhere, so every world is the fitted arm."""
    out = dict(level) if level else {"object_mass": (1.0, 1.0), "friction": (1.0, 1.0), "latency_substeps": (0, 0)}
    for name, key in (("kp_scale", "servo_kp"), ("damping_scale", "damping"), ("armature_scale", "armature")):
        if name in fit:
            out[key] = span(fit, name, FIT_FLOOR[name]) if level else (fit[name][0],) * 2
    out.setdefault("servo_kp", (1.0, 1.0))
    return out


def write_params(backend, ids, values: Mapping[str, float]) -> None:
    """Write scales into a batch backend's worlds `ids` (per-world model fields), then its derived constants
    (the armature enters the constraint weights set_const computes, as compiling a spec does)."""
    nominal = nominal_values(backend.model)
    dev = backend.device
    ids = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64)[:, None]
    dof, act = nominal["dof"][None], nominal["actuator"][None]
    if "damping_scale" in values:
        s = float(values["damping_scale"])
        backend.expand("dof_damping")[ids, dof] = _t(nominal["damping"] * s, dev)
        backend.expand("actuator_biasprm")[ids, act, 2] = _t(-nominal["kv"] * s, dev)
    if "armature_scale" in values:
        backend.expand("dof_armature")[ids, dof] = _t(nominal["armature"] * float(values["armature_scale"]), dev)
    if "kp_scale" in values:
        kp = nominal["kp"] * float(values["kp_scale"])
        backend.expand("actuator_gainprm")[ids, act, 0] = _t(kp, dev)
        backend.expand("actuator_biasprm")[ids, act, 1] = _t(-kp, dev)
    backend.set_const(ids[:, 0])


def _t(x: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64, device=device)

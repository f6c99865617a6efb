"""The quadruped's physical parameters: what system identification fits, what a SITL "robot" can hide, and what
domain randomization can be centred on. They are the three the training randomization draws
(velocity_config.DR_LEVELS), so a fit re-centres exactly what training varies:

- motor_strength: every motor's torque per unit of PD output, tau = s (kp (q* - q) - kd dq), with kp and kd the
  gains the low-level command carries (a Go1 command sends them per joint; the log holds them);
- friction: the contact friction coefficient (every geom, the feet's against the floor, as DR sets it);
- added_mass_kg: a payload on the trunk.

Written two ways that agree (a test checks it): into an MjSpec (apply_to_spec, what sysid compiles) and into a
running task's per-world fields (write_params, the SITL robot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

import mujoco
import torch

from sim.tasks.fit_file import params_from_mapping, read_fit
from sim.tasks.quadruped.constants import TRUNK_MASS

ROBOT = "go1_like"
NOMINAL_FRICTION = 1.0  # assets/quadruped/go1_like.xml, every geom


@dataclass(frozen=True)
class QuadrupedParams:
    motor_strength: float = 1.0
    friction: float = NOMINAL_FRICTION
    added_mass_kg: float = 0.0

    @classmethod
    def from_mapping(cls, values: Mapping) -> QuadrupedParams:
        """From a mapping of some of the fields; a clear error names an unknown key or an impossible value."""
        out = params_from_mapping(cls, values, "quadruped")
        for name in ("motor_strength", "friction"):
            if not getattr(out, name) > 0.0:
                raise ValueError(f"{name} must be positive, got {getattr(out, name)}")
        if not -0.5 * TRUNK_MASS < out.added_mass_kg < 10 * TRUNK_MASS:
            raise ValueError(f"added_mass_kg {out.added_mass_kg} is not a payload of this robot")
        return out

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


PARAM_NAMES = tuple(f.name for f in fields(QuadrupedParams))


def write_params(task, ids: torch.Tensor, values: Mapping[str, float]) -> None:
    """Write parameters (any of PARAM_NAMES) into a QuadrupedVelocity task's worlds `ids`; the task's own
    per-world fields (strength, friction_world, added_mass) follow, so its privileged observation sees them."""
    b = task.backend
    if "motor_strength" in values:
        task.strength[ids] = float(values["motor_strength"])
        task.apply_strength(ids)
    if "friction" in values:
        task.friction_world[ids] = float(values["friction"])
        b.expand("geom_friction")[ids, :, 0] = float(values["friction"])
    if "added_mass_kg" in values:
        task.added_mass[ids] = float(values["added_mass_kg"])
        b.expand("body_mass")[ids, task.trunk] = task.nominal["mass"] + float(values["added_mass_kg"])
    b.set_const(ids)


def apply_to_spec(spec: mujoco.MjSpec, values: Mapping[str, float], kp: float, kd: float) -> None:
    """Write parameters into a spec of the robot whose servos run the logged gains kp, kd (the log's commands):
    motor_strength sets the servos (kp, kd scaled by it), friction every geom's, added_mass_kg the trunk's mass."""
    if "motor_strength" in values:
        s = float(values["motor_strength"])
        for act in spec.actuators:
            act.gainprm[0] = kp * s
            act.biasprm[1], act.biasprm[2] = -kp * s, -kd * s
    if "friction" in values:
        for geom in spec.geoms:
            geom.friction[0] = float(values["friction"])
    if "added_mass_kg" in values:
        trunk = spec.body("trunk")
        trunk.mass = TRUNK_MASS + float(values["added_mass_kg"])


def load_fit(path) -> dict[str, tuple[float, float, float]]:
    """A quadruped's `robot-rl sysid` parameters file -> name -> (value, low, high); a clear ValueError otherwise."""
    out = read_fit(path, ROBOT, PARAM_NAMES, "quadruped")
    QuadrupedParams.from_mapping({k: v[0] for k, v in out.items()})
    return out


# The narrowest randomization around a fit, either side of the value (absolute: a payload can be 0): a fit is of one
# robot on one day (battery charge moves the motors' strength, the floor its friction, a payload changes).
FIT_FLOOR = {"motor_strength": 0.05, "friction": 0.1, "added_mass_kg": 0.5}
LEVEL_KEY = {"motor_strength": "motor_strength", "friction": "friction", "added_mass_kg": "added_mass"}


def recentred_level(level: dict, fit: dict[str, tuple[float, float, float]]) -> dict:
    """A DR level (velocity_config.DR_LEVELS form) centred on a fit: each fitted parameter's range is its interval,
    widened to FIT_FLOOR either side; what the fit does not hold keeps the level's range. The empty level
    (randomization none): zero-width ranges at the fitted values, nominal elsewhere, no pushes or start noise."""
    nominal = QuadrupedParams()
    out = dict(level) if level else {
        "friction": (nominal.friction,) * 2, "added_mass": (0.0, 0.0), "motor_strength": (1.0, 1.0),
        "latency_substeps": (0, 0), "push_speed": 0.0, "start_joint_noise": 0.0, "start_speed": 0.0,
    }  # fmt: skip
    for name, (value, lo, hi) in fit.items():
        f = FIT_FLOOR[name]
        out[LEVEL_KEY[name]] = (min(lo, value - f), max(hi, value + f)) if level else (value, value)
    return out

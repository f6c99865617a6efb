"""Domain randomization of the arm tasks: per-world object mass, friction, servo gains and command latency, and,
centred on a sysid fit (physical.recentred_level), the arm joints' damping and armature."""

from __future__ import annotations

import torch

from sim.tasks.arm.physical import nominal_values
from sim.tasks.arm.scene import ARM_DOF

# Multipliers of nominal values unless noted.
DR_LEVELS = {
    "none": {},
    "train": {
        "object_mass": (0.7, 1.5),
        "friction": (0.7, 1.3),
        "servo_kp": (0.85, 1.15),
        "latency_substeps": (0, 3),  # x 4 ms
        "start_joint_noise": 0.1,  # rad around the ready pose
    },
    "max": {
        "object_mass": (0.5, 2.0),
        "friction": (0.5, 1.5),
        "servo_kp": (0.7, 1.3),
        "latency_substeps": (0, 5),
        "start_joint_noise": 0.2,
    },
}


def uniform(rng: torch.Generator, k: int, lo: float, hi: float, dims: int = 1) -> torch.Tensor:
    """(k, dims) uniform in [lo, hi) (float64)."""
    return lo + (hi - lo) * torch.rand(k, dims, generator=rng, dtype=torch.float64, device=rng.device)


class PhysicsRandomization:
    """The per-world draws of one DR level and the model fields they scale. With level {} ("none") every
    scale stays 1 and the latency 0; the critic observes them either way (privileged())."""

    def __init__(self, backend, level: dict, object_body: torch.Tensor, gripped_geoms: torch.Tensor):
        m, n = backend.model, backend.num_worlds
        self.backend, self.level = backend, level
        self.device = dev = backend.device
        self.object_body, self.geoms = object_body, gripped_geoms  # friction: objects and fingers
        self.nominal = {
            "mass": float(m.body_mass[object_body[0]]),
            "friction": torch.tensor(m.geom_friction[:, 0].copy(), device=dev),
            "kp": torch.tensor(m.actuator_gainprm[:ARM_DOF + 2, 0].copy(), device=dev),
        }  # fmt: skip
        self.mass_scale = torch.ones(n, dtype=torch.float64, device=dev)
        self.friction_scale = torch.ones(n, dtype=torch.float64, device=dev)
        self.kp_scale = torch.ones(n, dtype=torch.float64, device=dev)
        self.latency = torch.zeros(n, dtype=torch.long, device=dev)  # substeps before a new target reaches the servos
        if level:
            self.mass = backend.expand("body_mass")
            self.friction = backend.expand("geom_friction")
            self.gainprm = backend.expand("actuator_gainprm")
            self.biasprm = backend.expand("actuator_biasprm")
        if "damping" in level or "armature" in level:  # a level centred on a fit
            self.joints = {k: torch.as_tensor(v, device=dev) for k, v in nominal_values(m).items()}
            self.damping = backend.expand("dof_damping")
            self.armature = backend.expand("dof_armature")

    def draw(self, ids: torch.Tensor, rng: torch.Generator, latency: bool) -> None:
        """New physics for these worlds (latency: also a new command latency)."""
        d, k = self.level, len(ids)
        if not d:
            return
        self.mass_scale[ids] = uniform(rng, k, *d["object_mass"])[:, 0]
        self.friction_scale[ids] = uniform(rng, k, *d["friction"])[:, 0]
        self.kp_scale[ids] = uniform(rng, k, *d["servo_kp"])[:, 0]
        wid = ids.unsqueeze(1)
        self.mass[wid, self.object_body] = self.nominal["mass"] * self.mass_scale[ids].unsqueeze(1)
        geoms = self.geoms
        self.friction[wid, geoms, 0] = self.nominal["friction"][geoms] * self.friction_scale[ids].unsqueeze(1)
        kp = self.nominal["kp"] * self.kp_scale[ids].unsqueeze(1)  # position servo: gain kp, bias -kp * q
        servos = torch.arange(ARM_DOF + 2, device=self.device)
        self.gainprm[wid, servos, 0] = kp
        self.biasprm[wid, servos, 1] = -kp
        if "damping" in d:  # the joint's own damping and the servo's kv: one viscous torque (physical.py)
            j, scale = self.joints, uniform(rng, k, *d["damping"])
            self.damping[wid, j["dof"]] = j["damping"] * scale
            self.biasprm[wid, j["actuator"], 2] = -j["kv"] * scale
        if "armature" in d:
            j = self.joints
            self.armature[wid, j["dof"]] = j["armature"] * uniform(rng, k, *d["armature"])
        if latency:
            lo, hi = d["latency_substeps"]
            self.latency[ids] = torch.randint(lo, hi + 1, (k,), generator=rng, device=self.device)
        self.backend.set_const(ids)

    def privileged(self) -> list[torch.Tensor]:
        """(n, 1) float32 columns of the critic's observation: the three scales and the latency / 5."""
        return [
            self.mass_scale.unsqueeze(1).float(),
            self.friction_scale.unsqueeze(1).float(),
            self.kp_scale.unsqueeze(1).float(),
            (self.latency.unsqueeze(1).double() / 5).float(),
        ]

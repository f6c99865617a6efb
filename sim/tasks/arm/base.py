"""Arm tasks on a Panda-like arm at a table: reach a marker, push an object onto a pad, put an object in a bowl.

Every episode carries a natural-language instruction from a small grammar over object attributes
("put the red cube in the blue bowl") and the identities it names (body names, for reward,
segmentation and guidance code). Actions are end-effector deltas + gripper through batched
differential IK (sim.robots.diff_ik, computed from joint positions, so the deploy runtime can run
the same maths), or joint deltas + gripper. Observations are state by default and follow each
task's obs_layout, written into the policy bundle like the Crazyflie's.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from sim.observation_layout import build_observation
from sim.robots.diff_ik import (
    PANDA_Q_HOME,
    DiffIK,
    forward_kinematics,
    orientation_error,
    quat_xyzw_from_rotmat,
)
from sim.tasks.base import Task

MODEL_PATH = Path(__file__).resolve().parents[3] / "assets" / "arm" / "scene.xml"
ARM_DOF = 7
CAMERAS = ("front", "top", "wrist", "overview")
FINGER_QPOS = slice(7, 9)
OBJ_QPOS0 = 9  # free joints of the objects follow the arm and fingers, 7 qpos / 6 qvel each
OBJ_QVEL0 = 9
FINGER_OPEN = 0.04  # m per finger (Franka Hand stroke 0.08 m)
TABLE_Z = 0.0

# -- the scene's things and the instruction grammar ---------------------------------------------------
# (colour, shape) -> body name; the order is the object index used in tensors
OBJECTS = [("red", "cube"), ("green", "cube"), ("blue", "cube"), ("yellow", "cylinder")]
OBJECT_HALF_HEIGHT = 0.025
BOWLS = [("blue", "bowl"), ("green", "bowl")]
PADS = [("white", "pad"), ("orange", "pad")]
MARKERS = {"pink": (1.0, 0.3, 0.75, 0.7), "purple": (0.6, 0.2, 0.9, 0.7), "cyan": (0.1, 0.85, 0.9, 0.7)}
TEMPLATES = {
    "arm_reach": ["move the gripper to the {target}", "reach the {target}", "touch the {target}"],
    "arm_push": ["push the {object} onto the {goal}", "slide the {object} to the {goal}"],
    "arm_pick_place": [
        "put the {object} in the {goal}",
        "pick up the {object} and place it in the {goal}",
        "move the {object} into the {goal}",
    ],
}
DESTINATIONS = {"arm_push": PADS, "arm_pick_place": BOWLS}
ROBOT_WORDS = {"gripper", "robot", "arm", "hand"}


def body_name(colour: str, shape: str) -> str:
    return f"{colour}_{shape}"


def parse_instruction(task: str, text: str) -> dict[str, str]:
    """Identities named by an instruction: {'target': ...} for reach, {'object', 'goal'} otherwise.

    Raises ValueError naming what is wrong: an unknown task, a phrase naming nothing in the scene,
    or the wrong number or kind of things for the task.
    """
    if task not in TEMPLATES:
        raise ValueError(f"unknown arm task '{task}' (available: {', '.join(sorted(TEMPLATES))})")
    # noun phrases "the <colour> <shape>"; "the gripper ..." refers to the robot, not the scene
    phrases = [p for p in re.findall(r"\bthe (\w+) (\w+)", text.lower()) if p[0] not in ROBOT_WORDS]
    scene = {f"{c} {s}" for c, s in OBJECTS + BOWLS + PADS} | {f"{c} marker" for c in MARKERS}
    for colour, shape in phrases:
        if f"{colour} {shape}" not in scene:
            raise ValueError(
                f"instruction '{text}' names the '{colour} {shape}', which is not in the scene "
                f"(it has: {', '.join(sorted(scene))})"
            )
    if task == "arm_reach":
        if len(phrases) != 1 or phrases[0][1] != "marker":
            raise ValueError(f"an arm_reach instruction names one marker, e.g. 'reach the pink marker'; got '{text}'")
        return {"target": body_name(*phrases[0])}
    dest = DESTINATIONS[task]
    if len(phrases) != 2 or phrases[0] not in OBJECTS or phrases[1] not in dest:
        kinds = " or ".join(f"the {c} {s}" for c, s in dest)
        raise ValueError(f"a {task} instruction names an object, then {kinds}; got '{text}'")
    return {"object": body_name(*phrases[0]), "goal": body_name(*phrases[1])}


# -- actions ------------------------------------------------------------------------------------------
# policy action in [-1, 1] -> command units: raw = offset + scale * a, clipped to [low, high].
# The gripper command is absolute: -1 closed, +1 open (each finger at 0.02 * (g + 1) m).
ACTION_SPECS = {
    "ee_pose": {  # TCP translation (m) and rotation vector (rad) per control step, base frame
        "names": ["dx_m", "dy_m", "dz_m", "drx_rad", "dry_rad", "drz_rad", "gripper"],
        "offset": [0.0] * 7,
        "scale": [0.03, 0.03, 0.03, 0.15, 0.15, 0.15, 1.0],
        "low": [-0.03, -0.03, -0.03, -0.15, -0.15, -0.15, -1.0],
        "high": [0.03, 0.03, 0.03, 0.15, 0.15, 0.15, 1.0],
    },
    "ee_position": {  # TCP translation only; the IK holds the orientation the episode started with
        "names": ["dx_m", "dy_m", "dz_m", "gripper"],
        "offset": [0.0] * 4,
        "scale": [0.03, 0.03, 0.03, 1.0],
        "low": [-0.03, -0.03, -0.03, -1.0],
        "high": [0.03, 0.03, 0.03, 1.0],
    },
    "joint": {  # joint position deltas (rad) per control step
        "names": [f"dq{i + 1}_rad" for i in range(ARM_DOF)] + ["gripper"],
        "offset": [0.0] * 8,
        "scale": [0.1] * 7 + [1.0],
        "low": [-0.1] * 7 + [-1.0],
        "high": [0.1] * 7 + [1.0],
    },
}

# -- observations -------------------------------------------------------------------------------------
# Raw state (what a real arm + perception report): joint_position, joint_velocity (rad, rad/s),
# gripper_width (m), ee_position (m) and ee_quaternion (xyzw) from FK of the reported joints,
# target_position / object_position / object_quaternion / goal_position (m, base frame), last_action.
_ARM_TERMS = [
    {"name": "joint_position", "op": "identity", "inputs": ["joint_position"], "dim": 7, "scale": 1.0, "clip": 4.0},
    {"name": "joint_velocity", "op": "identity", "inputs": ["joint_velocity"], "dim": 7, "scale": 0.2, "clip": 5.0},
    {"name": "gripper_width", "op": "identity", "inputs": ["gripper_width"], "dim": 1, "scale": 10.0, "clip": 1.0},
    {"name": "ee_position", "op": "identity", "inputs": ["ee_position"], "dim": 3, "scale": 1.0, "clip": 2.0},
    {"name": "ee_rotation", "op": "rotmat_from_quat_xyzw", "inputs": ["ee_quaternion"], "dim": 9, "scale": 1.0,
     "clip": 1.0},
]  # fmt: skip


def _last_action(dim: int) -> dict:
    return {"name": "last_action", "op": "identity", "inputs": ["last_action"], "dim": dim, "scale": 1.0, "clip": 1.0}


REACH_TERMS = [
    # the error vector, scaled up: the last 2 cm are what success is measured on
    {"name": "target_error", "op": "difference", "inputs": ["target_position", "ee_position"], "dim": 3,
     "scale": 5.0, "clip": 3.0},
]  # fmt: skip
OBJECT_TERMS = [
    {"name": "object_error", "op": "difference", "inputs": ["object_position", "ee_position"], "dim": 3,
     "scale": 5.0, "clip": 3.0},
    {"name": "goal_error", "op": "difference", "inputs": ["goal_position", "object_position"], "dim": 3,
     "scale": 3.0, "clip": 3.0},
    {"name": "object_position", "op": "identity", "inputs": ["object_position"], "dim": 3, "scale": 1.0, "clip": 2.0},
    {"name": "object_rotation", "op": "rotmat_from_quat_xyzw", "inputs": ["object_quaternion"], "dim": 9,
     "scale": 1.0, "clip": 1.0},
]  # fmt: skip

OBS_NOISE_STD = {
    "joint_position": 0.001,  # rad; encoders are better, this covers calibration
    "joint_velocity": 0.02,
    "object_position": 0.004,  # m; a tag / pose estimator's noise
    "object_quaternion": 0.01,
    "target_position": 0.0,  # the commanded goal is known exactly
    "goal_position": 0.004,
}

# Domain randomization: multipliers of nominal values unless noted.
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


@dataclass
class ReachRewards:
    distance: float = 1.0
    near: float = 1.0
    precision: float = 1.0
    action_rate: float = -0.02
    joint_velocity: float = -0.002


@dataclass
class PushRewards:
    reach: float = 0.5  # TCP to the point behind the object, on the far side from the pad
    push: float = 1.0
    near: float = 1.0
    success: float = 2.0
    action_rate: float = -0.02
    joint_velocity: float = -0.002
    drop: float = -10.0  # object knocked off the table (terminates)


@dataclass
class PickPlaceRewards:
    reach: float = 0.5
    grasp: float = 0.5
    lift: float = 1.0
    transport: float = 1.5
    place: float = 3.0
    release: float = 1.0
    action_rate: float = -0.02
    joint_velocity: float = -0.002
    drop: float = -10.0


@dataclass
class ArmTask(Task, ABC):
    """Shared machinery of the arm tasks; ArmReach, ArmPush and ArmPickPlace add goals and rewards."""

    action_mode: str = "ee_pose"
    instruction: str | None = None  # fix every episode's instruction (validated); None: sample from the grammar
    push_interval_s: float = 2.0
    push_joint_speed: float = 0.3  # rad/s kick on every arm joint
    # A fixed pool of scene layouts (object places, destinations, instruction), drawn per episode:
    # guidance queries a model once per layout, never per episode. 0: a fresh layout every episode.
    layouts: int = 0
    layout_seed: int = 0
    layout_jitter_m: float = 0.0  # object pose noise on top of a pooled layout
    reward: str = "dense"  # dense: the hand-designed terms; sparse: success (and the same penalties) only
    # Camera observations for the policy (off by default: state observations): a camera of the scene
    # ("front", "top", "wrist") rendered per world each control step as an image group "camera",
    # (n, C, size, size) floats: RGB in [0, 1] or depth in metres / 2 clipped to [0, 1].
    camera_obs: str | None = None
    camera_size: int = 48
    camera_kind: str = "rgb"
    ik: DiffIK = field(default_factory=DiffIK)

    model_path = MODEL_PATH
    control_dt = 0.04  # 25 Hz policy
    substeps = 10  # 4 ms physics
    robot = "panda_like"
    name = "arm"
    default_camera = "front"
    obs_terms: ClassVar[list[dict]] = []

    def __post_init__(self):
        if self.action_mode not in ACTION_SPECS:
            raise ValueError(f"unknown action_mode '{self.action_mode}' ({', '.join(ACTION_SPECS)})")
        spec = ACTION_SPECS[self.action_mode]
        self.num_actions = len(spec["names"])
        self.action_spec = spec
        self.act_offset = torch.tensor(spec["offset"], dtype=torch.float64)
        self.act_scale = torch.tensor(spec["scale"], dtype=torch.float64)
        self.act_low = torch.tensor(spec["low"], dtype=torch.float64)
        self.act_high = torch.tensor(spec["high"], dtype=torch.float64)
        self.obs_layout = _ARM_TERMS + self.obs_terms + [_last_action(self.num_actions)]
        if self.reward not in ("dense", "sparse"):
            raise ValueError(f"unknown reward '{self.reward}' (dense, sparse; keypoint rewards come from guidance)")
        self.fixed = parse_instruction(self.name, self.instruction) if self.instruction is not None else None
        if self.camera_obs is not None and self.camera_obs not in CAMERAS:
            raise ValueError(f"unknown camera '{self.camera_obs}' for camera_obs ({', '.join(CAMERAS)})")
        if self.camera_kind not in ("rgb", "depth"):
            raise ValueError(f"camera_kind must be 'rgb' or 'depth', got '{self.camera_kind}'")
        if not 8 <= self.camera_size <= 256:
            raise ValueError(f"camera_size must be within 8..256 pixels, got {self.camera_size}")

    integrators: ClassVar[list[dict]] = []  # arm policies need no integral terms

    @property
    def bundle_extra(self) -> dict:
        """What a deploy runtime needs beyond the observation layout: the IK that turns ee_* actions
        into joint targets (same DH table and damping), the start pose and the gripper mapping."""
        return {
            "ik": self.ik.spec(),  # joint mode too: the runtime integrates joint deltas within its limits
            "ik_orientation": {"ee_pose": "delta", "ee_position": "hold_start"}.get(self.action_mode, "none"),
            "default_joint_position": list(PANDA_Q_HOME),
            "gripper": {"command": "finger_m = 0.02 * (gripper + 1)", "fingers": 2, "open_m": FINGER_OPEN},
            "servo": "joint position targets q_des = IK(q_ref, action), integrated on the previous target: "
            "q_ref = q_measured + clip(q_des_prev - q_measured, +-ik.max_target_lead) (joint mode: "
            "q_des = q_ref + action); Franka joint impedance or ros2_control forward position controller",
        }

    # -- setup -----------------------------------------------------------------------------------
    def attach(self, backend, cfg, rng: torch.Generator) -> None:
        self.backend, self.cfg, self.rng = backend, cfg, rng
        n = self.n = backend.num_worlds
        self.dr = DR_LEVELS[cfg.randomization]
        m = backend.model
        ids = lambda kind, names: [m.__getattribute__(kind)(x).id for x in names]  # noqa: E731
        self.object_body = torch.tensor(ids("body", [body_name(*o) for o in OBJECTS]))
        self.object_geom = torch.tensor(ids("geom", [body_name(*o) for o in OBJECTS]))
        self.finger_geom = torch.tensor(ids("geom", ["left_finger", "right_finger"]))
        self.bowl_body = torch.tensor(ids("body", [body_name(*b) for b in BOWLS]))
        self.pad_body = torch.tensor(ids("body", [body_name(*p) for p in PADS]))
        self.target_site = m.site("target").id
        self.body_pos = backend.expand("body_pos")  # bowls and pads move per world
        self.site_pos = backend.expand("site_pos")
        self.site_rgba = backend.expand("site_rgba")
        self.nominal = {
            "mass": float(m.body_mass[self.object_body[0]]),
            "friction": torch.tensor(m.geom_friction[:, 0].copy()),
            "kp": torch.tensor(m.actuator_gainprm[:ARM_DOF + 2, 0].copy()),
        }  # fmt: skip
        self.mass_scale = torch.ones(n, dtype=torch.float64)
        self.friction_scale = torch.ones(n, dtype=torch.float64)
        self.kp_scale = torch.ones(n, dtype=torch.float64)
        self.latency = torch.zeros(n, dtype=torch.long)
        self.substep_index = torch.arange(self.substeps).unsqueeze(0)  # (1, substeps), against latency
        if self.dr:
            self.mass = backend.expand("body_mass")
            self.friction = backend.expand("geom_friction")
            self.gainprm = backend.expand("actuator_gainprm")
            self.biasprm = backend.expand("actuator_biasprm")
        self.action = torch.zeros(n, self.num_actions, dtype=torch.float64)
        self.prev_action = torch.zeros_like(self.action)
        self.prev_ctrl = torch.zeros(n, ARM_DOF + 2, dtype=torch.float64)
        self.rot_ref = torch.eye(3, dtype=torch.float64).repeat(n, 1, 1)  # held orientation (ee_position)
        self.obj_idx = torch.zeros(n, dtype=torch.long)  # which object the instruction names
        self.goal_idx = torch.zeros(n, dtype=torch.long)  # which marker colour / pad / bowl
        self.goal_pos = torch.zeros(n, 3, dtype=torch.float64)
        self.instructions: list[str] = [""] * n
        self.good_steps = torch.zeros(n, dtype=torch.long)  # consecutive steps meeting the success test
        self.dropped = torch.zeros(n, dtype=torch.bool)
        self.last_raw: dict[str, torch.Tensor] = {}
        self.layout_id = torch.full((n,), -1, dtype=torch.long)
        self.pool = self._make_pool(self.layouts) if self.layouts > 0 else None
        self.forced_layout: int | None = None  # guidance renders one pooled layout at a time
        self._update_kinematics()

    def _make_pool(self, count: int) -> dict[str, torch.Tensor]:
        """Layouts drawn once from their own seed, so every run (and every guidance cache) sees the same ones."""
        rng = torch.Generator().manual_seed(self.layout_seed)
        k = count
        dest = self._destinations()
        return {
            **dict(zip(("obj_xy", "dest_xy", "yaw"), self._random_layout(k, rng), strict=True)),
            "obj_idx": torch.randint(0, len(OBJECTS), (k,), generator=rng),
            "goal_idx": torch.randint(0, len(dest), (k,), generator=rng),
            "template": torch.randint(0, len(TEMPLATES[self.name]), (k,), generator=rng),
            "goal_u": torch.rand(k, 3, generator=rng, dtype=torch.float64),  # reach marker, in its box
        }

    def _destinations(self) -> list[tuple[str, str]]:
        return DESTINATIONS.get(self.name, [(c, "marker") for c in MARKERS])

    def _uniform(self, k: int, lo: float, hi: float, dims: int = 1) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(k, dims, generator=self.rng, dtype=torch.float64)

    # -- resets ----------------------------------------------------------------------------------
    def _randomize(self, ids: torch.Tensor) -> None:
        d, k = self.dr, len(ids)
        if not d:
            return
        self.mass_scale[ids] = self._uniform(k, *d["object_mass"])[:, 0]
        self.friction_scale[ids] = self._uniform(k, *d["friction"])[:, 0]
        self.kp_scale[ids] = self._uniform(k, *d["servo_kp"])[:, 0]
        wid = ids.unsqueeze(1)
        self.mass[wid, self.object_body] = self.nominal["mass"] * self.mass_scale[ids].unsqueeze(1)
        geoms = torch.cat([self.object_geom, self.finger_geom])
        self.friction[wid, geoms, 0] = self.nominal["friction"][geoms] * self.friction_scale[ids].unsqueeze(1)
        kp = self.nominal["kp"] * self.kp_scale[ids].unsqueeze(1)  # position servo: gain kp, bias -kp * q
        self.gainprm[wid, torch.arange(ARM_DOF + 2), 0] = kp
        self.biasprm[wid, torch.arange(ARM_DOF + 2), 1] = -kp
        if self.cfg.action_latency:
            lo, hi = d["latency_substeps"]
            self.latency[ids] = torch.randint(lo, hi + 1, (k,), generator=self.rng)
        self.backend.set_const(ids)

    @staticmethod
    def _random_layout(k: int, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Object xy (k, 4, 2) in the two near rows, destination xy (k, 2, 2) in the far row, object yaw (k, 4).

        Slots are 14-20 cm apart with +-2 cm jitter, so a 9.7 cm bowl never overlaps a cube and
        no rejection sampling is needed.
        """
        jitter = lambda *shape: -0.02 + 0.04 * torch.rand(*shape, generator=rng, dtype=torch.float64)  # noqa: E731
        ys = torch.tensor([-0.3, -0.1, 0.1, 0.3], dtype=torch.float64)
        near = torch.stack(torch.meshgrid(torch.tensor([0.36, 0.50], dtype=torch.float64), ys, indexing="ij"), -1)
        near = near.reshape(8, 2)
        pick = torch.argsort(torch.rand(k, 8, generator=rng), dim=1)[:, : len(OBJECTS)]
        obj_xy = near[pick] + jitter(k, len(OBJECTS), 2)
        far = torch.argsort(torch.rand(k, 4, generator=rng), dim=1)[:, :2]
        dest_xy = torch.stack([torch.full((k, 2), 0.68, dtype=torch.float64), ys[far]], -1) + jitter(k, 2, 2)
        yaw = (math.pi / 4) * (2 * torch.rand(k, len(OBJECTS), generator=rng, dtype=torch.float64) - 1)
        return obj_xy, dest_xy, yaw

    def _layout(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A fresh random layout per world, or one drawn from the pool (recorded in layout_id)."""
        if self.pool is None:
            return self._random_layout(len(ids), self.rng)
        pick = torch.randint(0, self.layouts, (len(ids),), generator=self.rng)
        if self.forced_layout is not None:
            pick[:] = self.forced_layout
        self.layout_id[ids] = pick
        obj_xy = self.pool["obj_xy"][pick].clone()
        if self.layout_jitter_m > 0:
            j = self.layout_jitter_m
            obj_xy += self._uniform(len(ids) * len(OBJECTS), -j, j, 2).reshape(len(ids), len(OBJECTS), 2)
        return obj_xy, self.pool["dest_xy"][pick], self.pool["yaw"][pick]

    def reset_worlds(self, ids: torch.Tensor) -> None:
        b, k = self.backend, len(ids)
        self._randomize(ids)
        noise = self.dr.get("start_joint_noise", 0.0)
        q0 = torch.tensor(PANDA_Q_HOME, dtype=torch.float64) + self._uniform(k, -noise, noise, ARM_DOF)
        b.qpos[ids, :ARM_DOF] = q0
        b.qpos[ids, FINGER_QPOS] = FINGER_OPEN
        b.qvel[ids] = 0.0
        b.ctrl[ids, :ARM_DOF] = q0
        b.ctrl[ids, ARM_DOF:] = FINGER_OPEN
        self.prev_ctrl[ids] = b.ctrl[ids]
        obj_xy, dest_xy, yaw = self._layout(ids)
        for j in range(len(OBJECTS)):
            b.qpos[ids, OBJ_QPOS0 + 7 * j : OBJ_QPOS0 + 7 * j + 2] = obj_xy[:, j]
            b.qpos[ids, OBJ_QPOS0 + 7 * j + 2] = TABLE_Z + OBJECT_HALF_HEIGHT
            quat = torch.stack([torch.cos(yaw[:, j] / 2), 0 * yaw[:, j], 0 * yaw[:, j], torch.sin(yaw[:, j] / 2)], 1)
            b.qpos[ids, OBJ_QPOS0 + 7 * j + 3 : OBJ_QPOS0 + 7 * j + 7] = quat
        self._sample_goal(ids, dest_xy)
        self.action[ids] = 0.0
        self.prev_action[ids] = 0.0
        self.good_steps[ids] = 0
        self.dropped[ids] = False
        self.rot_ref[ids] = forward_kinematics(q0).tcp[:, :3, :3]
        self._update_kinematics()
        self._refresh_raw(ids)

    def _choose(self, ids: torch.Tensor, dest: list) -> None:
        """Pick the named object and destination per world (or the fixed instruction's) and word it."""
        k = len(ids)
        if self.fixed is not None:
            names = [body_name(*o) for o in OBJECTS]
            self.obj_idx[ids] = names.index(self.fixed["object"]) if "object" in self.fixed else 0
            dnames = [body_name(*x) for x in dest]
            self.goal_idx[ids] = dnames.index(self.fixed.get("goal", self.fixed.get("target")))
            for i in ids.tolist():
                self.instructions[i] = self.instruction
            return
        templates = TEMPLATES[self.name]
        if self.pool is not None:
            pick = self.layout_id[ids]
            self.obj_idx[ids] = self.pool["obj_idx"][pick]
            self.goal_idx[ids] = self.pool["goal_idx"][pick]
            which = self.pool["template"][pick].tolist()
        else:
            self.obj_idx[ids] = torch.randint(0, len(OBJECTS), (k,), generator=self.rng)
            self.goal_idx[ids] = torch.randint(0, len(dest), (k,), generator=self.rng)
            which = torch.randint(0, len(templates), (k,), generator=self.rng).tolist()
        for i, t, o, g in zip(
            ids.tolist(), which, self.obj_idx[ids].tolist(), self.goal_idx[ids].tolist(), strict=True
        ):
            self.instructions[i] = self._wording(t, o, g)

    def _wording(self, template: int, obj: int, goal: int) -> str:
        obj_words, goal_words = " ".join(OBJECTS[obj]), " ".join(self._destinations()[goal])
        return TEMPLATES[self.name][template].format(object=obj_words, goal=goal_words, target=goal_words)

    def pool_identities(self) -> list[dict[str, str]]:
        """Instruction and named bodies of every pooled layout, without touching the running worlds."""
        p = self.pool
        texts = [self._wording(int(p["template"][j]), int(p["obj_idx"][j]), int(p["goal_idx"][j]))
                 for j in range(self.layouts)]  # fmt: skip
        return [{"instruction": text, **parse_instruction(self.name, text)} for text in texts]

    def identities(self, ids: torch.Tensor | None = None) -> list[dict[str, str]]:
        """Per world: the instruction and the body names it refers to (for reward and guidance code)."""
        ids = torch.arange(self.n) if ids is None else ids
        return [{"instruction": self.instructions[i], **parse_instruction(self.name, self.instructions[i])}
                for i in ids.tolist()]  # fmt: skip

    # -- stepping --------------------------------------------------------------------------------
    def command(self, a: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(self.act_offset + self.act_scale * a, self.act_high), self.act_low)

    def joint_targets(self, cmd: torch.Tensor) -> torch.Tensor:
        """Servo targets (n, 9): 7 joints from the IK (or joint deltas), then the two fingers.

        Commands integrate on the previous joint target (prev_ctrl), re-anchored to within
        ik.max_target_lead of the measured joints, so a command means the same displacement
        whatever the servo lag (DiffIK.reference)."""
        q = self.ik.reference(self.prev_ctrl[:, :ARM_DOF], self.backend.qpos[:, :ARM_DOF])
        if self.action_mode == "joint":
            q_des = torch.maximum(torch.minimum(q + cmd[:, :ARM_DOF], self.ik.q_high), self.ik.q_low)
        else:
            kin = forward_kinematics(q)
            rot = kin.tcp[:, :3, :3]
            if self.action_mode == "ee_pose":
                d_rot = cmd[:, 3:6]
            else:  # hold the episode's start orientation
                d_rot = orientation_error(self.rot_ref, rot)
            q_des = self.ik.solve(q, kin, cmd[:, 0:3], d_rot)
        finger = 0.5 * FINGER_OPEN * (cmd[:, -1:] + 1.0)
        return torch.cat([q_des, finger, finger], dim=1)

    def apply_actions(self, actions: torch.Tensor) -> None:
        self.prev_action = self.action
        self.action = actions.to(torch.float64)
        self.apply_joint_targets(self.joint_targets(self.command(self.action)))

    def apply_joint_targets(self, target: torch.Tensor) -> None:
        """One control period of the servos holding joint position targets (n, 9): what a ros2_control
        forward position controller or Franka's joint impedance does with the command it last got."""
        # new targets reach the servos after `latency` substeps (bus + controller cycle): every substep's
        # controls are known now, so the period runs as one backend call
        arrived = (self.substep_index >= self.latency.unsqueeze(1)).unsqueeze(2)  # (n, substeps, 1)
        self.backend.step(self.substeps, ctrl=torch.where(arrived, target.unsqueeze(1), self.prev_ctrl.unsqueeze(1)))
        self.prev_ctrl = target
        self._update_status()
        self._refresh_raw(None)

    def interval_events(self, step: torch.Tensor) -> None:
        if not (self.cfg.pushes and self.dr):
            return
        every = int(self.push_interval_s / self.control_dt)
        due = ((step % every) == 0).nonzero().flatten()
        if due.numel():
            kick = self._uniform(len(due), -1.0, 1.0, ARM_DOF)
            self.backend.qvel[due, :ARM_DOF] += self.push_joint_speed * kick

    def _objects(self) -> torch.Tensor:
        return self.backend.qpos[:, OBJ_QPOS0:].reshape(self.n, len(OBJECTS), 7)

    def _update_status(self) -> None:
        """After a control step: kinematics, then the per-episode counters (drop, success streak)."""
        self._update_kinematics()
        self.dropped = self.dropped | (self.obj_pos[:, 2] < TABLE_Z - 0.05)
        self.good_steps = torch.where(self.success_now(), self.good_steps + 1, 0)

    def _update_kinematics(self) -> None:
        """TCP and the named object at the current state; idempotent, so resets may call it."""
        b = self.backend
        self.kin = forward_kinematics(b.qpos[:, :ARM_DOF])
        self.tcp_pos = self.kin.tcp[:, :3, 3]
        objs = self._objects()
        sel = objs[torch.arange(self.n), self.obj_idx]
        self.obj_pos, self.obj_quat = sel[:, :3], sel[:, 3:7]
        self.width = b.qpos[:, FINGER_QPOS].sum(dim=1)

    # -- observations ----------------------------------------------------------------------------
    def raw_state(self, noisy: bool, ids: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """State in the units and frames a real arm with object perception reports."""
        b = self.backend
        sel = slice(None) if ids is None else ids
        q = b.qpos[sel, :ARM_DOF].clone()
        obj_quat = self.obj_quat[sel]
        raw = {
            "joint_position": q,
            "joint_velocity": b.qvel[sel, :ARM_DOF].clone(),
            "gripper_width": self.width[sel].unsqueeze(1).clone(),
            "object_position": self.obj_pos[sel].clone(),
            "object_quaternion": torch.cat([obj_quat[:, 1:4], obj_quat[:, 0:1]], dim=1),  # ROS order xyzw
            "goal_position": self.goal_pos[sel].clone(),
            "target_position": self.goal_pos[sel].clone(),
            "last_action": self.action[sel].clone(),
        }
        if noisy:
            for key, std in OBS_NOISE_STD.items():
                if std > 0:
                    raw[key] = raw[key] + std * torch.randn(raw[key].shape, generator=self.rng, dtype=torch.float64)
        tcp = forward_kinematics(raw["joint_position"]).tcp  # the arm reports FK of its own encoders
        raw["ee_position"] = tcp[:, :3, 3].clone()
        raw["ee_quaternion"] = quat_xyzw_from_rotmat(tcp[:, :3, :3])
        return raw

    def _refresh_raw(self, ids: torch.Tensor | None) -> None:
        raw = self.raw_state(noisy=self.cfg.obs_noise, ids=ids)
        if ids is None or not self.last_raw:
            self.last_raw = raw if ids is None else self.raw_state(noisy=False)
            if ids is None:
                return
        for k, v in raw.items():
            self.last_raw[k][ids] = v

    def observations(self) -> dict[str, torch.Tensor]:
        policy = build_observation(self.obs_layout, self.last_raw)
        clean = build_observation(self.obs_layout, self.raw_state(noisy=False))
        privileged = [
            clean,
            self.mass_scale.unsqueeze(1).float(),
            self.friction_scale.unsqueeze(1).float(),
            self.kp_scale.unsqueeze(1).float(),
            (self.latency.unsqueeze(1).double() / 5).float(),
        ]
        out = {"policy": policy, "critic": torch.cat(privileged, dim=1)}
        if self.camera_obs is not None:
            out["camera"] = self.camera_images()
        return out

    def camera_images(self) -> torch.Tensor:
        """(n, C, size, size) float32 images of every world from camera_obs (one render per world)."""
        size, b = self.camera_size, self.backend
        imgs = [b.render(w, self.camera_obs, size, size, self.camera_kind) for w in range(self.n)]
        x = torch.from_numpy(np.stack(imgs))
        if self.camera_kind == "rgb":
            return x.permute(0, 3, 1, 2).float() / 255.0
        return (x.float() / 2.0).clamp(0.0, 1.0).unsqueeze(1)

    def _penalties(self, w) -> dict[str, torch.Tensor]:
        return {
            "action_rate": w.action_rate * ((self.action - self.prev_action) ** 2).sum(dim=1),
            "joint_velocity": w.joint_velocity * (self.backend.qvel[:, :ARM_DOF] ** 2).sum(dim=1),
        }

    def reward_terms(self) -> dict[str, torch.Tensor]:
        if self.reward == "dense":
            return self.dense_terms()
        w = self.rewards
        terms = {"success": getattr(w, "success", 1.0) * self.success_now().double(), **self._penalties(w)}
        if hasattr(w, "drop"):
            terms["drop"] = w.drop * self.dropped.double()
        return terms

    # -- per task --------------------------------------------------------------------------------
    @abstractmethod
    def dense_terms(self) -> dict[str, torch.Tensor]:
        """Each arm task defines its hand-designed dense reward."""

    @abstractmethod
    def _sample_goal(self, ids: torch.Tensor, dest_xy: torch.Tensor) -> None:
        """Each arm task defines it."""

    @abstractmethod
    def success_now(self) -> torch.Tensor:
        """Each arm task defines it."""

    @abstractmethod
    def goal_error(self) -> torch.Tensor:
        """Each arm task defines it."""

    def terminated(self) -> torch.Tensor:
        return self.dropped.clone()

    def episode_outcome(self, ids: torch.Tensor, time_outs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Success: the task's test held for the last success_hold_s of an episode that ran to its end."""
        hold = max(1, int(round(self.success_hold_s / self.control_dt)))
        success = time_outs[ids] & (self.good_steps[ids] >= hold) & ~self.dropped[ids]
        return {
            "success": success.double(),
            "crash": self.dropped[ids].double(),
            "position_error_m": self.goal_error()[ids].clone(),
        }

    def controller_state(self) -> list[torch.Tensor]:
        return [self.action, self.prev_ctrl, self.rot_ref, self.goal_pos, self.obj_idx, self.goal_idx, self.layout_id]


@dataclass
class ArmReach(ArmTask):
    """Bring the TCP to a marker drawn uniformly in a 0.5 x 0.6 x 0.4 m box in front of the robot."""

    target_low: tuple[float, float, float] = (0.25, -0.3, 0.1)
    target_high: tuple[float, float, float] = (0.75, 0.3, 0.5)
    success_radius: float = 0.02
    success_hold_s: float = 0.2
    rewards: ReachRewards = field(default_factory=ReachRewards)
    name = "arm_reach"
    obs_terms: ClassVar[list[dict]] = REACH_TERMS

    def _sample_goal(self, ids: torch.Tensor, dest_xy: torch.Tensor) -> None:
        self._choose(ids, [(c, "marker") for c in MARKERS])
        lo = torch.tensor(self.target_low, dtype=torch.float64)
        hi = torch.tensor(self.target_high, dtype=torch.float64)
        u = self.pool["goal_u"][self.layout_id[ids]] if self.pool is not None else None
        if u is None:
            u = torch.rand(len(ids), 3, generator=self.rng, dtype=torch.float64)
        self.goal_pos[ids] = lo + (hi - lo) * u
        self.site_pos[ids, self.target_site] = self.goal_pos[ids]
        rgba = torch.tensor(list(MARKERS.values()), dtype=torch.float64)
        self.site_rgba[ids, self.target_site] = rgba[self.goal_idx[ids]].float().to(self.site_rgba.dtype)
        # bowls and pads are not part of this task: park them beside the table
        self._park(ids)

    def _park(self, ids: torch.Tensor) -> None:
        wid = ids.unsqueeze(1)
        parked = torch.tensor([[-1.5, -1.0, 0.0], [-1.5, 1.0, 0.0]], dtype=torch.float64)
        self.body_pos[wid, self.bowl_body] = parked.to(self.body_pos.dtype)
        self.body_pos[wid, self.pad_body] = parked.to(self.body_pos.dtype) + torch.tensor([0.0, 0.0, -0.5])

    def goal_error(self) -> torch.Tensor:
        return (self.tcp_pos - self.goal_pos).norm(dim=1)

    def success_now(self) -> torch.Tensor:
        return self.goal_error() < self.success_radius

    def terminated(self) -> torch.Tensor:
        return torch.zeros(self.n, dtype=torch.bool)  # knocked objects do not matter when reaching

    def episode_outcome(self, ids: torch.Tensor, time_outs: torch.Tensor) -> dict[str, torch.Tensor]:
        out = super().episode_outcome(ids, time_outs)
        out["crash"] = torch.zeros(len(ids), dtype=torch.float64)
        hold = max(1, int(round(self.success_hold_s / self.control_dt)))
        out["success"] = (time_outs[ids] & (self.good_steps[ids] >= hold)).double()
        return out

    def dense_terms(self) -> dict[str, torch.Tensor]:
        w, d = self.rewards, self.goal_error()
        return {
            "distance": w.distance * torch.exp(-d / 0.3),
            "near": w.near * torch.exp(-d / 0.05),
            "precision": w.precision * torch.exp(-((d / 0.015) ** 2)),
            **self._penalties(w),
        }


@dataclass
class ArmPush(ArmTask):
    """Push the named object onto the named pad (centre within success_radius in the plane)."""

    success_radius: float = 0.04
    success_hold_s: float = 0.2
    # The short-push variant: the named pad sits push_distance_m = [lo, hi] beyond the named object,
    # straight away from the robot (+x), instead of in the far row; the other pad is left out.
    # Its distance is part of a pooled layout, measured from the layout's (unjittered) object place.
    push_distance_m: list[float] | None = None
    distractors: bool = True  # False: the objects not named rest on the floor, out of the way
    rewards: PushRewards = field(default_factory=PushRewards)
    name = "arm_push"
    obs_terms: ClassVar[list[dict]] = OBJECT_TERMS

    def __post_init__(self):
        super().__post_init__()
        if self.push_distance_m is not None:
            lo, hi = (float(x) for x in self.push_distance_m)
            if not 0.05 <= lo <= hi <= 0.3:
                raise ValueError(f"push_distance_m must be [lo, hi] within 0.05..0.3 m, got {self.push_distance_m}")

    def _sample_goal(self, ids: torch.Tensor, dest_xy: torch.Tensor) -> None:
        self._choose(ids, PADS)
        self.site_rgba[ids, self.target_site, 3] = 0.0  # the reach marker is not part of this task
        wid = ids.unsqueeze(1)
        if self.push_distance_m is not None:
            dest_xy = self._pad_ahead(ids)
        if not self.distractors:
            self._park_distractors(ids)
        self.body_pos[wid, self.pad_body, 0:2] = dest_xy.to(self.body_pos.dtype)
        self.body_pos[wid, self.pad_body, 2] = TABLE_Z
        self.body_pos[wid, self.bowl_body] = torch.tensor([-1.5, 0.0, -0.5], dtype=self.body_pos.dtype)
        chosen = dest_xy[torch.arange(len(ids)), self.goal_idx[ids]]
        self.goal_pos[ids] = torch.cat([chosen, torch.full((len(ids), 1), TABLE_Z + OBJECT_HALF_HEIGHT)], 1)

    def _pad_ahead(self, ids: torch.Tensor) -> torch.Tensor:
        """Pad places (k, 2, 2) of the short-push variant: the named one ahead of the named object
        (from the pool's layout when there is one, so pose noise stays noise), the other off the table."""
        k = len(ids)
        if self.pool is not None:
            pick = self.layout_id[ids]
            obj_xy = self.pool["obj_xy"][pick, self.obj_idx[ids]]
            u = self.pool["goal_u"][pick, :2]
        else:
            obj_xy = self._objects()[ids, self.obj_idx[ids], :2]
            u = torch.rand(k, 2, generator=self.rng, dtype=torch.float64)
        lo, hi = self.push_distance_m
        named = obj_xy + torch.stack([lo + (hi - lo) * u[:, 0], 0.04 * (u[:, 1] - 0.5)], dim=1)
        dest = torch.tensor([-1.5, 1.0], dtype=torch.float64).repeat(k, 2, 1)
        dest[torch.arange(k), self.goal_idx[ids]] = named
        return dest

    def _park_distractors(self, ids: torch.Tensor) -> None:
        """Rest every object the instruction does not name on the floor behind the robot."""
        b = self.backend
        for j in range(len(OBJECTS)):
            rows = ids[self.obj_idx[ids] != j]
            base = OBJ_QPOS0 + 7 * j
            b.qpos[rows, base : base + 3] = torch.tensor([-0.8, 0.3 * j - 0.45, -0.75 + OBJECT_HALF_HEIGHT],
                                                         dtype=b.qpos.dtype)  # fmt: skip

    def goal_error(self) -> torch.Tensor:
        return (self.obj_pos[:, :2] - self.goal_pos[:, :2]).norm(dim=1)

    def success_now(self) -> torch.Tensor:
        return (self.goal_error() < self.success_radius) & (self.obj_pos[:, 2] < TABLE_Z + 0.04)

    def dense_terms(self) -> dict[str, torch.Tensor]:
        w = self.rewards
        to_goal = self.goal_pos[:, :2] - self.obj_pos[:, :2]
        direction = to_goal / to_goal.norm(dim=1, keepdim=True).clamp(min=1e-6)
        behind = torch.cat([self.obj_pos[:, :2] - 0.05 * direction, self.obj_pos[:, 2:3]], dim=1)
        d_reach = (self.tcp_pos - behind).norm(dim=1)
        d = self.goal_error()
        return {
            "reach": w.reach * torch.exp(-d_reach / 0.1),
            "push": w.push * torch.exp(-d / 0.15),
            "near": w.near * torch.exp(-d / 0.03),
            "success": w.success * self.success_now().double(),
            **self._penalties(w),
            "drop": w.drop * self.dropped.double(),
        }


@dataclass
class ArmPickPlace(ArmTask):
    """Pick up the named object and leave it resting inside the named bowl."""

    success_radius: float = 0.06  # object centre from the bowl axis (inner radius 8.5 cm)
    success_hold_s: float = 0.2
    rewards: PickPlaceRewards = field(default_factory=PickPlaceRewards)
    name = "arm_pick_place"
    obs_terms: ClassVar[list[dict]] = OBJECT_TERMS

    def _sample_goal(self, ids: torch.Tensor, dest_xy: torch.Tensor) -> None:
        self._choose(ids, BOWLS)
        self.site_rgba[ids, self.target_site, 3] = 0.0  # the reach marker is not part of this task
        wid = ids.unsqueeze(1)
        self.body_pos[wid, self.bowl_body, 0:2] = dest_xy.to(self.body_pos.dtype)
        self.body_pos[wid, self.bowl_body, 2] = TABLE_Z
        self.body_pos[wid, self.pad_body] = torch.tensor([-1.5, 0.0, -0.5], dtype=self.body_pos.dtype)
        chosen = dest_xy[torch.arange(len(ids)), self.goal_idx[ids]]
        self.goal_pos[ids] = torch.cat([chosen, torch.full((len(ids), 1), TABLE_Z + 0.008 + OBJECT_HALF_HEIGHT)], 1)

    def goal_error(self) -> torch.Tensor:
        return (self.obj_pos - self.goal_pos).norm(dim=1)

    def in_bowl(self) -> torch.Tensor:
        xy = (self.obj_pos[:, :2] - self.goal_pos[:, :2]).norm(dim=1)
        return (xy < self.success_radius) & (self.obj_pos[:, 2] < TABLE_Z + 0.06)

    def success_now(self) -> torch.Tensor:
        return self.in_bowl()

    def dense_terms(self) -> dict[str, torch.Tensor]:
        w = self.rewards
        d_reach = (self.tcp_pos - self.obj_pos).norm(dim=1)
        closing = self.action[:, -1] < 0.0
        grasped = closing & (d_reach < 0.025) & (self.width > 0.035)
        height = ((self.obj_pos[:, 2] - TABLE_Z - OBJECT_HALF_HEIGHT) / 0.1).clamp(0.0, 1.0)
        above_goal = self.goal_pos + torch.tensor([0.0, 0.0, 0.12], dtype=torch.float64)
        lifted = (self.obj_pos[:, 2] > TABLE_Z + 0.05).double()
        inside = self.in_bowl().double()
        return {
            "reach": w.reach * torch.exp(-d_reach / 0.1),
            "grasp": w.grasp * grasped.double(),
            "lift": w.lift * grasped.double() * height,
            "transport": w.transport * lifted * torch.exp(-(self.obj_pos - above_goal).norm(dim=1) / 0.1),
            "place": w.place * inside,
            "release": w.release * inside * (self.width / (2 * FINGER_OPEN)),
            **self._penalties(w),
            "drop": w.drop * self.dropped.double(),
        }


__all__ = [
    "ArmReach",
    "ArmPush",
    "ArmPickPlace",
    "ACTION_SPECS",
    "DR_LEVELS",
    "OBJECTS",
    "BOWLS",
    "PADS",
    "MARKERS",
    "TEMPLATES",
    "parse_instruction",
]

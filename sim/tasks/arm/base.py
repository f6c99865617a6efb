"""ArmTask: what the arm tasks share (scene set-up, resets, the IK controller, observations, outcomes).

Every episode carries a natural-language instruction from a small grammar over object attributes
("put the red cube in the blue bowl") and the identities it names (body names, for reward,
segmentation and guidance code). Actions are end-effector deltas + gripper through batched
differential IK (sim.robots.diff_ik, computed from joint positions, so the deploy runtime can run
the same maths), or joint deltas + gripper. Observations are state by default and follow each
task's obs_layout, written into the policy bundle like the Crazyflie's.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from robot_conventions.options import NONNEG, NONNEG_INT, POSITIVE, SEED, Choice, Range, option
from sim.observation_layout import build_observation
from sim.robots.diff_ik import DiffIK, forward_kinematics, quat_xyzw_from_rotmat
from sim.tasks.arm.controller import ACTION_SPECS, deploy_spec, servo_targets
from sim.tasks.arm.instructions import TEMPLATES, destinations, parse_instruction, wording
from sim.tasks.arm.observations import ARM_TERMS, add_noise, last_action_term, render_images
from sim.tasks.arm.physical import load_fit, recentred_level
from sim.tasks.arm.randomize import DR_LEVELS, PhysicsRandomization, uniform
from sim.tasks.arm.scene import (
    ARM_DOF,
    BOWLS,
    CAMERAS,
    FINGER_OPEN,
    FINGER_QPOS,
    MODEL_PATH,
    OBJ_QPOS0,
    OBJECT_HALF_HEIGHT,
    OBJECTS,
    PADS,
    TABLE_Z,
    body_name,
    make_pool,
    object_quaternion,
    random_layout,
)
from sim.tasks.base import Controls, SceneView, Task, worlds_due


@dataclass
class ArmTask(Task):
    """Shared machinery of the arm tasks; ArmReach, ArmPush and ArmPickPlace add goals and rewards."""

    action_mode: str = "ee_pose"
    instruction: str | None = None  # fix every episode's instruction (validated); None: sample from the grammar
    push_interval_s: float = option(2.0, POSITIVE)
    push_joint_speed: float = option(0.3, NONNEG)  # rad/s kick on every arm joint
    # A fixed pool of scene layouts (object places, destinations, instruction), drawn per episode:
    # guidance queries a model once per layout, never per episode. 0: a fresh layout every episode.
    layouts: int = option(0, NONNEG_INT)
    layout_seed: int = option(0, SEED)
    layout_jitter_m: float = option(0.0, NONNEG)  # object pose noise on top of a pooled layout
    # dense: the hand-designed terms; sparse: success (and the same penalties) only
    reward: str = option("dense", Choice(("dense", "sparse")))
    # Camera observations for the policy (off by default: state observations): a camera of the scene
    # ("front", "top", "wrist") rendered per world each control step as an image group "camera",
    # (n, C, size, size) floats: RGB in [0, 1] or depth in metres / 2 clipped to [0, 1].
    camera_obs: str | None = None
    camera_size: int = option(48, Range(8, 256, integer=True))
    camera_kind: str = option("rgb", Choice(("rgb", "depth")))
    ik: DiffIK = field(default_factory=DiffIK)
    # A `robot-rl sysid` parameters file of the arm: randomization is centred on its fit (physical.recentred_level);
    # with randomization=none every world is the fitted arm. '' : the model's nominal values.
    sysid: str = ""

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
        self.device = torch.device("cpu")  # until attach: then the backend's, and these tensors move there
        self.act_offset = torch.tensor(spec["offset"], dtype=torch.float64, device=self.device)
        self.act_scale = torch.tensor(spec["scale"], dtype=torch.float64, device=self.device)
        self.act_low = torch.tensor(spec["low"], dtype=torch.float64, device=self.device)
        self.act_high = torch.tensor(spec["high"], dtype=torch.float64, device=self.device)
        self.obs_layout = ARM_TERMS + self.obs_terms + [last_action_term(self.num_actions)]
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
        """The IK, start pose and gripper mapping a deploy runtime repeats (controller.deploy_spec)."""
        return deploy_spec(self.ik, self.action_mode)

    # -- setup -----------------------------------------------------------------------------------
    def attach(self, backend, cfg, rng: torch.Generator) -> None:
        self.backend, self.cfg, self.rng = backend, cfg, rng
        self.device = dev = backend.device  # every tensor of the task lives on the backend's device
        self.act_offset, self.act_scale, self.act_low, self.act_high = (
            t.to(dev) for t in (self.act_offset, self.act_scale, self.act_low, self.act_high)
        )
        self.ik.to_device(dev)
        n = self.n = backend.num_worlds
        self.dr = DR_LEVELS[cfg.randomization]
        if self.sysid:
            self.dr = recentred_level(self.dr, load_fit(self.sysid))
        m = backend.model
        ids = lambda kind, names: [m.__getattribute__(kind)(x).id for x in names]  # noqa: E731
        self.object_body = torch.tensor(ids("body", [body_name(*o) for o in OBJECTS]), device=dev)
        self.object_geom = torch.tensor(ids("geom", [body_name(*o) for o in OBJECTS]), device=dev)
        self.finger_geom = torch.tensor(ids("geom", ["left_finger", "right_finger"]), device=dev)
        self.bowl_body = torch.tensor(ids("body", [body_name(*b) for b in BOWLS]), device=dev)
        self.pad_body = torch.tensor(ids("body", [body_name(*p) for p in PADS]), device=dev)
        self.target_site = m.site("target").id
        self.body_pos = backend.expand("body_pos")  # bowls and pads move per world
        self.site_pos = backend.expand("site_pos")
        self.site_rgba = backend.expand("site_rgba")
        geoms = torch.cat([self.object_geom, self.finger_geom])
        self.physics = PhysicsRandomization(backend, self.dr, self.object_body, geoms)
        self.substep_index = torch.arange(self.substeps, device=dev).unsqueeze(0)  # (1, substeps), against latency
        self.action = torch.zeros(n, self.num_actions, dtype=torch.float64, device=dev)
        self.prev_action = torch.zeros_like(self.action)
        self.prev_ctrl = torch.zeros(n, ARM_DOF + 2, dtype=torch.float64, device=dev)
        self.rot_ref = torch.eye(3, dtype=torch.float64, device=dev).repeat(n, 1, 1)  # held orientation (ee_position)
        self.obj_idx = torch.zeros(n, dtype=torch.long, device=dev)  # which object the instruction names
        self.goal_idx = torch.zeros(n, dtype=torch.long, device=dev)  # which marker colour / pad / bowl
        self.goal_pos = torch.zeros(n, 3, dtype=torch.float64, device=dev)
        self.instructions: list[str] = [""] * n
        self.good_steps = torch.zeros(n, dtype=torch.long, device=dev)  # consecutive steps meeting the success test
        self.dropped = torch.zeros(n, dtype=torch.bool, device=dev)
        self.last_raw: dict[str, torch.Tensor] = {}
        self.layout_id = torch.full((n,), -1, dtype=torch.long, device=dev)
        self.pool = self._make_pool(self.layouts) if self.layouts > 0 else None
        self.forced_layout: int | None = None  # guidance renders one pooled layout at a time
        self._update_kinematics()

    def _make_pool(self, count: int) -> dict[str, torch.Tensor]:
        return make_pool(
            count, self.layout_seed, len(self._destinations()), len(TEMPLATES[self.name]), device=self.device
        )

    def _destinations(self) -> list[tuple[str, str]]:
        return destinations(self.name)

    def _uniform(self, k: int, lo: float, hi: float, dims: int = 1) -> torch.Tensor:
        return uniform(self.rng, k, lo, hi, dims)

    # -- resets ----------------------------------------------------------------------------------
    def _layout(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A fresh random layout per world, or one drawn from the pool (recorded in layout_id)."""
        if self.pool is None:
            return random_layout(len(ids), self.rng)
        pick = torch.randint(0, self.layouts, (len(ids),), generator=self.rng, device=self.device)
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
        self.physics.draw(ids, self.rng, latency=self.cfg.action_latency)
        noise = self.dr.get("start_joint_noise", 0.0)
        q0 = self.ik.q_home + self._uniform(k, -noise, noise, ARM_DOF)
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
            b.qpos[ids, OBJ_QPOS0 + 7 * j + 3 : OBJ_QPOS0 + 7 * j + 7] = object_quaternion(yaw[:, j])
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
            self.obj_idx[ids] = torch.randint(0, len(OBJECTS), (k,), generator=self.rng, device=self.device)
            self.goal_idx[ids] = torch.randint(0, len(dest), (k,), generator=self.rng, device=self.device)
            which = torch.randint(0, len(templates), (k,), generator=self.rng, device=self.device).tolist()
        for i, t, o, g in zip(
            ids.tolist(), which, self.obj_idx[ids].tolist(), self.goal_idx[ids].tolist(), strict=True
        ):
            self.instructions[i] = self._wording(t, o, g)

    def _wording(self, template: int, obj: int, goal: int) -> str:
        return wording(self.name, template, obj, goal)

    def pool_identities(self) -> list[dict[str, str]]:
        """Instruction and named bodies of every pooled layout, without touching the running worlds."""
        p = self.pool
        texts = [
            self._wording(int(p["template"][j]), int(p["obj_idx"][j]), int(p["goal_idx"][j]))
            for j in range(self.layouts)
        ]
        return [{"instruction": text, **parse_instruction(self.name, text)} for text in texts]

    def identities(self, ids: torch.Tensor | None = None) -> list[dict[str, str]]:
        """Per world: the instruction and the body names it refers to (for reward and guidance code)."""
        ids = torch.arange(self.n, device=self.device) if ids is None else ids
        return [
            {"instruction": self.instructions[i], **parse_instruction(self.name, self.instructions[i])}
            for i in ids.tolist()
        ]

    # -- stepping --------------------------------------------------------------------------------
    def command(self, a: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(self.act_offset + self.act_scale * a, self.act_high), self.act_low)

    def joint_targets(self, cmd: torch.Tensor) -> torch.Tensor:
        """Servo targets (n, 9) of commands (n, num_actions), on the previous targets (controller.servo_targets)."""
        q = self.backend.qpos[:, :ARM_DOF]
        return servo_targets(self.ik, self.action_mode, self.prev_ctrl[:, :ARM_DOF], q, self.rot_ref, cmd)

    def controls(self, actions: torch.Tensor) -> Controls:
        self.prev_action = self.action
        self.action = actions.to(torch.float64)
        return self.joint_target_controls(self.joint_targets(self.command(self.action)))

    def joint_target_controls(self, target: torch.Tensor) -> Controls:
        """A control period of the servos holding joint position targets (n, 9): what a ros2_control
        forward position controller or Franka's joint impedance does with the command it last got."""
        # new targets reach the servos after `latency` substeps (bus + controller cycle): every substep's
        # controls are known now, so the period runs as one backend call
        arrived = (self.substep_index >= self.physics.latency.unsqueeze(1)).unsqueeze(2)  # (n, substeps, 1)
        schedule = torch.where(arrived, target.unsqueeze(1), self.prev_ctrl.unsqueeze(1))
        self.prev_ctrl = target
        return Controls(schedule=schedule)

    def after_physics(self) -> None:
        self._update_status()
        self._refresh_raw(None)

    def interval_events(self, step: torch.Tensor) -> None:
        due = worlds_due(step, self.push_interval_s, self.control_dt, bool(self.cfg.pushes and self.dr))
        if due.numel():
            kick = self._uniform(len(due), -1.0, 1.0, ARM_DOF)
            self.backend.qvel[due, :ARM_DOF] += self.push_joint_speed * kick

    def _objects(self) -> torch.Tensor:
        """(n, objects, 7) poses (position, quaternion wxyz): a view of qpos, so writes move the objects."""
        return self.backend.qpos[:, OBJ_QPOS0:].reshape(self.n, len(OBJECTS), 7)

    def scene_view(self) -> SceneView:
        """The objects' poses now (a view of the state, read-only by contract: guidance reads it every step,
        so no copy) and the task's destinations (reach: the markers)."""
        return SceneView(
            object_poses=self._objects(),
            objects=tuple(body_name(*o) for o in OBJECTS),
            destinations=tuple(body_name(*d) for d in self._destinations()),
            table_z=TABLE_Z,
            object_half_height=OBJECT_HALF_HEIGHT,
        )

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
        sel = objs[torch.arange(self.n, device=self.device), self.obj_idx]
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
            add_noise(raw, self.rng)
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
        out = {"policy": policy, "critic": torch.cat([clean, *self.physics.privileged()], dim=1)}
        if self.camera_obs is not None:
            out["camera"] = self.camera_images()
        return out

    def camera_images(self) -> torch.Tensor:
        """(n, C, size, size) float32 images of every world from camera_obs (one render per world)."""
        return render_images(self.backend, self.camera_obs, self.camera_size, self.camera_kind)

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

    def trace_position(self) -> torch.Tensor:
        """The gripper (TCP)'s position (see Task.trace_position)."""
        return self.tcp_pos

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

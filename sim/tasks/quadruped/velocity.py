"""Quadruped velocity tracking on a Go1-like robot (assets/quadruped/go1_like.xml), legged_gym style.

The policy gets a velocity command (vx, vy, yaw rate), drawn per episode and again every
command_resample_s, and outputs joint position targets around the home pose; position servos
(kp, kv, torque limited) run at 200 Hz, the policy at 50 Hz. Reward terms follow legged_gym
(Rudin et al., CoRL 2021) with its per-second weights. Terrain is flat by default; terrain="rough"
generates a heightfield of 8 x 8 m tiles (rows of x: difficulty levels, columns of y: terrain
types) with a terrain-level curriculum. Observations follow obs_layout, exported into the bundle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from robot_conventions.options import FINITE, NONNEG, NONNEG_INT, POS_INT, POSITIVE, SEED, Choice, Range, option
from sim.observation_layout import build_observation, quat_xyzw_to_rotmat, store_raw_rows, to_body
from sim.tasks.base import Controls, Task
from sim.tasks.quadruped.constants import (
    BODY_CONTACTS,
    DEFAULT_JOINT_POS,
    FEET,
    FLAT_SCENE,
    JOINT_HIGH,
    JOINT_LOW,
    JOINT_NAMES,
    SPAWN_HEIGHT,
    TORQUE_LIMIT,
)
from sim.tasks.quadruped.physical import load_fit, recentred_level
from sim.tasks.quadruped.terrain import (
    TERRAIN_BORDER,
    TERRAIN_TYPES,
    ground_height,
    make_terrain,
    next_levels,
    write_rough_scene,
)
from sim.tasks.quadruped.velocity_config import (
    COMMAND_NAMES,
    DR_LEVELS,
    OBS_NOISE_STD,
    RAW_INPUTS,
    RewardWeights,
    obs_layout,
)
from sim.tasks.quadruped.velocity_rewards import velocity_reward_terms


@dataclass
class QuadrupedVelocity(Task):
    action_mode: str = "joint_position"
    lin_vel_x: tuple[float, float] = option((-1.0, 1.0), Range(ordered=True))  # m/s
    lin_vel_y: tuple[float, float] = option((-0.5, 0.5), Range(ordered=True))
    yaw_rate: tuple[float, float] = option((-1.0, 1.0), Range(ordered=True))  # rad/s
    command_resample_s: float = option(10.0, NONNEG)  # a new command mid-episode (0: one per episode)
    min_command_speed: float = option(0.2, NONNEG)  # smaller planar commands become 0 (standing still is trained too)
    tracking_sigma: float = option(0.25, POSITIVE)  # (m/s)^2 in the tracking kernels exp(-err^2 / sigma)
    action_scale: tuple[float, float, float] = option((0.5, 1.0, 1.0), POSITIVE)  # rad/action: hip, thigh, calf
    observe_lin_vel: bool = True  # base velocity in the policy's input (needs the robot's state estimator)
    kp: float | None = option(None, Range(0, lo_open=True, optional=True))  # None: the model's 30 N m/rad
    kd: float | None = option(None, Range(0, optional=True))  # None: the model's 0.75 N m s/rad
    terrain: str = option("flat", Choice(("flat", "rough")))  # flat | rough
    terrain_levels: int = option(10, POS_INT)
    terrain_tile_m: float = option(8.0, POSITIVE)
    terrain_seed: int = option(0, SEED)
    max_init_level: int = option(4, NONNEG_INT)  # rough: levels start uniform in 0..max_init_level
    # success: ran to the time-out without falling, mean tracking errors below these (after settle_s of each command)
    success_lin_vel_error: float = option(0.25, POSITIVE)  # m/s
    success_yaw_rate_error: float = option(0.35, POSITIVE)  # rad/s
    settle_s: float = option(1.0, NONNEG)
    push_interval_s: float = option(8.0, POSITIVE)
    rewards: RewardWeights = option(factory=RewardWeights, rule=FINITE)
    # A `robot-rl sysid` parameters file of the quadruped: randomization is centred on its fit
    # (physical.recentred_level); with randomization=none every world is the fitted robot. '' : nominal.
    sysid: str = ""

    control_dt = 0.02  # 50 Hz policy
    substeps = 4  # 5 ms physics
    num_actions = 12
    robot = "go1_like"
    name = "quadruped_velocity"
    integrators: ClassVar[list[dict]] = []  # no integral terms
    default_camera = "track"

    def __post_init__(self):
        if self.action_mode != "joint_position":
            raise ValueError(f"quadruped_velocity takes joint_position actions, not '{self.action_mode}'")
        if self.terrain not in ("flat", "rough"):
            raise ValueError(f"terrain must be flat or rough, not '{self.terrain}'")
        scale = list(self.action_scale) * 4
        self.action_spec = {
            "names": [f"{j}_rad" for j in JOINT_NAMES],
            "offset": list(DEFAULT_JOINT_POS),
            "scale": scale,
            "low": list(JOINT_LOW),
            "high": list(JOINT_HIGH),
        }
        self.device = dev = torch.device("cpu")  # until attach: then the backend's, and these tensors move there
        self.act_offset = torch.tensor(DEFAULT_JOINT_POS, dtype=torch.float64, device=dev)
        self.act_scale = torch.tensor(scale, dtype=torch.float64, device=dev)
        self.act_low = torch.tensor(JOINT_LOW, dtype=torch.float64, device=dev)
        self.act_high = torch.tensor(JOINT_HIGH, dtype=torch.float64, device=dev)
        span = self.act_high - self.act_low
        self.soft_low, self.soft_high = self.act_low + 0.05 * span, self.act_high - 0.05 * span  # 90% soft limits
        self.obs_layout = obs_layout(self.observe_lin_vel)
        self.curriculum = False  # on_iteration (training only) turns the terrain curriculum on
        if self.terrain == "rough":
            self.heights = make_terrain(self.terrain_levels, self.terrain_tile_m, self.terrain_seed)
            tag = f"{self.terrain_levels}x{self.terrain_tile_m:g}_s{self.terrain_seed}"
            self.model_path = write_rough_scene(self.heights, tag)
        else:
            self.heights = None
            self.model_path = FLAT_SCENE

    def on_iteration(self, iteration: int) -> None:
        """Called by the trainer before each learning iteration: levels move only while training."""
        self.curriculum = True

    @property
    def bundle_extra(self) -> dict:
        """What a robot's controller needs beyond the observation layout: the servo law, gains and limits,
        and the raw inputs the layout reads (two of them constants)."""
        return {
            "joint_names": JOINT_NAMES,
            "default_joint_position": list(DEFAULT_JOINT_POS),
            "action_scale": list(self.act_scale.tolist()),
            "servo": {
                "law": "q_des = clip(default + action_scale * action, low, high); "
                "tau = clip(kp * (q_des - q) - kd * dq, -torque_limit, torque_limit), at >= 200 Hz",
                "kp": self.nominal_kp,
                "kd": self.nominal_kd,
                "torque_limit": list(TORQUE_LIMIT),
            },
            "command": {
                "names": COMMAND_NAMES,
                "low": [self.lin_vel_x[0], self.lin_vel_y[0], self.yaw_rate[0]],
                "high": [self.lin_vel_x[1], self.lin_vel_y[1], self.yaw_rate[1]],
            },
            "raw_inputs": dict(RAW_INPUTS),
            "raw_constants": {"gravity_direction": [0.0, 0.0, -1.0], "default_joint_position": list(DEFAULT_JOINT_POS)},
            "control_dt_s": self.control_dt,
        }

    # -- setup -----------------------------------------------------------------------------------
    def attach(self, backend, cfg, rng: torch.Generator) -> None:
        self.backend, self.cfg, self.rng = backend, cfg, rng
        self.device = dev = backend.device  # every tensor of the task lives on the backend's device
        moved = (self.act_offset, self.act_scale, self.act_low, self.act_high, self.soft_low, self.soft_high)
        self.act_offset, self.act_scale, self.act_low, self.act_high, self.soft_low, self.soft_high = (
            t.to(dev) for t in moved
        )
        n = self.n = backend.num_worlds
        self.dr = DR_LEVELS[cfg.randomization]
        if self.sysid:
            self.dr = recentred_level(self.dr, load_fit(self.sysid))
        m = backend.model
        self.trunk = m.body("trunk").id
        for f in ("sensordata", "actuator_force"):  # register now: a derived field is filled from the next call on
            backend.derived(f)
        kp0, kd0 = float(m.actuator_gainprm[0, 0]), float(-m.actuator_biasprm[0, 2])
        self.nominal_kp = float(self.kp) if self.kp is not None else kp0
        self.nominal_kd = float(self.kd) if self.kd is not None else kd0
        self.nominal = {"mass": float(m.body_mass[self.trunk]), "friction": float(m.geom_friction[0, 0])}
        self.gainprm = backend.expand("actuator_gainprm")
        self.biasprm = backend.expand("actuator_biasprm")
        self.friction_world = torch.ones(n, dtype=torch.float64, device=dev)
        self.added_mass = torch.zeros(n, dtype=torch.float64, device=dev)
        self.strength = torch.ones(n, 12, dtype=torch.float64, device=dev)
        self.apply_strength(torch.arange(n, device=dev))
        if self.dr:
            self.mass = backend.expand("body_mass")
            self.friction = backend.expand("geom_friction")
        self.latency = torch.zeros(n, dtype=torch.long, device=dev)
        self.substep_index = torch.arange(self.substeps, device=dev).unsqueeze(0)  # (1, substeps), against latency
        self.action = torch.zeros(n, 12, dtype=torch.float64, device=dev)
        self.prev_action = torch.zeros_like(self.action)
        self.target = self.act_offset.repeat(n, 1)  # joint targets the servos hold
        self.command = torch.zeros(n, 3, dtype=torch.float64, device=dev)
        self.last_qvel = torch.zeros(n, 12, dtype=torch.float64, device=dev)
        self.air_time = torch.zeros(n, 4, dtype=torch.float64, device=dev)
        self.last_contact = torch.zeros(n, 4, dtype=torch.bool, device=dev)
        self.fell = torch.zeros(n, dtype=torch.bool, device=dev)
        self.steps = torch.zeros(n, dtype=torch.long, device=dev)
        self.since_command = torch.zeros(n, dtype=torch.long, device=dev)
        # lin vel error, yaw rate error, counted steps
        self.err_sums = torch.zeros(n, 3, dtype=torch.float64, device=dev)
        self.drift = torch.zeros(n, 2, dtype=torch.float64, device=dev)  # world-frame displacement error, m
        self.pos_err = torch.zeros(n, dtype=torch.float64, device=dev)
        self.spawn = torch.zeros(n, 3, dtype=torch.float64, device=dev)
        self.cmd_distance = torch.zeros(n, dtype=torch.float64, device=dev)  # commanded planar distance this episode
        self.walked = torch.zeros(n, dtype=torch.float64, device=dev)  # planar distance from the spawn point
        self.level = torch.zeros(n, dtype=torch.long, device=dev)
        self.tile_type = torch.zeros(n, dtype=torch.long, device=dev)
        if self.heights is not None:
            self.height_map = torch.as_tensor(self.heights, device=dev)
            hi = min(self.max_init_level, self.terrain_levels - 1)
            self.level = torch.randint(0, hi + 1, (n,), generator=rng, device=dev)
        self.contacts = torch.zeros(n, 17, dtype=torch.float64, device=dev)
        # gravity's direction, world
        self.down = torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64, device=dev).expand(n, 3)
        self.touchdown = torch.zeros(n, 4, dtype=torch.bool, device=dev)
        self.step_air_time = torch.zeros(n, 4, dtype=torch.float64, device=dev)
        self.last_raw: dict[str, torch.Tensor] = {}

    def apply_strength(self, ids: torch.Tensor) -> None:
        """Position servos with kp, kv scaled by each motor's strength (tau = s (kp (q* - q) - kv dq))."""
        kp = self.nominal_kp * self.strength[ids]
        kd = self.nominal_kd * self.strength[ids]
        self.gainprm[ids, :, 0] = kp.to(self.gainprm.dtype)
        self.biasprm[ids, :, 1] = -kp.to(self.biasprm.dtype)
        self.biasprm[ids, :, 2] = -kd.to(self.biasprm.dtype)

    def _uniform(self, k: int, lo: float, hi: float, *shape: int) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(k, *shape, generator=self.rng, dtype=torch.float64, device=self.device)

    # -- resets ----------------------------------------------------------------------------------
    def _randomize(self, ids: torch.Tensor) -> None:
        d, k = self.dr, len(ids)
        if not d:
            return
        self.friction_world[ids] = self._uniform(k, *d["friction"])
        self.friction[ids, :, 0] = self.friction_world[ids].unsqueeze(1).to(self.friction.dtype)
        self.added_mass[ids] = self._uniform(k, *d["added_mass"])
        self.mass[ids, self.trunk] = self.nominal["mass"] + self.added_mass[ids]
        self.strength[ids] = self._uniform(k, *d["motor_strength"], 12)
        self.apply_strength(ids)
        if self.cfg.action_latency:
            lo, hi = d["latency_substeps"]
            self.latency[ids] = torch.randint(lo, hi + 1, (k,), generator=self.rng, device=self.device)
        self.backend.set_const(ids)  # masses changed

    def sample_commands(self, ids: torch.Tensor) -> None:
        k = len(ids)
        cmd = torch.stack(
            [self._uniform(k, *self.lin_vel_x), self._uniform(k, *self.lin_vel_y), self._uniform(k, *self.yaw_rate)],
            dim=1,
        )
        small = cmd[:, :2].norm(dim=1) < self.min_command_speed
        cmd[small, :2] = 0.0
        self.command[ids] = cmd
        self.since_command[ids] = 0

    def _update_levels(self, ids: torch.Tensor) -> None:
        """The terrain curriculum (terrain.next_levels) for the worlds that ran an episode."""
        ran = ids[self.steps[ids] > 0]
        if not ran.numel():
            return
        walked = self.walked[ran]  # from the last step: the backend has already reset these worlds' state
        self.level[ran] = next_levels(
            self.level[ran], walked, self.cmd_distance[ran], self.terrain_tile_m, self.terrain_levels, self.rng
        )

    def _spawn_points(self, ids: torch.Tensor) -> torch.Tensor:
        k = len(ids)
        if self.heights is None:
            return torch.zeros(k, 3, dtype=torch.float64, device=self.device)
        self.tile_type[ids] = torch.randint(0, len(TERRAIN_TYPES), (k,), generator=self.rng, device=self.device)
        xy = torch.stack([self.level[ids], self.tile_type[ids]], dim=1).double()
        xy = TERRAIN_BORDER + (xy + 0.5) * self.terrain_tile_m + self._uniform(k, -0.8, 0.8, 2)
        return torch.cat([xy, ground_height(self.height_map, xy).unsqueeze(1)], dim=1)

    def reset_worlds(self, ids: torch.Tensor) -> None:
        b, k, d = self.backend, len(ids), self.dr
        if self.heights is not None and self.curriculum:
            self._update_levels(ids)
        self._randomize(ids)
        self.sample_commands(ids)
        spawn = self._spawn_points(ids)
        self.spawn[ids] = spawn
        yaw = self._uniform(k, -math.pi, math.pi)
        b.qpos[ids, 0:2] = spawn[:, 0:2]
        b.qpos[ids, 2] = spawn[:, 2] + SPAWN_HEIGHT
        b.qpos[ids, 3:7] = torch.stack(
            [torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)], dim=1
        )
        q = self.act_offset.repeat(k, 1)
        b.qvel[ids] = 0.0
        if d:
            q = q + self._uniform(k, -d["start_joint_noise"], d["start_joint_noise"], 12)
            b.qvel[ids, 0:2] = self._uniform(k, -d["start_speed"], d["start_speed"], 2)
        b.qpos[ids, 7:] = q.clamp(self.act_low, self.act_high)
        self.target[ids] = self.act_offset
        b.ctrl[ids] = self.act_offset
        self.action[ids] = 0.0
        self.prev_action[ids] = 0.0
        self.last_qvel[ids] = b.qvel[ids, 6:]
        self.air_time[ids] = 0.0
        self.last_contact[ids] = False
        self.fell[ids] = False
        self.steps[ids] = 0
        self.err_sums[ids] = 0.0
        self.drift[ids] = 0.0
        self.pos_err[ids] = 0.0
        self.cmd_distance[ids] = 0.0
        self.walked[ids] = 0.0
        self.contacts[ids] = 0.0
        self._refresh_raw(ids)

    # -- stepping --------------------------------------------------------------------------------
    def joint_targets(self, a: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(self.act_offset + self.act_scale * a, self.act_high), self.act_low)

    def controls(self, actions: torch.Tensor) -> Controls:
        self.prev_action = self.action
        self.action = actions.to(torch.float64)
        return self.joint_target_controls(self.joint_targets(self.action))

    def set_joint_gains(self, kp: torch.Tensor, kd: torch.Tensor) -> None:
        """Per-joint servo gains (n, 12), scaled by the motors' strength: what a Go1's low-level command
        sets with each target (kp = 0 with kd > 0 is its damping mode)."""
        self.gainprm[:, :, 0] = (kp * self.strength).to(self.gainprm.dtype)
        self.biasprm[:, :, 1] = -(kp * self.strength).to(self.biasprm.dtype)
        self.biasprm[:, :, 2] = -(kd * self.strength).to(self.biasprm.dtype)

    def joint_target_controls(self, target: torch.Tensor) -> Controls:
        """A control period of the motors' PD loops toward joint targets (n, 12)."""
        self.last_qvel = self.backend.qvel[:, 6:].clone()
        # new targets reach the motors `latency` substeps late (bus and motor-driver cycle): every substep's
        # controls are known now, so the whole period runs as one backend call
        arrived = (self.substep_index >= self.latency.unsqueeze(1)).unsqueeze(2)  # (n, substeps, 1)
        schedule = torch.where(arrived, target.unsqueeze(1), self.target.unsqueeze(1))
        self.target = target
        return Controls(schedule=schedule)

    def after_physics(self) -> None:
        rot = self._attitude()  # one rotation for the status and the observation, both of this state
        self._update_status(rot)
        self._refresh_raw(None, rot)

    def interval_events(self, step: torch.Tensor) -> None:
        if self.command_resample_s > 0:
            every = int(round(self.command_resample_s / self.control_dt))
            due = ((step % every) == 0).nonzero().flatten()
            if due.numel():
                self.sample_commands(due)
        if not (self.cfg.pushes and self.dr):
            return
        every = int(round(self.push_interval_s / self.control_dt))
        due = ((step % every) == 0).nonzero().flatten()
        if due.numel():
            v = self.dr["push_speed"]
            self.backend.qvel[due, 0:2] += self._uniform(len(due), -v, v, 2)

    def _trunk_quaternion(self, ids: torch.Tensor | None = None) -> torch.Tensor:
        """The trunk's attitude in ROS order xyzw (MuJoCo's qpos holds wxyz)."""
        q = self.backend.qpos[slice(None) if ids is None else ids, 3:7]
        return torch.cat([q[:, 1:4], q[:, 0:1]], dim=1)

    def _attitude(self) -> torch.Tensor:
        """Body-to-world rotation of every trunk (n, 3, 3)."""
        return quat_xyzw_to_rotmat(self._trunk_quaternion())

    def _body_state(self, rot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Body-frame linear velocity, body-frame angular velocity, projected gravity (noise-free)."""
        b = self.backend
        lin = to_body(b.qvel[:, 0:3], rot)
        gravity = to_body(self.down, rot)
        return lin, b.qvel[:, 3:6], gravity  # MuJoCo's free-joint angular velocity is in the body frame

    def _update_status(self, rot: torch.Tensor) -> None:
        """After a control step: contacts, falls, air time and the tracking statistics; rot is _attitude()."""
        dt = self.control_dt
        self.steps += 1
        self.since_command += 1
        # contact sensors ("found" counts), from the start of the last substep
        self.contacts = self.backend.derived("sensordata")[:, :17].double()
        lin, ang, gravity = self._body_state(rot)
        self.lin_vel, self.ang_vel, self.gravity = lin, ang, gravity
        self.fell = (self.contacts[:, BODY_CONTACTS] > 0).any(dim=1) | (gravity[:, 2] > 0.0)  # or upside down
        lin_err = (self.command[:, :2] - lin[:, :2]).norm(dim=1)
        yaw_err = (self.command[:, 2] - ang[:, 2]).abs()
        settled = (self.since_command.double() * dt >= self.settle_s).double()
        self.err_sums += torch.stack([lin_err * settled, yaw_err * settled, settled], dim=1)
        # how far the robot is from where perfect tracking (in its own heading) would have put it
        yaw = _yaw(self.backend.qpos[:, 3:7])
        cos, sin = torch.cos(yaw), torch.sin(yaw)
        e = self.command[:, :2] - lin[:, :2]
        self.drift += dt * torch.stack([cos * e[:, 0] - sin * e[:, 1], sin * e[:, 0] + cos * e[:, 1]], dim=1)
        self.pos_err = self.drift.norm(dim=1)
        self.cmd_distance += dt * self.command[:, :2].norm(dim=1)
        self.walked = (self.backend.qpos[:, 0:2] - self.spawn[:, 0:2]).norm(dim=1)
        # feet air time (legged_gym): a step's air time is scored at its touchdown
        contact = self.contacts[:, FEET] > 0
        touch = contact | self.last_contact  # a foot can lose the ground for a substep on a bounce
        self.last_contact = contact
        self.touchdown = (self.air_time > 0) & touch
        self.air_time += dt
        self.step_air_time = self.air_time * self.touchdown
        self.air_time = self.air_time * ~touch

    # -- observations and rewards ----------------------------------------------------------------
    def raw_state(
        self, noisy: bool, ids: torch.Tensor | None = None, rot: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Robot state in the units and frames a Go1's low-level state and estimator report.

        rot: the trunk's rotation matrices of these worlds when the caller has them (_attitude()).
        """
        b = self.backend
        sel = slice(None) if ids is None else ids
        quat = self._trunk_quaternion(ids)
        if rot is None:
            rot = quat_xyzw_to_rotmat(quat)
        k = quat.shape[0]
        raw = {
            "base_linear_velocity": to_body(b.qvel[sel, 0:3], rot),
            "angular_velocity": b.qvel[sel, 3:6].clone(),
            "quaternion": quat,
            "gravity_direction": torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64, device=self.device).repeat(k, 1),
            "command": self.command[sel].clone(),
            "joint_position": b.qpos[sel, 7:].clone(),
            "default_joint_position": self.act_offset.repeat(k, 1),
            "joint_velocity": b.qvel[sel, 6:].clone(),
            "last_action": self.action[sel].clone(),
        }
        if noisy:
            for key, std in OBS_NOISE_STD.items():
                noise = torch.randn(raw[key].shape, generator=self.rng, dtype=torch.float64, device=self.device)
                raw[key] = raw[key] + std * noise
        return raw

    def _refresh_raw(self, ids: torch.Tensor | None, rot: torch.Tensor | None = None) -> None:
        raw = self.raw_state(noisy=self.cfg.obs_noise, ids=ids, rot=rot)
        self.last_raw = store_raw_rows(self.last_raw, raw, ids, self.n)

    def observations(self) -> dict[str, torch.Tensor]:
        policy = build_observation(self.obs_layout, self.last_raw)
        rot = self._attitude()  # after this step's resets
        clean_raw = self.raw_state(noisy=False, rot=rot)
        clean = build_observation(self.obs_layout, clean_raw, rotations={"quaternion": rot})
        b = self.backend
        privileged = [
            clean,
            (clean_raw["base_linear_velocity"] * 2.0).clamp(-5, 5).float(),  # also when the policy lacks it
            (self.contacts[:, FEET] > 0).float(),
            self.friction_world.unsqueeze(1).float(),
            self.added_mass.unsqueeze(1).float(),
            self.strength.mean(dim=1, keepdim=True).float(),
            (self.latency.unsqueeze(1).double() / 3).float(),
            ((b.qpos[:, 2] - self.spawn[:, 2]) / SPAWN_HEIGHT).unsqueeze(1).clamp(-3, 3).float(),
        ]
        return {"policy": policy, "critic": torch.cat(privileged, dim=1)}

    def reward_terms(self) -> dict[str, torch.Tensor]:
        return velocity_reward_terms(self)

    def trace_position(self) -> torch.Tensor:
        """The trunk's position (see Task.trace_position)."""
        return self.backend.qpos[:, 0:3]

    def terminated(self) -> torch.Tensor:
        return self.fell.clone()

    def episode_outcome(self, ids: torch.Tensor, time_outs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Success: the episode ran to its time-out without a fall and the mean tracking errors (over steps at
        least settle_s after each command) stayed below success_lin_vel_error and success_yaw_rate_error."""
        counted = self.err_sums[ids, 2].clamp(min=1.0)
        lin_err = self.err_sums[ids, 0] / counted
        yaw_err = self.err_sums[ids, 1] / counted
        fell = self.fell[ids]
        success = (
            time_outs[ids] & ~fell & (lin_err < self.success_lin_vel_error) & (yaw_err < self.success_yaw_rate_error)
        )
        out = {
            "success": success.double(),
            "crash": fell.double(),
            "fall": fell.double(),
            "lin_vel_error": lin_err,
            "yaw_rate_error": yaw_err,
            "position_error_m": self.pos_err[ids].clone(),
        }
        if self.heights is not None:
            out["terrain_level"] = self.level[ids].double()
        return out

    def controller_state(self) -> list[torch.Tensor]:
        return [
            self.action,
            self.target,
            self.command,
            self.air_time,
            self.last_contact,
            self.level,
            self.err_sums,
            self.drift,
        ]


def _yaw(q_wxyz: torch.Tensor) -> torch.Tensor:
    w, x, y, z = q_wxyz.unbind(1)
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))

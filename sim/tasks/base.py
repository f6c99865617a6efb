"""The task contract: everything the env, the learners, export, SITL and guidance may call on a task.

A task owns what is physics- and robot-specific: state sampling, how actions drive the actuators,
observations, named reward terms, terminations and outcomes. `sim.env.BatchedEnv` owns what every task
shares: episodes, time-outs, resets and logging. Tensors are torch, float64 unless noted, one row per
world (n = the env's num_worlds); `ids` are world indices (long).

Every task subclasses `Task`. What only some tasks offer is an explicit capability with a default here
(None, empty or a no-op), never an attribute a caller probes for:

- `team`: a `TeamSpec` for tasks with several robots per world that share one policy (the swarm):
  then the task also keeps `drone_terms` (each robot's own reward terms, (n, robots) each, set by
  `reward_terms`) and `final_drone_outcome` (each robot's outcome of the worlds `episode_outcome` ended).
- `camera_obs`: the camera the policy reads images from (None: state observations only).
- `scene_view()`: a `SceneView` of the objects and destinations, for guidance that reasons about
  where things are (keypoints, plans); None for tasks without objects.
- `layouts`/`pool`: a fixed pool of scene layouts drawn per episode (0 / None: a fresh one each reset).
- `bundle_extra`: what a deploy runtime needs beyond the observation layout (e.g. an arm's IK).
- `teacher(name)`: a scripted expert's actions for imitation (raises ValueError where none exists).
- `on_iteration(i)`: told each learning iteration (curricula); evaluation never calls it.

Configuration: each family's options are the fields of its task dataclass (one schema); invalid values
raise ValueError in `__post_init__`, an option the task lacks is a TypeError from the constructor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch


@dataclass(frozen=True)
class TeamSpec:
    """Several robots per world, one shared policy: the policy observation is `robots` blocks of
    `per_robot_obs_dim` (robot-major) and the actions `robots` blocks of num_actions / robots."""

    robots: int
    per_robot_obs_dim: int


@dataclass(frozen=True, eq=False)  # eq=False: comparing tensors has no single truth value
class SceneView:
    """Where a task's objects are (at the time of the call) and where they may go, in the world frame (metres).

    Objects and destinations are named by their MuJoCo bodies ("red_cube", "blue_bowl"), the names an
    instruction's identities use; a reach task's destinations are its marker colours ("pink_marker"),
    one target site recoloured per episode."""

    object_poses: torch.Tensor  # (n, objects, 7): position, quaternion wxyz; a live view of the state: do not write
    objects: tuple[str, ...]  # the body of each object, in object_poses' order
    destinations: tuple[str, ...]  # the body of every place an object may go
    table_z: float  # height of the surface objects rest on
    object_half_height: float  # an object's centre rests this far above table_z


@dataclass(frozen=True)
class Controls:
    """A control period's actuator controls, which the env applies over the task's substeps (the decimation
    loop, sim.env.step_control_period). One of the fields is set, or none: the controls held as they are."""

    hold: torch.Tensor | None = None  # (n, nu): written once, held for every substep
    schedule: torch.Tensor | None = None  # (n, substeps, nu): row k written before substep k (latency)
    # an actuator model stepped in torch: the controls (n, nu) before substep k, from the state then
    per_substep: Callable[[int], torch.Tensor] | None = None
    # an actuator model stepped by MuJoCo: a control callback installed while the substeps run
    callback: AbstractContextManager | None = None


class Task(ABC):
    """Base of every task; the class attributes below are the contract's fixed part."""

    # identity and timing (each task sets these)
    name: ClassVar[str]
    robot: ClassVar[str]
    model_path: Path | str
    control_dt: ClassVar[float]  # seconds per policy step
    substeps: ClassVar[int]  # physics steps per policy step
    num_actions: int  # in policy space [-1, 1]
    action_mode: str
    action_spec: dict  # names, offset, scale, low, high: the actuator command = offset + scale * action

    # what export and the deploy runtime read
    obs_layout: list[dict] = []  # the policy observation's terms in order ({"name", "dim", ...})
    integrators: ClassVar[list[dict]] = []  # integral terms the runtime keeps (see robot_rl.deploy)
    default_camera: ClassVar[str | int] = -1  # the camera videos use (-1: MuJoCo's free camera)

    # capabilities (see the module docstring)
    team: TeamSpec | None = None
    camera_obs: str | None = None
    layouts: int = 0
    pool: dict[str, torch.Tensor] | None = None

    @property
    def bundle_extra(self) -> dict:
        return {}

    def scene_view(self) -> SceneView | None:
        return None

    TEACHERS: ClassVar[tuple[str, ...]] = ()  # the scripted experts teacher() knows, the default first

    def teacher(self, name: str) -> torch.Tensor:
        """(n, num_actions) of the named scripted expert in policy action units [-1, 1]."""
        raise ValueError(f"task '{self.name}' has no teacher '{name}'")

    def on_iteration(self, iteration: int) -> None:  # noqa: B027 - a capability whose default is a no-op
        """Learning progress, once per iteration; tasks with a curriculum override it."""

    # the per-step interface BatchedEnv calls, in this order -----------------------------------------
    @abstractmethod
    def attach(self, backend, cfg, rng: torch.Generator) -> None:
        """Once: the physics backend (n worlds), the EnvConfig and the env's random generator."""

    @abstractmethod
    def reset_worlds(self, ids: torch.Tensor) -> None:
        """Sample new episodes for these worlds (the backend has reset them to the model's default)."""

    @abstractmethod
    def controls(self, actions: torch.Tensor) -> Controls:
        """(n, num_actions) in [-1, 1]: this control period's actuator controls (the env steps the physics)."""

    @abstractmethod
    def after_physics(self) -> None:
        """After the period's substeps: kinematics, per-episode status, the cached raw state."""

    @abstractmethod
    def interval_events(self, step: torch.Tensor) -> None:
        """After physics, with each world's episode step: pushes, goal changes, sensor updates."""

    @abstractmethod
    def observations(self) -> dict[str, torch.Tensor]:
        """{"policy": (n, obs_dim), "critic": (n, critic_dim), ...}, float32."""

    @abstractmethod
    def reward_terms(self) -> dict[str, torch.Tensor]:
        """Named, weighted terms (n,) each; the env adds them in order."""

    @abstractmethod
    def terminated(self) -> torch.Tensor:
        """(n,) bool: episodes that ended by failure or success (time-outs are the env's)."""

    @abstractmethod
    def episode_outcome(self, ids: torch.Tensor, time_outs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Metrics of the episodes ending now (before their worlds reset): success, errors, ..."""

    def trace_position(self) -> torch.Tensor | None:
        """(n, 3) position (m, world frame; an arm's base frame) of what the task moves (a drone, a trunk, the
        gripper), recorded along a few evaluation episodes for the dashboard's trajectory plots; None: none."""
        return None

    @abstractmethod
    def controller_state(self) -> list[torch.Tensor]:
        """Every tensor of internal state (filters, firmware, targets) that a state hash must cover."""


def worlds_due(step: torch.Tensor, period_s: float, control_dt: float, enabled: bool = True) -> torch.Tensor:
    """Indices of the worlds whose episode step (n,) falls on a multiple of period_s (pushes): none unless
    enabled."""
    if not enabled:
        return step.new_empty(0)
    every = int(period_s / control_dt)
    return ((step % every) == 0).nonzero().flatten()

"""The plan controller of a plan-guided policy, at deployment: numpy only, the geometry of training.

A plan-guided policy (`guidance=plan`) learned a residual on top of a controller that follows a plan: subgoals
(reach, grasp, lift, transport, place, release, push), each with affordance options on the object the plan
moves or on its destination. Its bundle carries the controller's settings and the plans of the run's layouts
(policy.yaml's `plan` section, covered by the bundle's integrity hash); this executor runs them on what a robot
perceives: `ee_position` and `gripper_width` (the arm's own FK and fingers), `object_position` (the object the
plan moves) and `goal_position` (its destination). Each control step:

1. `observe`: book-keeping of the last step (subgoal achieved? its time budget spent?) on the new state, then
   the plan features the policy observes (raw input `plan_features`);
2. `action`: the plan's action (a proportional TCP step toward the current subgoal's waypoint, the gripper
   command) plus the policy's residual, `clip(base_gain * a_plan + residual_scale * a_policy, -1, 1)`.

Geometry, checks and features are robot_conventions.plan_geometry's, the functions the training env calls.
What differs from training, by design: the controller reads perceived positions (training's read the
simulator's), and options are tried in the order the bundle lists them, the next one after a subgoal's time
budget runs out (training's online correction chose them; export lists each subgoal's options best first, by
what it learned). Batched over n robots, so one executor also drives a simulator's many worlds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_conventions import plan_geometry as geometry

PERCEIVED = ("ee_position", "gripper_width", "object_position", "goal_position")
PLAN_FEATURES_INPUT = "plan_features"  # the raw-state input the bundle's observation layout reads the features from


class PlanSpecError(ValueError):
    """A plan section or plan that the executor cannot run; the message says why in one line."""


@dataclass(frozen=True)
class CompiledPlan:
    """One plan as arrays: per subgoal its skill and option count; per subgoal x option (padded to the widest
    subgoal) the point, extra height, whether the approach is from the top and whether the option's body is the
    destination (else the object the plan moves)."""

    skill: np.ndarray  # (S,) int
    n_opt: np.ndarray  # (S,) int
    point: np.ndarray  # (S, O) int
    height: np.ndarray  # (S, O) m
    from_top: np.ndarray  # (S, O) bool
    on_destination: np.ndarray  # (S, O) bool


def compile_plan(plan: dict, where: str = "plan") -> CompiledPlan:
    """A plan dict ({"target_object", "destination", "subgoals": [{"skill", "options": [{"object", "point",
    "approach", "height_m"}]}]}) as arrays; PlanSpecError names what is wrong."""
    try:
        moved, dest = str(plan["target_object"]), str(plan["destination"])
        subgoals = list(plan["subgoals"])
    except (KeyError, TypeError) as e:
        missing = f"{type(e).__name__}: {e}"
        raise PlanSpecError(f"{where}: needs target_object, destination and subgoals ({missing})") from None
    if not subgoals:
        raise PlanSpecError(f"{where}: no subgoals")
    width = max(len(sg.get("options") or []) if isinstance(sg, dict) else 0 for sg in subgoals)
    shape = (len(subgoals), max(width, 1))
    out = CompiledPlan(
        skill=np.zeros(shape[0], dtype=np.int64),
        n_opt=np.zeros(shape[0], dtype=np.int64),
        point=np.zeros(shape, dtype=np.int64),
        height=np.zeros(shape),
        from_top=np.zeros(shape, dtype=bool),
        on_destination=np.zeros(shape, dtype=bool),
    )
    for s, sg in enumerate(subgoals):
        at = f"{where}: subgoal {s}"
        if not isinstance(sg, dict) or sg.get("skill") not in geometry.SKILLS:
            skill = sg.get("skill") if isinstance(sg, dict) else sg
            raise PlanSpecError(f"{at}: skill {skill!r} is not one of {', '.join(geometry.SKILLS)}")
        options = sg.get("options") or []
        if not options:
            raise PlanSpecError(f"{at}: no options")
        out.skill[s] = geometry.SKILLS.index(sg["skill"])
        out.n_opt[s] = len(options)
        for o, a in enumerate(options):
            body = a.get("object") if isinstance(a, dict) else None
            if body not in (moved, dest):
                raise PlanSpecError(
                    f"{at}, option {o}: object {body!r}: the robot perceives only the object it moves ({moved}) and "
                    f"the destination ({dest})"
                )
            point, approach = a.get("point", "center"), a.get("approach", "top")
            height = float(a.get("height_m", 0.0))
            if point not in geometry.POINTS or approach not in geometry.APPROACHES or not 0.0 <= height <= 0.3:
                raise PlanSpecError(f"{at}, option {o}: point {point!r}, approach {approach!r}, height {height}")
            out.point[s, o] = geometry.POINTS.index(point)
            out.height[s, o] = height
            out.from_top[s, o] = approach == "top"
            out.on_destination[s, o] = body == dest
    return out


@dataclass(frozen=True)
class PlanSpec:
    """policy.yaml's `plan` section: the controller's settings and the plans a robot may be given."""

    approach_gain: float  # fraction of the remaining TCP error commanded per step
    base_gain: float  # weight of the plan's action (the training schedule's value at the exported checkpoint)
    residual_scale: float  # weight of the policy's action (idem)
    timeout_steps: int  # control steps a subgoal may take before its next option is tried
    scale_xyz: tuple[float, float, float]  # the ee action's metres per unit action (x, y, z)
    table_z: float  # m: the table's height
    object_half_height: float  # m
    destination_offset: tuple[float, float, float]  # destination body - goal_position (m): where the geometry's
    # destination sits relative to the goal the robot perceives
    plans: tuple[dict, ...]  # plan dicts (compile_plan), index = plan_index

    @staticmethod
    def from_dict(d: dict) -> PlanSpec:
        try:
            spec = PlanSpec(
                approach_gain=float(d["approach_gain"]),
                base_gain=float(d["base_gain"]),
                residual_scale=float(d["residual_scale"]),
                timeout_steps=int(d["timeout_steps"]),
                scale_xyz=tuple(float(x) for x in d["scale_xyz"]),
                table_z=float(d["table_z"]),
                object_half_height=float(d["object_half_height"]),
                destination_offset=tuple(float(x) for x in d["destination_offset"]),
                plans=tuple(d["plans"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PlanSpecError(f"plan section malformed: {type(e).__name__}: {e}") from None
        numbers = [spec.approach_gain, spec.base_gain, spec.residual_scale, *spec.scale_xyz, spec.table_z]
        if len(spec.scale_xyz) != 3 or len(spec.destination_offset) != 3 or not np.all(np.isfinite(numbers)):
            raise PlanSpecError("plan section: scale_xyz and destination_offset take 3 finite values, gains finite")
        if spec.timeout_steps < 1 or min(spec.scale_xyz) <= 0 or not spec.plans:
            raise PlanSpecError("plan section: timeout_steps >= 1, scale_xyz > 0 and at least one plan")
        for i, plan in enumerate(spec.plans):
            compile_plan(plan, f"plan {i}")  # refuse a bad plan at load, not mid-flight
        return spec

    def to_dict(self) -> dict:
        return {
            "approach_gain": self.approach_gain,
            "base_gain": self.base_gain,
            "residual_scale": self.residual_scale,
            "timeout_steps": self.timeout_steps,
            "scale_xyz": list(self.scale_xyz),
            "table_z": self.table_z,
            "object_half_height": self.object_half_height,
            "destination_offset": list(self.destination_offset),
            "plans": list(self.plans),
        }


class PlanExecutor:
    """Follows each robot's plan (n robots, batched); see the module's docstring for the step order."""

    def __init__(self, spec: PlanSpec, n: int = 1) -> None:
        self.spec = spec
        self.plans = [compile_plan(p, f"plan {i}") for i, p in enumerate(spec.plans)]
        # every plan padded to the longest and widest, so each robot's row is one index (no loop over robots)
        self.n_sub = np.array([len(p.skill) for p in self.plans])
        subgoals = (len(self.plans), int(self.n_sub.max()))
        options = (*subgoals, max(p.point.shape[1] for p in self.plans))
        self.table = {k: np.zeros(subgoals, dtype=np.int64) for k in ("skill", "n_opt")}
        for k, dtype in (("point", np.int64), ("height", np.float64), ("from_top", bool), ("on_destination", bool)):
            self.table[k] = np.zeros(options, dtype=dtype)
        for i, p in enumerate(self.plans):
            for k in self.table:
                v = getattr(p, k)
                self.table[k][(i, *(slice(0, d) for d in v.shape))] = v
        self.surface = (spec.table_z, spec.object_half_height)
        self.n = n
        self.plan_index = np.zeros(n, dtype=np.int64)
        self.sub = np.zeros(n, dtype=np.int64)
        self.opt = np.zeros(n, dtype=np.int64)
        self.t_sub = np.zeros(n, dtype=np.int64)
        self.closed_steps = np.zeros(n, dtype=np.int64)
        self.grip = np.ones(n)
        self.target = np.zeros((n, 3))
        self.fresh = np.ones(n, dtype=bool)  # started, no step taken yet

    def start(self, robots: np.ndarray | None = None, plan_index: np.ndarray | int = 0) -> None:
        """Robots (indexes or a mask; None: all) begin an episode on plan `plan_index` (per robot or one for all)."""
        ids = np.arange(self.n) if robots is None else np.asarray(robots)
        if ids.dtype == bool:
            ids = np.flatnonzero(ids)
        index = np.broadcast_to(np.asarray(plan_index, dtype=np.int64), (self.n,))[ids]
        if np.any((index < 0) | (index >= len(self.plans))):
            raise ValueError(f"plan_index out of range: this bundle carries {len(self.plans)} plans")
        self.plan_index[ids] = index
        self.sub[ids] = 0
        self.opt[ids] = 0
        self.t_sub[ids] = 0
        self.closed_steps[ids] = 0
        self.fresh[ids] = True

    # -- state of the plans ---------------------------------------------------------------------------
    def _rows(self) -> dict[str, np.ndarray]:
        """Each robot's current subgoal and option as rows of its plan (a finished plan: its last subgoal's)."""
        p, n_sub = self.plan_index, self.n_sub[self.plan_index]
        s = np.minimum(self.sub, n_sub - 1)
        o = np.minimum(self.opt, self.table["n_opt"][p, s] - 1)
        rows = {k: v[p, s] if v.ndim == 2 else v[p, s, o] for k, v in self.table.items()}
        rows.update(active=self.sub < n_sub, last_skill=self.table["skill"][p, n_sub - 1], n_sub=n_sub)
        return rows

    def _perceived(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [k for k in PERCEIVED if k not in raw]
        if missing:
            raise ValueError(f"the plan controller needs {', '.join(missing)} in the raw state")
        got = {k: np.asarray(raw[k], dtype=np.float64).reshape(self.n, -1) for k in PERCEIVED}
        for k, v in got.items():
            if not np.all(np.isfinite(v)):
                raise ValueError(f"{k} is not finite")
        return {
            "tcp": got["ee_position"],
            "width": got["gripper_width"][:, 0],
            "moved": got["object_position"],
            "dest": got["goal_position"] + np.asarray(self.spec.destination_offset),
        }

    def _target(self, rows: dict, seen: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        centre = np.where(rows["on_destination"][:, None], seen["dest"], seen["moved"])
        return geometry.subgoal_target(
            rows["skill"],
            rows["point"],
            rows["height"],
            rows["from_top"],
            rows["active"],
            rows["last_skill"],
            centre,
            seen["moved"],
            seen["dest"],
            seen["tcp"],
            self.closed_steps,
            self.surface,
        )

    def _advance(self, seen: dict) -> None:
        """The last step's outcome on the new state: achieved subgoals advance (first option), a subgoal whose
        time budget ran out moves on to its next option."""
        rows = self._rows()
        self.closed_steps = np.where(self.grip < 0, self.closed_steps + 1, 0)
        self.t_sub += 1
        centre = np.where(rows["on_destination"][:, None], seen["dest"], seen["moved"])
        ach = geometry.subgoal_achieved(
            rows["skill"],
            rows["height"],
            rows["active"],
            seen["moved"],
            centre,
            self.target,
            seen["tcp"],
            seen["width"],
            self.closed_steps,
            self.surface,
        )
        late = (self.t_sub >= self.spec.timeout_steps) & rows["active"] & ~ach
        self.sub = self.sub + ach
        self.opt = np.where(ach, 0, np.where(late, (self.opt + 1) % rows["n_opt"], self.opt))
        restart = ach | late
        self.t_sub[restart] = 0
        self.closed_steps[restart] = 0

    # -- the control step ---------------------------------------------------------------------------------
    def observe(self, raw: dict[str, np.ndarray], advance: bool = True) -> np.ndarray:
        """The plan features (n, geometry.FEATURE_DIM) the policy observes now. advance=True (once per control
        step) first books the last step's outcome; advance=False only looks (logging, replay checks)."""
        seen = self._perceived(raw)
        if advance:
            stepped = ~self.fresh
            if stepped.any():
                keep = (self.sub.copy(), self.opt.copy(), self.t_sub.copy(), self.closed_steps.copy())
                self._advance(seen)
                for now, before in zip((self.sub, self.opt, self.t_sub, self.closed_steps), keep, strict=True):
                    now[self.fresh] = before[self.fresh]
            if self.fresh.any():  # an episode's first observation shows its first target
                target, grip, _ = self._target(self._rows(), seen)
                self.target[self.fresh], self.grip[self.fresh] = target[self.fresh], grip[self.fresh]
                self.fresh[:] = False
        rows = self._rows()
        return geometry.plan_features(
            rows["skill"], rows["active"], self.target, seen["tcp"], self.grip, self.sub / rows["n_sub"]
        )

    def action(self, raw: dict[str, np.ndarray], residual: np.ndarray) -> np.ndarray:
        """The action the arm takes (n, A), in the task's ee action space: the plan's step toward the current
        waypoint and its gripper command, plus residual_scale times the policy's residual (n, A), clipped."""
        seen = self._perceived(raw)
        residual = np.asarray(residual, dtype=np.float64).reshape(self.n, -1)
        self.target, self.grip, descend = self._target(self._rows(), seen)
        base = np.zeros_like(residual)
        spec = self.spec
        base[:, :3] = geometry.approach_step(seen["tcp"], self.target, descend, spec.approach_gain, spec.scale_xyz)
        base[:, -1] = self.grip
        return np.clip(spec.base_gain * base + spec.residual_scale * residual, -1.0, 1.0)

"""Plan-guided exploration (LLM-TALE, DECKARD): a plan's current subgoal steers the arm, RL learns a residual.

Per scene layout of the task's pool a planner (`llm` or `oracle`) gives a validated plan: subgoals
with affordance options. Each world follows its layout's plan: the current subgoal and its chosen
option give a TCP target and a gripper command; the applied action is

    a = clip(base_gain * a_base + k * a_rl, -1, 1)

with a_base a proportional step toward the target (in the task's ee action space) and a_rl the
policy's output. Subgoal checks advance the plan; a subgoal that is not achieved within its time
budget counts as a failure of its option. Options are chosen at each subgoal start by an
`OptionSelector` (a bandit over measured success, or LLM-TALE's value + decaying bonus rule);
after repeated failures the planner is asked again with the failure as feedback (bounded).
Per-layout `PlanVerifier`s record which subgoals were achieved (DECKARD). The plan state (progress,
skill, target relative to the TCP, gripper command) is appended to the observations.

Plan-guided policies need this controller at deployment too; bundles do not carry it yet.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tensordict import TensorDict

from robot_rl.guidance.keypoint_reward import body_point
from robot_rl.guidance.model_client import ModelClient, ModelConfig
from robot_rl.guidance.plan.option_selector import OptionSelector
from robot_rl.guidance.plan.planners import make_planner
from robot_rl.guidance.plan.scene import scene_from_identity
from robot_rl.guidance.plan.schema import MAX_SUBGOALS, POINTS, SKILLS, Plan
from robot_rl.guidance.plan.validation import validate_plan
from robot_rl.guidance.plan.verification import PlanVerifier
from robot_rl.guidance.plan.wrong_plans import inject_wrong_options
from sim.env import GuidanceHooks

log = logging.getLogger("robot_rl.guidance")

MAX_OPTIONS = 6
TABLE_Z, HALF = 0.0, 0.025  # table surface and object half height (sim/tasks/arm.py)
# Planar point offsets as coefficients of (d, d rotated +90 deg), d = unit direction body -> destination.
POINT_COEF = {"center": (0, 0), "top": (0, 0), "behind": (-1, 0), "front": (1, 0), "left": (0, 1), "right": (0, -1)}
CLEARANCE = 0.045  # m from an object's centre for side points: half size + finger clearance
# Pushing a 5 cm block with DR friction up to ~1.5 tips it over when the fingers meet its face high or off its
# centre line (measured: 51 of 57 plan-only failures with the earlier 0 / 1 cm / 1.5 cm settings were tipped or
# tumbled objects, most at high friction). So the fingers push low and start only when at that height and lined up.
PUSH_HEIGHT = -0.008  # m, TCP (fingertips) relative to the object's centre while pushing: 1.7 cm above the table
PUSH_HEIGHT_TOL = 0.004  # m: the push starts once the TCP is this close above PUSH_HEIGHT, not while descending
PUSH_LATERAL_TOL = 0.003  # m off the destination-object line: an off-centre contact spins the object on its edge
PUSH_DEPTH = 0.015  # m the push target leads the contact point at most: about 1 cm per step (0.26 m/s)
APPROACH_HEIGHT = 0.08  # m above a point that the controller comes down from (approach "top", re-acquiring a push)
APPROACH_RADIUS = 0.02  # m: horizontally this close to the point, it descends
K = {name: i for i, name in enumerate(SKILLS)}  # skill name -> index
POINT_COEF_T = torch.tensor([POINT_COEF[p] for p in POINTS], dtype=torch.float64)  # (points, 2)


@dataclass
class PlanGuidanceConfig:
    planner: str = "oracle"  # oracle | llm
    base_gain: float = 1.0  # weight of the plan-following action
    residual_scale: float = 0.25  # k: weight of the policy's residual (its exploration noise scales with it)
    approach_gain: float = 0.7  # fraction of the remaining TCP error commanded per step
    # Annealing: base_gain and residual_scale move linearly to their *_final values over anneal_env_steps
    # env steps of training, then hold (0: constant; None: that gain stays). By default the residual quietens
    # (0.25 -> 0.1): at a constant 0.25 the trained policy touched 80% and drifted back below it.
    base_gain_final: float | None = None
    residual_scale_final: float | None = 0.1
    anneal_env_steps: int = 737_280
    subgoal_timeout_s: float = 3.0
    rule: str = "bandit"  # bandit | value_bonus
    bonus: float = 1.0
    bonus_decay: float = 0.99
    replan_after: int = 200  # consecutive failures of every option at one subgoal before asking again
    max_replans: int = 2
    inject_wrong_option: bool = False  # add plausible wrong options to every layout's grasp (or push) subgoal
    wrong_options: int = 1  # how many (distinct) wrong options inject_wrong_option adds, each ahead of the right one
    # Experiments: the controller sees the object it moves displaced by this much (m, standard deviation per
    # horizontal axis, drawn per episode), as a biased pose estimate would place it; the policy sees the truth.
    object_pose_noise_m: float = 0.0
    # Affordance-level correction: > 0 gives the policy two more actions, a horizontal shift (up to this many
    # m, chosen at each subgoal's start and held through it) of the plan's estimate of the object it moves,
    # and adds that estimate's offset from the object as the policy observes it to the plan features. The
    # controller's decisions (lined up, push direction, going over) then rest on the corrected pose, which a
    # residual on the action alone cannot change.
    pose_correction_m: float = 0.0
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)

    def __post_init__(self):
        if self.planner not in ("oracle", "llm"):
            raise ValueError(f"unknown planner '{self.planner}' (oracle, llm)")
        if self.object_pose_noise_m < 0:
            raise ValueError(f"object_pose_noise_m must be >= 0, got {self.object_pose_noise_m}")
        if self.pose_correction_m < 0:
            raise ValueError(f"pose_correction_m must be >= 0, got {self.pose_correction_m}")
        if not 1 <= self.wrong_options < MAX_OPTIONS:
            raise ValueError(f"wrong_options must be in [1, {MAX_OPTIONS - 1}], got {self.wrong_options}")
        if self.anneal_env_steps < 0:
            raise ValueError(f"anneal_env_steps must be >= 0, got {self.anneal_env_steps}")

    def gains(self, env_steps: int) -> tuple[float, float]:
        """(base_gain, residual_scale) after env_steps of training."""
        f = min(1.0, env_steps / self.anneal_env_steps) if self.anneal_env_steps > 0 else 0.0
        b1 = self.base_gain if self.base_gain_final is None else self.base_gain_final
        k1 = self.residual_scale if self.residual_scale_final is None else self.residual_scale_final
        return self.base_gain + f * (b1 - self.base_gain), self.residual_scale + f * (k1 - self.residual_scale)


def plan_config(d: dict) -> PlanGuidanceConfig:
    """From the `guidance` config group; unknown keys are errors."""
    d = {k: v for k, v in d.items() if k != "name"}
    try:
        model = ModelConfig(**d.pop("model", {}))
        return PlanGuidanceConfig(**d, model=model)
    except TypeError as e:
        raise ValueError(f"guidance=plan: {e}") from None


class PlanGuidedEnv(GuidanceHooks):
    """A BatchedEnv whose actions are residuals on top of a plan-following controller."""

    learns_online = True  # option choices and plan corrections

    def __init__(self, env, cfg: PlanGuidanceConfig, client: ModelClient | None = None):
        task = env.task
        if task.pool is None:
            raise ValueError("planned exploration needs a layout pool: set task.params.layouts > 0")
        if task.action_mode not in ("ee_position", "ee_pose"):
            raise ValueError(f"planned exploration drives the TCP: action_mode ee_position or ee_pose, not "
                             f"{task.action_mode}")  # fmt: skip
        self.env, self.task, self.cfg = env, task, cfg
        if cfg.planner == "llm" and client is None:
            client = ModelClient(cfg.model)
        self.client = client
        self.planner = make_planner(cfg.planner, client)
        self.selector = OptionSelector(rule=cfg.rule, bonus=cfg.bonus, bonus_decay=cfg.bonus_decay, seed=cfg.seed,
                                       replan_after=cfg.replan_after, max_replans=cfg.max_replans)  # fmt: skip
        n, L = task.n, task.layouts
        self.timeout = max(1, int(round(cfg.subgoal_timeout_s / task.control_dt)))
        self.scale_xyz = task.act_scale[:3]
        # per layout x subgoal x option: skill, body, point, height; destination per layout
        self.n_sub = torch.zeros(L, dtype=torch.long)
        self.n_opt = torch.ones(L, MAX_SUBGOALS, dtype=torch.long)
        self.skill = torch.zeros(L, MAX_SUBGOALS, dtype=torch.long)
        self.body = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.long)
        self.point = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.long)
        self.height = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.float64)
        self.from_top = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.bool)
        self.dest = torch.zeros(L, dtype=torch.long)
        self.moved = torch.zeros(L, dtype=torch.long)  # the object the plan moves (grasped or pushed)
        self.plans: list[Plan] = []
        self.sources: list[str] = []
        self.scenes = []
        self.verifiers: list[PlanVerifier] = []
        self.requests = 0
        self.value_fn = None  # the learner sets it (critic values of observations) for rule value_bonus
        render = task.pool_identities()
        for layout, ident in enumerate(render):
            scene = scene_from_identity(task.name, ident)
            plan, answer = self.planner.plan(scene, task.layout_seed * 1000 + layout)
            if cfg.inject_wrong_option:  # where an affordance matters: the grasp (or the push)
                at = next((i for i, sg in enumerate(plan.subgoals) if sg.skill in ("grasp", "push")), 0)
                plan = inject_wrong_options(scene, plan, at, cfg.wrong_options)
            self.scenes.append(scene)
            self.sources.append(answer.source if answer is not None else "oracle")
            self._set_plan(layout, plan)
        self.requests = client.requests_made if client is not None else 0
        # per world
        self.sub = torch.zeros(n, dtype=torch.long)
        self.opt = torch.zeros(n, dtype=torch.long)
        self.t_sub = torch.zeros(n, dtype=torch.long)
        self.closed_steps = torch.zeros(n, dtype=torch.long)
        self.grip = torch.ones(n, dtype=torch.float64)
        self.target = torch.zeros(n, 3, dtype=torch.float64)
        self.descend = torch.zeros(n, dtype=torch.bool)  # the target is to be reached from above
        self.pose_error = torch.zeros(n, 3, dtype=torch.float64)  # the controller's error on the moved object
        self.correction = torch.zeros(n, 3, dtype=torch.float64)  # the policy's shift of that estimate (this subgoal)
        self.num_corrections = 2 if cfg.pose_correction_m > 0 else 0
        self.noise_gen = torch.Generator().manual_seed(cfg.seed + 7919)
        self.chosen = torch.full((n, MAX_SUBGOALS), -1, dtype=torch.long)  # option that achieved each subgoal
        self.steps = 0
        self.env_steps = 0  # training progress for the gain schedule; set_progress() on resume / evaluation
        self.achieved_total = torch.zeros(MAX_SUBGOALS, dtype=torch.long)
        self._start_worlds(torch.arange(n))

    # -- plans -----------------------------------------------------------------------------------
    def _set_plan(self, layout: int, plan: Plan) -> None:
        reasons = validate_plan(plan, self.scenes[layout])
        if reasons:
            raise ValueError(f"layout {layout}: invalid plan: {'; '.join(reasons)}")
        names = {self.task.backend.model.body(i).name: i for i in range(self.task.backend.model.nbody)}
        sgs = plan.subgoals[:MAX_SUBGOALS]
        self.n_sub[layout] = len(sgs)
        for s, sg in enumerate(sgs):
            self.skill[layout, s] = SKILLS.index(sg.skill)
            opts = sg.options[:MAX_OPTIONS]
            self.n_opt[layout, s] = len(opts)
            for o, a in enumerate(opts):
                self.body[layout, s, o] = names[a.object]
                self.point[layout, s, o] = POINTS.index(a.point)
                self.height[layout, s, o] = a.height_m
                self.from_top[layout, s, o] = a.approach == "top"
        scene = self.scenes[layout]
        self.dest[layout] = names[scene.destination]
        self.moved[layout] = names[scene.target_object]
        if layout < len(self.plans):
            self.plans[layout] = plan
            self.verifiers[layout] = PlanVerifier(plan)
        else:
            self.plans.append(plan)
            self.verifiers.append(PlanVerifier(plan))
        self.selector.set_plan(layout, [f"{sg.skill} {sg.options[0].object}" for sg in sgs])

    def _choose(self, ids: torch.Tensor) -> None:
        lay = self.task.layout_id
        values = self._option_values(ids) if self.cfg.rule == "value_bonus" and self.value_fn else None
        for k, i in enumerate(ids.tolist()):
            layout, s = int(lay[i]), int(self.sub[i])
            if s < int(self.n_sub[layout]):
                n = int(self.n_opt[layout, s])
                self.opt[i] = self.selector.choose(layout, s, n, None if values is None else values[k, :n].tolist())
        self.t_sub[ids] = 0
        self.closed_steps[ids] = 0

    @torch.no_grad()
    def _option_values(self, ids: torch.Tensor) -> torch.Tensor:
        """LLM-TALE: the critic's value of each option's goal, i.e. of the observation the world would
        see with that option chosen (k, MAX_OPTIONS)."""
        keep = self.opt.clone()
        out = torch.full((len(ids), MAX_OPTIONS), float("-inf"))
        lay = self.task.layout_id[ids]
        n_opt = self.n_opt[lay, self.sub[ids].clamp(max=MAX_SUBGOALS - 1)]
        for o in range(int(n_opt.max())):
            self.opt[ids] = torch.minimum(torch.full_like(ids, o), n_opt - 1)
            self.target, self.grip = self._subgoal_target()
            out[:, o] = self.value_fn(self.get_observations())[ids].reshape(-1).float()
        self.opt = keep
        self.target, self.grip = self._subgoal_target()
        return out

    def _start_worlds(self, ids: torch.Tensor) -> None:
        if self.cfg.object_pose_noise_m > 0:
            err = torch.randn(len(ids), 2, generator=self.noise_gen, dtype=torch.float64)
            self.pose_error[ids, :2] = self.cfg.object_pose_noise_m * err
        self.correction[ids] = 0.0
        self.sub[ids] = 0
        self.chosen[ids] = -1
        self._choose(ids)

    # -- the controller --------------------------------------------------------------------------
    def _subgoal_target(self) -> tuple[torch.Tensor, torch.Tensor]:
        """TCP target (n, 3) and gripper command (n,) of each world's current subgoal and option."""
        t = self.task
        lay = t.layout_id
        s = self.sub.clamp(max=MAX_SUBGOALS - 1)
        body = self.body[lay, s, self.opt]
        point = self.point[lay, s, self.opt]
        height = self.height[lay, s, self.opt]
        skill = self.skill[lay, s]
        zero = torch.zeros(t.n, 3, dtype=torch.float64)
        moved_body = self.moved[lay]
        estimate_error = self.pose_error + self.correction
        centre = body_point(t, body, zero) + (body == moved_body).double().unsqueeze(1) * estimate_error
        moved = body_point(t, moved_body, zero) + estimate_error
        dest = body_point(t, self.dest[lay], zero)
        d = dest[:, :2] - centre[:, :2]
        d = d / d.norm(dim=1, keepdim=True).clamp(min=1e-6)
        d_perp = torch.stack([-d[:, 1], d[:, 0]], dim=1)
        coef = POINT_COEF_T[point]
        planar = CLEARANCE * (coef[:, :1] * d + coef[:, 1:] * d_perp)
        at = centre + torch.cat([planar, (point == POINTS.index("top")).double().unsqueeze(1) * HALF], dim=1)
        at[:, 2] += height
        grip = torch.ones(t.n, dtype=torch.float64)  # open
        target = at.clone()
        holding = (skill == K["grasp"]) | (skill == K["lift"]) | (skill == K["transport"]) | (skill == K["place"])
        near = (t.tcp_pos - centre).norm(dim=1) < 0.015
        grip = torch.where(holding & ((skill != K["grasp"]) | near | (self.closed_steps > 0)), -1.0, grip)
        # lift: straight up over the held object; transport/place: the object over the destination
        lift = moved.clone()
        lift[:, 2] = TABLE_Z + HALF + height
        target = torch.where((skill == K["lift"]).unsqueeze(1), lift, target)
        over = torch.cat([centre[:, :2], (TABLE_Z + HALF + height).unsqueeze(1)], dim=1)
        carry = (skill == K["transport"]) | (skill == K["place"])
        target = torch.where(carry.unsqueeze(1), over, target)
        # push: stay on the line from the pad through the object; push into the object when lined up
        # behind it, otherwise go back to the point behind it first (a lateral contact spins it away)
        push_dir = centre[:, :2] - moved[:, :2]
        push_dir = push_dir / push_dir.norm(dim=1, keepdim=True).clamp(min=1e-6)
        behind = moved[:, :2] - CLEARANCE * push_dir
        rel = t.tcp_pos[:, :2] - behind
        along = (rel * push_dir).sum(dim=1, keepdim=True)
        lateral = (rel - along * push_dir).norm(dim=1)
        # lined up: fingers at the point behind the object or touching it; a TCP further along is on or
        # beyond the object and must go back around it (pushing from there drives it away from the pad)
        low = t.tcp_pos[:, 2] < moved[:, 2] + PUSH_HEIGHT + PUSH_HEIGHT_TOL
        lined_up = (lateral < PUSH_LATERAL_TOL) & (along.squeeze(1) > -0.03) & (along.squeeze(1) < 0.02) & low
        # lead by the object's remaining distance to the destination, at most PUSH_DEPTH: the push slows
        # down as the object arrives instead of shoving it past (a cube pushed at 0.5 m/s slides on)
        remaining = (centre[:, :2] - moved[:, :2]).norm(dim=1, keepdim=True)
        lead = remaining.clamp(max=PUSH_DEPTH)
        ahead = torch.where(lined_up.unsqueeze(1), behind + lead * push_dir, behind)
        push = torch.cat([ahead, moved[:, 2:3] + PUSH_HEIGHT], dim=1)
        target = torch.where((skill == K["push"]).unsqueeze(1), push, target)
        # closed fingers push; open ones straddle the object, so they close before coming down behind it
        pushing = (skill == K["push"]) | ((skill == K["reach"]) & (point == POINTS.index("behind")))
        grip = torch.where(pushing, -1.0, grip)
        release = t.tcp_pos + torch.tensor([0.0, 0.0, 0.01], dtype=torch.float64)
        target = torch.where((skill == K["release"]).unsqueeze(1), release, target)
        # plan finished: back straight up, fingers as they were (opening them beside the object nudges it)
        done = self.sub >= self.n_sub[lay]
        target = torch.where(done.unsqueeze(1), release, target)
        last = self.skill[lay, (self.n_sub[lay] - 1).clamp(min=0)]
        grip = torch.where(done, torch.where(last == K["push"], -1.0, 1.0), grip)
        from_top = self.from_top[lay, s, self.opt]
        beyond = along.squeeze(1) >= 0.02  # on the pad's side of the object's back: go over it
        self.descend = ((skill == K["reach"]) & from_top) | ((skill == K["push"]) & beyond)
        self.descend &= ~done
        return target, grip

    def _achieved(self) -> torch.Tensor:
        """Whether each world's current subgoal holds now."""
        t = self.task
        lay = t.layout_id
        s = self.sub.clamp(max=MAX_SUBGOALS - 1)
        skill = self.skill[lay, s]
        height = self.height[lay, s, self.opt]
        zero = torch.zeros(t.n, 3, dtype=torch.float64)
        obj = body_point(t, self.moved[lay], zero)
        centre = body_point(t, self.body[lay, s, self.opt], zero)
        holding = (t.width > 0.03) & (t.width < 0.056) & ((t.tcp_pos - obj).norm(dim=1) < 0.03)
        xy_err = (obj[:, :2] - centre[:, :2]).norm(dim=1)
        checks = {
            K["reach"]: (t.tcp_pos - self.target).norm(dim=1) < 0.02,
            K["grasp"]: holding & (self.closed_steps >= 5),
            K["lift"]: holding & (obj[:, 2] > TABLE_Z + HALF + 0.8 * height),
            K["transport"]: holding & (xy_err < 0.03),
            K["place"]: (xy_err < 0.04) & (obj[:, 2] < TABLE_Z + HALF + height + 0.02),
            K["release"]: t.width > 0.07,
            K["push"]: xy_err < 0.015,
        }
        out = torch.zeros(t.n, dtype=torch.bool)
        for k, v in checks.items():
            out |= (skill == k) & v
        return out & (self.sub < self.n_sub[lay])

    def waypoint(self) -> torch.Tensor:
        """Where the TCP heads now: the target, or for a target to be reached from above, first a point
        APPROACH_HEIGHT over it (rising in place while still low), descending once horizontally close.
        Sweeping in at table height knocks the object away before the fingers are behind it."""
        tcp, target = self.task.tcp_pos, self.target
        far = (target[:, :2] - tcp[:, :2]).norm(dim=1) > APPROACH_RADIUS
        above = target.clone()
        above[:, 2] += APPROACH_HEIGHT
        low = tcp[:, 2] < target[:, 2] + 0.5 * APPROACH_HEIGHT
        rise = torch.cat([tcp[:, :2], above[:, 2:]], dim=1)
        over = torch.where(low.unsqueeze(1), rise, above)
        return torch.where((self.descend & far).unsqueeze(1), over, target)

    def base_action(self) -> torch.Tensor:
        self.target, self.grip = self._subgoal_target()
        a = torch.zeros(self.task.n, self.task.num_actions, dtype=torch.float64)
        a[:, :3] = (self.cfg.approach_gain * (self.waypoint() - self.task.tcp_pos) / self.scale_xyz).clamp(-1.0, 1.0)
        a[:, -1] = self.grip
        return a

    # -- env interface ---------------------------------------------------------------------------
    def plan_features(self) -> torch.Tensor:
        lay = self.task.layout_id
        s = self.sub.clamp(max=MAX_SUBGOALS - 1)
        onehot = torch.nn.functional.one_hot(self.skill[lay, s], len(SKILLS)).double()
        onehot = onehot * (self.sub < self.n_sub[lay]).double().unsqueeze(1)
        rel = ((self.target - self.task.tcp_pos) / 0.3).clamp(-1.0, 1.0)
        progress = self.sub.double() / self.n_sub[lay].double().clamp(min=1)
        features = [rel, onehot, self.grip.unsqueeze(1), progress.unsqueeze(1)]
        if self.num_corrections:
            # the plan's own (uncorrected) estimate of the object it moves against the object as the policy
            # observes it (the task's raw state, with its noise), in units of the largest shift
            zero = torch.zeros(self.task.n, 3, dtype=torch.float64)
            estimate = body_point(self.task, self.moved[lay], zero) + self.pose_error
            seen = self.task.last_raw["object_position"]
            features.append(((estimate - seen) / self.cfg.pose_correction_m).clamp(-1.0, 1.0))
        return torch.cat(features, dim=1).float()

    @property
    def num_actions(self) -> int:
        return self.env.num_actions + self.num_corrections

    def get_observations(self) -> TensorDict:
        obs = self.env.get_observations()
        f = self.plan_features()
        return TensorDict({k: torch.cat([v, f], dim=1) for k, v in obs.items()}, batch_size=[self.num_envs])

    def reset(self) -> TensorDict:
        self.env.reset()
        self._start_worlds(torch.arange(self.num_envs))
        self.target, self.grip = self._subgoal_target()
        return self.get_observations()

    def step(self, actions: torch.Tensor):
        a_rl = torch.as_tensor(actions, dtype=torch.float64).reshape(self.num_envs, self.num_actions)
        if self.num_corrections:
            a_rl, shift = a_rl[:, : self.env.num_actions], a_rl[:, self.env.num_actions :]
            # taken at each subgoal's first step and held through it, like an option choice: a shift that
            # jittered with the exploration noise every step would flip the controller's decisions back and forth
            start = self.t_sub == 0
            self.correction[start, :2] = self.cfg.pose_correction_m * shift[start].clamp(-1.0, 1.0)
        base_gain, k = self.cfg.gains(self.env_steps)
        a = (base_gain * self.base_action() + k * a_rl).clamp(-1.0, 1.0)
        self.env_steps += self.num_envs
        lay_before = self.task.layout_id.clone()
        _, reward, dones, extras = self.env.step(a)
        self.steps += 1
        success = torch.zeros(self.num_envs, dtype=torch.bool)
        if "final" in extras:
            success[extras["final"]["ids"]] = extras["final"]["success"] > 0.5
        self._bookkeeping(dones, lay_before, success)
        extras.setdefault("episode", {})
        if extras["episode"]:
            extras["episode"]["plan_subgoals_achieved"] = self.achieved_total.sum().double()
        return self.get_observations(), reward, dones, extras

    def _bookkeeping(self, dones: torch.Tensor, lay_before: torch.Tensor, success: torch.Tensor) -> None:
        """Advance achieved subgoals, fail timed-out ones, close finished episodes (state already reset).

        The verifier records each subgoal as achieved or not; the option selector learns from
        outcomes: an option that timed out failed, an option whose subgoal was achieved is credited
        with the episode's success (a wrong affordance often shows only in a later subgoal)."""
        live = ~dones
        self.closed_steps = torch.where(self.grip < 0, self.closed_steps + 1, 0)
        self.t_sub += 1
        ach = self._achieved() & live
        late = (self.t_sub >= self.timeout) & live & (self.sub < self.n_sub[self.task.layout_id]) & ~ach
        ended = dones & (self.sub < self.n_sub[lay_before])  # episode ended mid-subgoal: a failure
        for i in ach.nonzero().flatten().tolist():
            self.verifiers[int(lay_before[i])].record(int(self.sub[i]), True, int(self.opt[i]))
            self.chosen[i, self.sub[i]] = self.opt[i]
            self.achieved_total[self.sub[i]] += 1
        for i in (late | ended).nonzero().flatten().tolist():
            layout, sub, opt = int(lay_before[i]), int(self.sub[i]), int(self.opt[i])
            self.verifiers[layout].record(sub, False, opt)
            self.selector.report(layout, sub, opt, False)
        for i in dones.nonzero().flatten().tolist():
            for sub, opt in enumerate(self.chosen[i].tolist()):
                if opt >= 0:
                    self.selector.report(int(lay_before[i]), sub, opt, bool(success[i]))
        self.sub = self.sub + ach.long()
        restart = ach | late
        if restart.any():
            self._choose(restart.nonzero().flatten())
        if dones.any():
            self._start_worlds(dones.nonzero().flatten())
        self._maybe_replan()

    def _maybe_replan(self) -> None:
        if self.cfg.planner != "llm":
            return
        for layout in range(self.task.layouts):
            feedback = self.selector.needs_replan(layout)
            if feedback is None:
                continue
            plan, answer = self.planner.plan(self.scenes[layout], self.task.layout_seed * 1000 + layout, feedback)
            log.info("layout %d re-planned after failures (%s): %s", layout, answer.source, feedback)
            self.selector.replanned(layout)
            self.sources[layout] = answer.source
            self._set_plan(layout, plan)
            worlds = (self.task.layout_id == layout).nonzero().flatten()
            self._start_worlds(worlds)

    # -- records ---------------------------------------------------------------------------------
    def summary(self) -> dict:
        base_gain, k = self.cfg.gains(self.env_steps)
        return {
            "planner": self.cfg.planner,
            "gains": {"env_steps": self.env_steps, "base_gain": base_gain, "residual_scale": k},
            "requests": self.client.requests_made if self.client is not None else 0,
            "layouts": [
                {
                    "layout": i,
                    "instruction": self.scenes[i].instruction,
                    "source": self.sources[i],
                    "plan": self.plans[i].model_dump(),
                    "option_probabilities": [
                        self.selector.probabilities(i, s, int(self.n_opt[i, s])) for s in range(int(self.n_sub[i]))
                    ],
                    "verification": self.verifiers[i].summary(),
                }
                for i in range(self.task.layouts)
            ],
            "option_history": self.selector.history,
            "replans": dict(self.selector.replans),
        }

    def guidance_state(self) -> dict:
        """What online correction has learned: option statistics, the current plans (re-plans included)
        and verification counts. Checkpoints carry it, so a resumed run or an evaluation continues from
        it instead of trying every option, wrong ones included, from scratch."""
        return {
            "selector": self.selector.state_dict(),
            "plans": [p.model_dump(mode="json") for p in self.plans],
            "sources": list(self.sources),
            "verifiers": [
                {"attempts": v.attempts, "achieved": v.achieved, "ema": v.ema, "option_counts": v.option_counts}
                for v in self.verifiers
            ],  # fmt: skip
        }

    def load_guidance_state(self, state: dict) -> None:
        if len(state["plans"]) != self.task.layouts:
            raise ValueError(f"guidance state holds {len(state['plans'])} layouts' plans; this task has "
                             f"{self.task.layouts} (task.params.layouts must match the checkpoint's run)")  # fmt: skip
        for layout, plan in enumerate(state["plans"]):
            self._set_plan(layout, Plan.model_validate(plan))  # validated against this scene again
            v, saved = self.verifiers[layout], state["verifiers"][layout]
            v.attempts, v.achieved, v.ema = list(saved["attempts"]), list(saved["achieved"]), list(saved["ema"])
            v.option_counts = [[list(c) for c in sg] for sg in saved["option_counts"]]
        self.selector.load_state_dict(state["selector"])
        self.sources = list(state["sources"])
        # worlds mid-episode keep their subgoal; an option index beyond a re-planned subgoal's options is clamped
        lay = self.task.layout_id.clamp(min=0)
        self.opt = torch.minimum(self.opt, self.n_opt[lay, self.sub.clamp(max=MAX_SUBGOALS - 1)] - 1)

    def set_progress(self, env_steps: int) -> None:
        """Place the gain schedule at a checkpoint's training progress (resumed training, evaluation)."""
        self.env_steps = int(env_steps)

    def save_guidance(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "plan.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.summary(), indent=1, default=float))
        tmp.replace(path)
        return path

    def __getattr__(self, name: str):
        return getattr(self.env, name)  # num_envs, num_actions, device, rng, max_episode_length, ...

"""PlanGuidedEnv: a plan's current subgoal steers the arm, RL learns a residual on top.

Per scene layout of the task's pool a planner (`llm` or `oracle`) gives a validated plan: subgoals
with affordance options. Each world follows its layout's plan: the current subgoal and its chosen
option give a TCP target and a gripper command (``subgoals``); the applied action is

    a = clip(base_gain * a_base + k * a_rl, -1, 1)

with a_base a proportional step toward the target (in the task's ee action space) and a_rl the
policy's output. Subgoal checks advance the plan; a subgoal that is not achieved within its time
budget counts as a failure of its option. Options are chosen at each subgoal start (``option_choice``);
after repeated failures the planner is asked again with the failure as feedback (``replanning``).
Per-layout `PlanVerifier`s record which subgoals were achieved (DECKARD). The plan state (progress,
skill, target relative to the TCP, gripper command) is appended to the observations.

With the wrapped env's final_observation on, ended episodes' final observations carry their plan features too
(taken before the reset), so the off-policy learners bootstrap time-outs here as on a plain env.

Plan-guided policies need this controller at deployment too: their bundles carry it (export.plan_export), and
the deploy runtime's plan executor runs it with the same geometry (robot_conventions.plan_geometry).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tensordict import TensorDict

from robot_conventions import plan_geometry as geometry
from robot_rl.guidance.keypoint_reward import body_point
from robot_rl.guidance.model_client import ModelClient
from robot_rl.guidance.plan.config import PlanGuidanceConfig
from robot_rl.guidance.plan.option_choice import choose_options, option_values
from robot_rl.guidance.plan.option_selector import OptionSelector
from robot_rl.guidance.plan.planners import make_planner
from robot_rl.guidance.plan.records import checkpoint_state, plan_summary, restore_checkpoint_state
from robot_rl.guidance.plan.replanning import replan
from robot_rl.guidance.plan.scene import Scene, scene_from_identity
from robot_rl.guidance.plan.schema import MAX_SUBGOALS, Plan
from robot_rl.guidance.plan.subgoals import PlanTables, subgoal_achieved, subgoal_target
from robot_rl.guidance.plan.validation import validate_plan
from robot_rl.guidance.plan.verification import PlanVerifier
from robot_rl.guidance.plan.wrong_plans import inject_wrong_options
from sim.env import EnvWrapper


class PlanGuidedEnv(EnvWrapper):
    """A BatchedEnv whose actions are residuals on top of a plan-following controller."""

    learns_online = True  # option choices and plan corrections

    def __init__(self, env, cfg: PlanGuidanceConfig, client: ModelClient | None = None) -> None:
        task = env.task
        if task.pool is None:
            raise ValueError("planned exploration needs a layout pool: set task.params.layouts > 0")
        if task.action_mode not in ("ee_position", "ee_pose"):
            raise ValueError(
                f"planned exploration drives the TCP: action_mode ee_position or ee_pose, not {task.action_mode}"
            )
        self.env, self.task, self.cfg = env, task, cfg
        if cfg.planner == "llm" and client is None:
            client = ModelClient(cfg.model)
        self.client = client
        self.planner = make_planner(cfg.planner, client)
        self.selector = OptionSelector(
            rule=cfg.rule,
            bonus=cfg.bonus,
            bonus_decay=cfg.bonus_decay,
            seed=cfg.seed,
            replan_after=cfg.replan_after,
            max_replans=cfg.max_replans,
        )
        n = task.n
        self.timeout = max(1, int(round(cfg.subgoal_timeout_s / task.control_dt)))
        self.scale_xyz = task.act_scale[:3].cpu().numpy()
        view = task.scene_view()
        self.surface = (view.table_z, view.object_half_height)
        self.tables = PlanTables(task.layouts)
        self.plans: list[Plan] = []
        self.sources: list[str] = []
        self.scenes: list[Scene] = []
        self.verifiers: list[PlanVerifier] = []
        self.requests = 0
        self.value_fn = None  # the learner sets it (critic values of observations) for rule value_bonus
        for layout, ident in enumerate(task.pool_identities()):
            scene = scene_from_identity(task.name, ident)
            plan, answer = self.planner.plan(scene, task.layout_seed * 1000 + layout)
            if cfg.inject_wrong_option:  # where an affordance matters: the grasp (or the push)
                at = next((i for i, sg in enumerate(plan.subgoals) if sg.skill in ("grasp", "push")), 0)
                plan = inject_wrong_options(scene, plan, at, cfg.wrong_options)
            self.scenes.append(scene)
            self.sources.append(answer.source if answer is not None else "oracle")
            self.set_plan(layout, plan)
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
        self.last_action: torch.Tensor | None = None  # the last step's applied action (step())
        self.env_steps = 0  # training progress for the gain schedule; set_progress() on resume / evaluation
        self.schedule_held = False  # set_progress(hold=True): evaluation, the gains stay the checkpoint's
        self.achieved_total = torch.zeros(MAX_SUBGOALS, dtype=torch.long)
        self._final_features: torch.Tensor | None = None  # the ended worlds' plan features (final observations)
        env.episode_end_hooks.append(self._keep_final_features)
        self._start_worlds(torch.arange(n))

    # -- the wrapped env's own ---------------------------------------------------------------------
    @property
    def gives_final_observation(self) -> bool:
        return self.env.gives_final_observation

    @property
    def num_envs(self) -> int:
        return self.env.num_envs

    @property
    def num_worlds(self) -> int:
        return self.env.num_worlds

    @property
    def device(self) -> torch.device:
        return self.env.device

    @property
    def rng(self) -> torch.Generator:
        return self.env.rng

    @property
    def max_episode_length(self) -> int:
        return self.env.max_episode_length

    @property
    def backend(self):
        return self.env.backend  # videos render it

    # -- plans and options -------------------------------------------------------------------------
    @property
    def n_opt(self) -> torch.Tensor:
        return self.tables.n_opt  # options per layout and subgoal

    @property
    def dest(self) -> torch.Tensor:
        return self.tables.dest  # destination body per layout

    @property
    def moved(self) -> torch.Tensor:
        return self.tables.moved  # the body each layout's plan moves (grasped or pushed)

    def set_plan(self, layout: int, plan: Plan) -> None:
        """Validate a plan against the layout's scene and make it the layout's plan (fresh verification)."""
        reasons = validate_plan(plan, self.scenes[layout])
        if reasons:
            raise ValueError(f"layout {layout}: invalid plan: {'; '.join(reasons)}")
        model = self.task.backend.model
        self.tables.set(layout, plan, self.scenes[layout], {model.body(i).name: i for i in range(model.nbody)})
        if layout < len(self.plans):
            self.plans[layout] = plan
            self.verifiers[layout] = PlanVerifier(plan)
        else:
            self.plans.append(plan)
            self.verifiers.append(PlanVerifier(plan))
        sgs = plan.subgoals[:MAX_SUBGOALS]
        self.selector.set_plan(layout, [f"{sg.skill} {sg.options[0].object}" for sg in sgs])

    def _choose(self, ids: torch.Tensor) -> None:
        """Start the current subgoal of the worlds in ids: pick its option, restart its clocks."""
        values = None
        if self.cfg.rule == "value_bonus" and self.value_fn:
            n_opt = self.tables.n_opt[self.task.layout_id[ids], self.sub[ids].clamp(max=MAX_SUBGOALS - 1)]
            values = option_values(ids, n_opt, self.opt, self._critic_values)
            self.refresh_target()
        choose_options(self.selector, self.tables, self.task.layout_id, self.sub, self.opt, ids, values)
        self.t_sub[ids] = 0
        self.closed_steps[ids] = 0

    def _critic_values(self) -> torch.Tensor:
        self.refresh_target()
        return self.value_fn(self.get_observations())

    def _start_worlds(self, ids: torch.Tensor) -> None:
        if self.cfg.object_pose_noise_m > 0:
            err = torch.randn(len(ids), 2, generator=self.noise_gen, dtype=torch.float64)
            self.pose_error[ids, :2] = self.cfg.object_pose_noise_m * err
        self.correction[ids] = 0.0
        self.sub[ids] = 0
        self.chosen[ids] = -1
        self._choose(ids)

    def _maybe_replan(self) -> None:
        if self.cfg.planner != "llm":
            return
        for layout in range(self.task.layouts):
            new = replan(self.selector, self.planner, self.scenes[layout], layout, self.task.layout_seed)
            if new is not None:
                plan, self.sources[layout] = new
                self.set_plan(layout, plan)
                self._start_worlds((self.task.layout_id == layout).nonzero().flatten())

    # -- the controller ----------------------------------------------------------------------------
    def _subgoal_target(self) -> tuple[torch.Tensor, torch.Tensor]:
        """TCP target (n, 3) and gripper command (n,) of each world's current subgoal and option; sets descend."""
        target, grip, self.descend = subgoal_target(
            self.task,
            self.tables,
            self.sub,
            self.opt,
            self.pose_error + self.correction,
            self.closed_steps,
            self.surface,
            self.cfg.perceived_state,
        )
        return target, grip

    def refresh_target(self) -> None:
        """Target, gripper command and descend of the current subgoals and options (after either changed)."""
        self.target, self.grip = self._subgoal_target()

    def tcp(self) -> torch.Tensor:
        """The TCP as the controller reads it (cfg.perceived_state: the FK of the measured joints)."""
        return self.task.last_raw["ee_position"] if self.cfg.perceived_state else self.task.tcp_pos

    def base_action(self) -> torch.Tensor:
        self.refresh_target()
        a = torch.zeros(self.task.n, self.task.num_actions, dtype=torch.float64)
        step = geometry.approach_step(
            self.tcp().numpy(), self.target.numpy(), self.descend.numpy(), self.cfg.approach_gain, self.scale_xyz
        )
        a[:, :3] = torch.from_numpy(step)
        a[:, -1] = self.grip
        return a

    # -- env interface -----------------------------------------------------------------------------
    def plan_features(self) -> torch.Tensor:
        lay = self.task.layout_id
        n_sub = self.tables.n_sub[lay]
        features = geometry.plan_features(
            self.tables.skill[lay, self.sub.clamp(max=MAX_SUBGOALS - 1)].numpy(),
            (self.sub < n_sub).numpy(),
            self.target.numpy(),
            self.tcp().numpy(),
            self.grip.numpy(),
            (self.sub.double() / n_sub.double().clamp(min=1)).numpy(),
        )
        features = [torch.from_numpy(features)]
        if self.num_corrections:
            # the plan's own (uncorrected) estimate of the object it moves against the object as the policy
            # observes it (the task's raw state, with its noise), in units of the largest shift
            zero = torch.zeros(self.task.n, 3, dtype=torch.float64)
            estimate = body_point(self.task, self.tables.moved[lay], zero) + self.pose_error
            seen = self.task.last_raw["object_position"]
            features.append(((estimate - seen) / self.cfg.pose_correction_m).clamp(-1.0, 1.0))
        return torch.cat(features, dim=1).float()

    @property
    def num_actions(self) -> int:
        return self.env.num_actions + self.num_corrections

    def _keep_final_features(self, ids: torch.Tensor) -> None:
        """The plan features of worlds whose episode just ended, taken with the env's final observation (the task
        state and the plan state still those of the ended episode)."""
        if self.env.gives_final_observation:
            self._final_features = self.plan_features()[ids]

    def get_observations(self) -> TensorDict:
        obs = self.env.get_observations()
        f = self.plan_features()
        return TensorDict({k: torch.cat([v, f], dim=1) for k, v in obs.items()}, batch_size=[self.num_envs])

    def reset(self) -> TensorDict:
        self.env.reset()
        self._start_worlds(torch.arange(self.num_envs))
        self.refresh_target()
        return self.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        a_rl = torch.as_tensor(actions, dtype=torch.float64).reshape(self.num_envs, self.num_actions)
        if self.num_corrections:
            a_rl, shift = a_rl[:, : self.env.num_actions], a_rl[:, self.env.num_actions :]
            # taken at each subgoal's first step and held through it, like an option choice: a shift that
            # jittered with the exploration noise every step would flip the controller's decisions back and forth
            start = self.t_sub == 0
            self.correction[start, :2] = self.cfg.pose_correction_m * shift[start].clamp(-1.0, 1.0)
        base_gain, k = self.cfg.gains(self.env_steps)
        a = (base_gain * self.base_action() + k * a_rl).clamp(-1.0, 1.0)
        self.last_action = a  # what the wrapped env took: a demonstration in its action space (robot-rl collect)
        if not self.schedule_held:
            self.env_steps += self.num_envs
        lay_before = self.task.layout_id.clone()
        _, reward, dones, extras = self.env.step(a)
        if "final_observation" in extras:
            f = self._final_features
            final = {k: torch.cat([v, f], dim=1) for k, v in extras["final_observation"].items()}
            extras = {**extras, "final_observation": final}
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
        ach = (
            subgoal_achieved(
                self.task,
                self.tables,
                self.sub,
                self.opt,
                self.target,
                self.closed_steps,
                self.surface,
                self.cfg.perceived_state,
            )
            & live
        )
        late = (self.t_sub >= self.timeout) & live & (self.sub < self.tables.n_sub[self.task.layout_id]) & ~ach
        ended = dones & (self.sub < self.tables.n_sub[lay_before])  # episode ended mid-subgoal: a failure
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
            started = dones.nonzero().flatten()
            self._start_worlds(started)
            # a new episode's first observation shows its own first target, as after reset() (and at deployment)
            target, grip = self._subgoal_target()
            self.target[started], self.grip[started] = target[started], grip[started]
        self._maybe_replan()

    # -- records (see records.py) -----------------------------------------------------------------
    def summary(self) -> dict:
        return plan_summary(self)

    def guidance_state(self) -> dict:
        """What online correction has learned (checkpoints carry it): see records.checkpoint_state."""
        return checkpoint_state(self)

    def load_guidance_state(self, state: dict) -> None:
        restore_checkpoint_state(self, state)

    def set_progress(self, env_steps: int, hold: bool = False) -> None:
        """Place the gain schedule at a checkpoint's training progress (resumed training, evaluation); hold=True
        keeps it there while the env steps (an evaluation acts with the checkpoint's gains, as its bundle does)."""
        self.env_steps = int(env_steps)
        self.schedule_held = hold

    def save_guidance(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "plan.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.summary(), indent=1, default=float))
        tmp.replace(path)
        return path

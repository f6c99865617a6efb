"""Settings of plan-guided exploration (the `guidance=plan` config group): PlanGuidanceConfig, plan_config."""

from __future__ import annotations

from dataclasses import dataclass, field

from robot_conventions.options import NONNEG, NONNEG_INT, POS_INT, POSITIVE, PROB, SEED, Choice, Range, option
from robot_rl.guidance.model_client import ModelConfig
from robot_rl.guidance.plan.schema import MAX_OPTIONS


@dataclass
class PlanGuidanceConfig:
    planner: str = option("oracle", Choice(("oracle", "llm")))  # oracle | llm
    base_gain: float = option(1.0, NONNEG)  # weight of the plan-following action
    # k: weight of the policy's residual (its exploration noise scales with it)
    residual_scale: float = option(0.25, NONNEG)
    # fraction of the remaining TCP error commanded per step
    approach_gain: float = option(0.7, Range(0, 1, lo_open=True))
    # Annealing: base_gain and residual_scale move linearly to their *_final values over anneal_env_steps
    # env steps of training, then hold (0: constant; None: that gain stays). By default the residual quietens
    # (0.25 -> 0.1): at a constant 0.25 the trained policy's success peaks at 80% and then falls.
    base_gain_final: float | None = option(None, Range(0, optional=True))
    residual_scale_final: float | None = option(0.1, Range(0, optional=True))
    anneal_env_steps: int = option(737_280, NONNEG_INT)
    subgoal_timeout_s: float = option(3.0, POSITIVE)
    rule: str = option("bandit", Choice(("bandit", "value_bonus")))  # bandit | value_bonus
    bonus: float = option(1.0, NONNEG)
    bonus_decay: float = option(0.99, PROB)
    replan_after: int = option(200, POS_INT)  # consecutive failures of every option at one subgoal before asking again
    max_replans: int = option(2, NONNEG_INT)
    inject_wrong_option: bool = False  # add plausible wrong options to every layout's grasp (or push) subgoal
    # how many (distinct) wrong options inject_wrong_option adds, each ahead of the right one
    wrong_options: int = option(1, POS_INT)
    # Experiments: the controller sees the object it moves displaced by this much (m, standard deviation per
    # horizontal axis, drawn per episode), as a biased pose estimate would place it; the policy sees the truth.
    object_pose_noise_m: float = option(0.0, NONNEG)
    # Affordance-level correction: > 0 gives the policy two more actions, a horizontal shift (up to this many
    # m, chosen at each subgoal's start and held through it) of the plan's estimate of the object it moves,
    # and adds that estimate's offset from the object as the policy observes it to the plan features. The
    # controller's decisions (lined up, push direction, going over) then rest on the corrected pose, which a
    # residual on the action alone cannot change.
    pose_correction_m: float = option(0.0, NONNEG)
    # The controller reads the robot's perceived state (the task's raw state with its sensor noise: the TCP from
    # the measured joints, the object's and the goal's reported positions), as the deploy runtime's plan executor
    # does, instead of the simulator's (false: the default until runs with it are measured).
    perceived_state: bool = False
    seed: int = option(0, SEED)
    model: ModelConfig = field(default_factory=ModelConfig)

    def __post_init__(self) -> None:
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

"""A plan-guided run's plan controller as a bundle's `plan` section (robot_rl.deploy.plan_executor runs it)."""

from __future__ import annotations

import torch

from robot_conventions.plan_geometry import FEATURE_DIM
from robot_rl.deploy.plan_executor import PLAN_FEATURES_INPUT, PlanSpec
from robot_rl.guidance.keypoint_reward import body_point
from robot_rl.guidance.plan.guided_env import PlanGuidedEnv

# the observation term a plan-guided bundle appends to its task's layout: the executor's features, as observed
PLAN_TERM = {"name": "plan", "op": "identity", "inputs": [PLAN_FEATURES_INPUT], "dim": FEATURE_DIM, "scale": 1.0,
             "clip": 1.0}  # fmt: skip


def plan_spec(env: PlanGuidedEnv) -> PlanSpec:
    """The controller of a plan-guided env (its gains at the loaded checkpoint's training progress) and the plans of
    its layouts, each subgoal's options ordered best first by the success rates online correction measured."""
    if env.num_corrections:
        raise ValueError(
            "this run corrects the plan's object estimate (guidance.pose_correction_m > 0), which the deploy-side "
            "plan executor does not do: it cannot be exported"
        )
    task = env.task
    base_gain, residual_scale = env.cfg.gains(env.env_steps)
    zero = torch.zeros(task.n, 3, dtype=torch.float64)
    dest = body_point(task, env.tables.dest[task.layout_id], zero)
    offset = (dest - task.goal_pos)[0]  # the destination body against the goal the robot perceives (constant)
    plans = []
    for layout, (plan, scene) in enumerate(zip(env.plans, env.scenes, strict=True)):
        subgoals = []
        for s, sg in enumerate(plan.subgoals):
            rates = env.selector.success_estimates(layout, s, len(sg.options))
            order = sorted(range(len(sg.options)), key=lambda o: -rates[o])  # stable: the plan's order on ties
            subgoals.append({"skill": sg.skill, "options": [sg.options[o].model_dump(mode="json") for o in order]})
        plans.append(
            {
                "instruction": scene.instruction,
                "target_object": scene.target_object,
                "destination": scene.destination,
                "subgoals": subgoals,
            }
        )
    surface = env.surface
    return PlanSpec(
        approach_gain=float(env.cfg.approach_gain),
        base_gain=float(base_gain),
        residual_scale=float(residual_scale),
        timeout_steps=int(env.timeout),
        scale_xyz=tuple(float(x) for x in env.scale_xyz),
        table_z=float(surface[0]),
        object_half_height=float(surface[1]),
        destination_offset=tuple(float(x) for x in offset),
        plans=tuple(plans),
    )

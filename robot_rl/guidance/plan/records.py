"""What a PlanGuidedEnv records: the run's plan.json (plans, option choices, verification statistics) and the
state checkpoints carry, so a resumed run or an evaluation continues from what online correction learned."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from robot_rl.guidance.plan.schema import MAX_SUBGOALS, Plan

if TYPE_CHECKING:
    from robot_rl.guidance.plan.guided_env import PlanGuidedEnv


def plan_summary(env: PlanGuidedEnv) -> dict:
    """plan.json: the planner, the gain schedule's position, and per layout its plan, option probabilities and
    verification."""
    base_gain, k = env.cfg.gains(env.env_steps)
    return {
        "planner": env.cfg.planner,
        "gains": {"env_steps": env.env_steps, "base_gain": base_gain, "residual_scale": k},
        "requests": env.client.requests_made if env.client is not None else 0,
        "layouts": [
            {
                "layout": i,
                "instruction": env.scenes[i].instruction,
                "source": env.sources[i],
                "plan": env.plans[i].model_dump(),
                "option_probabilities": [
                    env.selector.probabilities(i, s, int(env.tables.n_opt[i, s]))
                    for s in range(int(env.tables.n_sub[i]))
                ],
                "verification": env.verifiers[i].summary(),
            }
            for i in range(env.task.layouts)
        ],
        "option_history": env.selector.history,
        "replans": dict(env.selector.replans),
    }


def checkpoint_state(env: PlanGuidedEnv) -> dict:
    """What online correction has learned: option statistics, the current plans (re-plans included) and
    verification counts; without it a resumed run would try every option, wrong ones included, from scratch."""
    return {
        "selector": env.selector.state_dict(),
        "plans": [p.model_dump(mode="json") for p in env.plans],
        "sources": list(env.sources),
        "verifiers": [v.counts() for v in env.verifiers],
    }


def restore_checkpoint_state(env: PlanGuidedEnv, state: dict) -> None:
    """Put checkpoint_state() back; the plans are validated against this env's scenes again."""
    if len(state["plans"]) != env.task.layouts:
        raise ValueError(
            f"guidance state holds {len(state['plans'])} layouts' plans; this task has "
            f"{env.task.layouts} (task.params.layouts must match the checkpoint's run)"
        )
    for layout, plan in enumerate(state["plans"]):
        env.set_plan(layout, Plan.model_validate(plan))
        env.verifiers[layout].load_counts(state["verifiers"][layout])
    env.selector.load_state_dict(state["selector"])
    env.sources = list(state["sources"])
    # worlds mid-episode keep their subgoal; an option index beyond a re-planned subgoal's options is clamped
    lay = env.task.layout_id.clamp(min=0)
    env.opt = torch.minimum(env.opt, env.tables.n_opt[lay, env.sub.clamp(max=MAX_SUBGOALS - 1)] - 1)

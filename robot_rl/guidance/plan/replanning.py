"""Re-planning: a layout whose every option at some subgoal keeps failing asks its planner again, with the
failures as feedback. The OptionSelector decides when (and how often: max_replans per layout)."""

from __future__ import annotations

import logging

from robot_rl.guidance.plan.option_selector import OptionSelector
from robot_rl.guidance.plan.planners import Planner
from robot_rl.guidance.plan.scene import Scene
from robot_rl.guidance.plan.schema import Plan

log = logging.getLogger("robot_rl.guidance")


def replan(
    selector: OptionSelector, planner: Planner, scene: Scene, layout: int, layout_seed: int
) -> tuple[Plan, str] | None:
    """A new plan for the layout and its source ("model", "cache", "oracle") if the selector asks for one;
    None: the layout keeps its plan. The caller installs the plan and restarts the layout's worlds."""
    feedback = selector.needs_replan(layout)
    if feedback is None:
        return None
    plan, answer = planner.plan(scene, layout_seed * 1000 + layout, feedback)
    log.info("layout %d re-planned after failures (%s): %s", layout, answer.source, feedback)
    selector.replanned(layout)
    return plan, answer.source

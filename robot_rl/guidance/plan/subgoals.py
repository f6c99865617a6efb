"""Every layout's plan as tensors (`PlanTables`, indexed layout x subgoal x option), so that all worlds are looked
up at once from their layout, subgoal index and option index, and the subgoal geometry of
robot_conventions.plan_geometry applied to the task's state (the deploy runtime's plan executor applies the same
functions to a robot's perceived state).
"""

from __future__ import annotations

import numpy as np
import torch

from robot_conventions import plan_geometry as geometry
from robot_rl.guidance.keypoint_reward import body_point
from robot_rl.guidance.plan.scene import Scene
from robot_rl.guidance.plan.schema import MAX_OPTIONS, MAX_SUBGOALS, POINTS, SKILLS, Plan


class PlanTables:
    """Every layout's plan as tensors: per layout x subgoal x option the skill, body, point, height and approach;
    per layout the destination and the object the plan moves (grasped or pushed)."""

    def __init__(self, layouts: int) -> None:
        L = layouts
        self.n_sub = torch.zeros(L, dtype=torch.long)
        self.n_opt = torch.ones(L, MAX_SUBGOALS, dtype=torch.long)
        self.skill = torch.zeros(L, MAX_SUBGOALS, dtype=torch.long)
        self.body = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.long)
        self.point = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.long)
        self.height = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.float64)
        self.from_top = torch.zeros(L, MAX_SUBGOALS, MAX_OPTIONS, dtype=torch.bool)
        self.dest = torch.zeros(L, dtype=torch.long)
        self.moved = torch.zeros(L, dtype=torch.long)

    def set(self, layout: int, plan: Plan, scene: Scene, body_ids: dict[str, int]) -> None:
        """Write a (validated) plan into its layout's rows; body_ids: MuJoCo body name -> index."""
        sgs = plan.subgoals[:MAX_SUBGOALS]
        self.n_sub[layout] = len(sgs)
        for s, sg in enumerate(sgs):
            self.skill[layout, s] = SKILLS.index(sg.skill)
            opts = sg.options[:MAX_OPTIONS]
            self.n_opt[layout, s] = len(opts)
            for o, a in enumerate(opts):
                self.body[layout, s, o] = body_ids[a.object]
                self.point[layout, s, o] = POINTS.index(a.point)
                self.height[layout, s, o] = a.height_m
                self.from_top[layout, s, o] = a.approach == "top"
        self.dest[layout] = body_ids[scene.destination]
        self.moved[layout] = body_ids[scene.target_object]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _option_rows(task, tables: PlanTables, sub: torch.Tensor, opt: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each world's current subgoal and option as rows of its layout's tables."""
    lay = task.layout_id
    s = sub.clamp(max=MAX_SUBGOALS - 1)
    n_sub = tables.n_sub[lay]
    return {
        "skill": tables.skill[lay, s],
        "point": tables.point[lay, s, opt],
        "height": tables.height[lay, s, opt],
        "from_top": tables.from_top[lay, s, opt],
        "body": tables.body[lay, s, opt],
        "active": sub < n_sub,
        "last_skill": tables.skill[lay, (n_sub - 1).clamp(min=0)],
    }


def controller_view(task, tables: PlanTables, body: torch.Tensor, perceived: bool) -> dict[str, torch.Tensor]:
    """What the plan controller reads of each world: the TCP (n, 3), the gripper's opening (n,), the object the
    plan moves, its destination and the option's body `body` (n, 3 each). perceived=False: the simulator's state;
    True: the task's raw state as the policy observes it (its sensor noise included), as a deployed plan executor
    reads it (an option's body other than those two is read from the simulator: no robot perceives it)."""
    zero = torch.zeros(task.n, 3, dtype=torch.float64)
    moved_body, dest_body = tables.moved[task.layout_id], tables.dest[task.layout_id]
    moved, dest, other = (body_point(task, b, zero) for b in (moved_body, dest_body, body))
    if not perceived:
        tcp, width = task.tcp_pos, task.width
    else:
        raw = task.last_raw
        # the destination body sits at a fixed offset from the goal the task reports (a bowl's base, its centre)
        dest = raw["goal_position"] + (dest - task.goal_pos)
        moved = raw["object_position"]
        tcp, width = raw["ee_position"], raw["gripper_width"][:, 0]
    centre = torch.where(
        (body == moved_body).unsqueeze(1), moved, torch.where((body == dest_body).unsqueeze(1), dest, other)
    )
    return {"tcp": tcp, "width": width, "moved": moved, "dest": dest, "centre": centre}


def subgoal_target(
    task,
    tables: PlanTables,
    sub: torch.Tensor,
    opt: torch.Tensor,
    estimate_error: torch.Tensor,
    closed_steps: torch.Tensor,
    surface: tuple[float, float],
    perceived: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """TCP target (n, 3), gripper command (n,) and whether the target is to be reached from above (n,) of
    each world's current subgoal `sub` and option `opt` (plan_geometry.subgoal_target on controller_view).
    estimate_error (n, 3): how far off the controller's estimate of the moved object is; closed_steps (n,):
    steps the gripper has been commanded closed; surface: the table's height and an object's half height."""
    rows = _option_rows(task, tables, sub, opt)
    view = controller_view(task, tables, rows["body"], perceived)
    is_moved = (rows["body"] == tables.moved[task.layout_id]).double().unsqueeze(1)
    target, grip, descend = geometry.subgoal_target(
        *(_np(rows[k]) for k in ("skill", "point", "height", "from_top", "active", "last_skill")),
        _np(view["centre"] + is_moved * estimate_error),
        _np(view["moved"] + estimate_error),
        _np(view["dest"]),
        _np(view["tcp"]),
        _np(closed_steps),
        surface,
    )
    return torch.from_numpy(target), torch.from_numpy(grip), torch.from_numpy(descend)


def subgoal_achieved(
    task,
    tables: PlanTables,
    sub: torch.Tensor,
    opt: torch.Tensor,
    target: torch.Tensor,
    closed_steps: torch.Tensor,
    surface: tuple[float, float],
    perceived: bool = False,
) -> torch.Tensor:
    """Whether each world's current subgoal holds now (n,) in controller_view; target: the TCP target it was
    given."""
    rows = _option_rows(task, tables, sub, opt)
    view = controller_view(task, tables, rows["body"], perceived)
    out = geometry.subgoal_achieved(
        _np(rows["skill"]),
        _np(rows["height"]),
        _np(rows["active"]),
        _np(view["moved"]),
        _np(view["centre"]),
        _np(target),
        _np(view["tcp"]),
        _np(view["width"]),
        _np(closed_steps),
        surface,
    )
    return torch.from_numpy(out)

"""Subgoal geometry: where each world's current subgoal puts the TCP and the gripper, and when it is achieved.

Every layout's plan is held as tensors (`PlanTables`, indexed layout x subgoal x option) so that all
worlds are looked up at once from their layout, subgoal index and option index. The skills' targets:

- reach: the option's point on its body (approach "top": come down from APPROACH_HEIGHT above it);
- grasp: that point, fingers closing once the TCP is there; lift: straight up over the held object;
- transport / place: the held object over the destination, at the option's height;
- push: along the line from the destination through the object, low, once lined up behind it;
- release: open the fingers where the TCP is, rising a little.
"""

from __future__ import annotations

import torch

from robot_rl.guidance.keypoint_reward import body_point
from robot_rl.guidance.plan.scene import Scene
from robot_rl.guidance.plan.schema import MAX_OPTIONS, MAX_SUBGOALS, POINTS, SKILLS, Plan

# Planar point offsets as coefficients of (d, d rotated +90 deg), d = unit direction body -> destination.
POINT_COEF = {"center": (0, 0), "top": (0, 0), "behind": (-1, 0), "front": (1, 0), "left": (0, 1), "right": (0, -1)}
CLEARANCE = 0.045  # m from an object's centre for side points: half size + finger clearance
# Pushing a 5 cm block with DR friction up to ~1.5 tips it over when the fingers meet its face high or off its
# centre line, so the fingers push low and start only when at that height and lined up.
PUSH_HEIGHT = -0.008  # m, TCP (fingertips) relative to the object's centre while pushing: 1.7 cm above the table
PUSH_HEIGHT_TOL = 0.004  # m: the push starts once the TCP is this close above PUSH_HEIGHT, not while descending
PUSH_LATERAL_TOL = 0.003  # m off the destination-object line: an off-centre contact spins the object on its edge
PUSH_DEPTH = 0.015  # m the push target leads the contact point at most: about 1 cm per step (0.26 m/s)
APPROACH_HEIGHT = 0.08  # m above a point that the controller comes down from (approach "top", re-acquiring a push)
APPROACH_RADIUS = 0.02  # m: horizontally this close to the point, it descends
K = {name: i for i, name in enumerate(SKILLS)}  # skill name -> index
POINT_COEF_T = torch.tensor([POINT_COEF[p] for p in POINTS], dtype=torch.float64)  # (points, 2)


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


def subgoal_target(
    task,
    tables: PlanTables,
    sub: torch.Tensor,
    opt: torch.Tensor,
    estimate_error: torch.Tensor,
    closed_steps: torch.Tensor,
    surface: tuple[float, float],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """TCP target (n, 3), gripper command (n,) and whether the target is to be reached from above (n,) of
    each world's current subgoal `sub` and option `opt`. estimate_error (n, 3): how far off the controller's
    estimate of the moved object is; closed_steps (n,): steps the gripper has been commanded closed;
    surface: the table's height and an object's half height (the task's scene view)."""
    table_z, half = surface
    t = task
    lay = t.layout_id
    s = sub.clamp(max=MAX_SUBGOALS - 1)
    body = tables.body[lay, s, opt]
    point = tables.point[lay, s, opt]
    height = tables.height[lay, s, opt]
    skill = tables.skill[lay, s]
    zero = torch.zeros(t.n, 3, dtype=torch.float64)
    moved_body = tables.moved[lay]
    centre = body_point(t, body, zero) + (body == moved_body).double().unsqueeze(1) * estimate_error
    moved = body_point(t, moved_body, zero) + estimate_error
    dest = body_point(t, tables.dest[lay], zero)
    d = dest[:, :2] - centre[:, :2]
    d = d / d.norm(dim=1, keepdim=True).clamp(min=1e-6)
    d_perp = torch.stack([-d[:, 1], d[:, 0]], dim=1)
    coef = POINT_COEF_T[point]
    planar = CLEARANCE * (coef[:, :1] * d + coef[:, 1:] * d_perp)
    at = centre + torch.cat([planar, (point == POINTS.index("top")).double().unsqueeze(1) * half], dim=1)
    at[:, 2] += height
    grip = torch.ones(t.n, dtype=torch.float64)  # open
    target = at.clone()
    holding = (skill == K["grasp"]) | (skill == K["lift"]) | (skill == K["transport"]) | (skill == K["place"])
    near = (t.tcp_pos - centre).norm(dim=1) < 0.015
    grip = torch.where(holding & ((skill != K["grasp"]) | near | (closed_steps > 0)), -1.0, grip)
    # lift: straight up over the held object; transport/place: the object over the destination
    lift = moved.clone()
    lift[:, 2] = table_z + half + height
    target = torch.where((skill == K["lift"]).unsqueeze(1), lift, target)
    over = torch.cat([centre[:, :2], (table_z + half + height).unsqueeze(1)], dim=1)
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
    done = sub >= tables.n_sub[lay]
    target = torch.where(done.unsqueeze(1), release, target)
    last = tables.skill[lay, (tables.n_sub[lay] - 1).clamp(min=0)]
    grip = torch.where(done, torch.where(last == K["push"], -1.0, 1.0), grip)
    from_top = tables.from_top[lay, s, opt]
    beyond = along.squeeze(1) >= 0.02  # on the pad's side of the object's back: go over it
    descend = ((skill == K["reach"]) & from_top) | ((skill == K["push"]) & beyond)
    return target, grip, descend & ~done


def subgoal_achieved(
    task,
    tables: PlanTables,
    sub: torch.Tensor,
    opt: torch.Tensor,
    target: torch.Tensor,
    closed_steps: torch.Tensor,
    surface: tuple[float, float],
) -> torch.Tensor:
    """Whether each world's current subgoal holds now (n,); target: the TCP target it was given."""
    table_z, half = surface
    t = task
    lay = t.layout_id
    s = sub.clamp(max=MAX_SUBGOALS - 1)
    skill = tables.skill[lay, s]
    height = tables.height[lay, s, opt]
    zero = torch.zeros(t.n, 3, dtype=torch.float64)
    obj = body_point(t, tables.moved[lay], zero)
    centre = body_point(t, tables.body[lay, s, opt], zero)
    holding = (t.width > 0.03) & (t.width < 0.056) & ((t.tcp_pos - obj).norm(dim=1) < 0.03)
    xy_err = (obj[:, :2] - centre[:, :2]).norm(dim=1)
    checks = {
        K["reach"]: (t.tcp_pos - target).norm(dim=1) < 0.02,
        K["grasp"]: holding & (closed_steps >= 5),
        K["lift"]: holding & (obj[:, 2] > table_z + half + 0.8 * height),
        K["transport"]: holding & (xy_err < 0.03),
        K["place"]: (xy_err < 0.04) & (obj[:, 2] < table_z + half + height + 0.02),
        K["release"]: t.width > 0.07,
        K["push"]: xy_err < 0.015,
    }
    out = torch.zeros(t.n, dtype=torch.bool)
    for k, v in checks.items():
        out |= (skill == k) & v
    return out & (sub < tables.n_sub[lay])


def waypoint(tcp: torch.Tensor, target: torch.Tensor, descend: torch.Tensor) -> torch.Tensor:
    """Where the TCP heads now: the target, or for a target to be reached from above, first a point
    APPROACH_HEIGHT over it (rising in place while still low), descending once horizontally close.
    Sweeping in at table height knocks the object away before the fingers are behind it."""
    far = (target[:, :2] - tcp[:, :2]).norm(dim=1) > APPROACH_RADIUS
    above = target.clone()
    above[:, 2] += APPROACH_HEIGHT
    low = tcp[:, 2] < target[:, 2] + 0.5 * APPROACH_HEIGHT
    rise = torch.cat([tcp[:, :2], above[:, 2:]], dim=1)
    over = torch.where(low.unsqueeze(1), rise, above)
    return torch.where((descend & far).unsqueeze(1), over, target)

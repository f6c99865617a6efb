"""Plan geometry: where a plan's current subgoal puts the TCP and the gripper, when it is achieved, and the plan
features a plan-guided policy observes. numpy only: the training env (robot_rl.guidance.plan) and the deploy
runtime's plan executor (robot_rl.deploy.plan_executor) call these same functions, so a plan-guided bundle
drives the arm as its training did.

Every function is batched over n worlds (or robots) and takes the per-world rows of the current subgoal and
option: skill, point, height and approach as indexes into SKILLS and POINTS, positions in m (base frame).
The skills' targets:

- reach: the option's point on its body (approach "top": come down from APPROACH_HEIGHT above it);
- grasp: that point, fingers closing once the TCP is there; lift: straight up over the held object;
- transport / place: the held object over the destination, at the option's height;
- push: along the line from the destination through the object, low, once lined up behind it;
- release: open the fingers where the TCP is, rising a little.
"""

from __future__ import annotations

import numpy as np

SKILLS = ("reach", "grasp", "lift", "transport", "place", "release", "push")
POINTS = ("center", "top", "behind", "front", "left", "right")
APPROACHES = ("top", "side", "front")
K = {name: i for i, name in enumerate(SKILLS)}  # skill name -> index

# Planar point offsets as coefficients of (d, d rotated +90 deg), d = unit direction body -> destination.
POINT_COEF = {"center": (0, 0), "top": (0, 0), "behind": (-1, 0), "front": (1, 0), "left": (0, 1), "right": (0, -1)}
POINT_COEF_ARRAY = np.array([POINT_COEF[p] for p in POINTS], dtype=np.float64)  # (points, 2)
CLEARANCE = 0.045  # m from an object's centre for side points: half size + finger clearance
# Pushing a 5 cm block with DR friction up to ~1.5 tips it over when the fingers meet its face high or off its
# centre line, so the fingers push low and start only when at that height and lined up.
PUSH_HEIGHT = -0.008  # m, TCP (fingertips) relative to the object's centre while pushing: 1.7 cm above the table
PUSH_HEIGHT_TOL = 0.004  # m: the push starts once the TCP is this close above PUSH_HEIGHT, not while descending
PUSH_LATERAL_TOL = 0.003  # m off the destination-object line: an off-centre contact spins the object on its edge
PUSH_DEPTH = 0.015  # m the push target leads the contact point at most: about 1 cm per step (0.26 m/s)
APPROACH_HEIGHT = 0.08  # m above a point that the controller comes down from (approach "top", re-acquiring a push)
APPROACH_RADIUS = 0.02  # m: horizontally this close to the point, it descends
FEATURE_RANGE_M = 0.3  # the target's offset from the TCP is observed in these units, clipped to [-1, 1]
NEAR_GRASP_M = 0.015  # TCP this close to the grasp point: the fingers close


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-6)


def _where3(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(cond[:, None], a, b)


def subgoal_target(
    skill: np.ndarray,
    point: np.ndarray,
    height: np.ndarray,
    from_top: np.ndarray,
    active: np.ndarray,
    last_skill: np.ndarray,
    centre: np.ndarray,
    moved: np.ndarray,
    dest: np.ndarray,
    tcp: np.ndarray,
    closed_steps: np.ndarray,
    surface: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TCP target (n, 3), gripper command (n,: 1 open, -1 closed) and whether the target is to be reached from
    above (n,) of each world's current subgoal and option.

    skill, point (n,) int; height (n,) m; from_top (n,) bool: the option's approach is "top"; active (n,) bool:
    the plan is not finished (a finished plan backs straight up); last_skill (n,): the plan's last skill;
    centre (n, 3): the option's body (the controller's estimate where it is the moved object); moved (n, 3): the
    controller's estimate of the object the plan moves; dest (n, 3): the destination; tcp (n, 3); closed_steps
    (n,): steps the gripper has been commanded closed; surface: the table's height and an object's half height.
    """
    table_z, half = surface
    n = len(skill)
    d = _unit(dest[:, :2] - centre[:, :2])
    d_perp = np.stack([-d[:, 1], d[:, 0]], axis=1)
    coef = POINT_COEF_ARRAY[point]
    planar = CLEARANCE * (coef[:, :1] * d + coef[:, 1:] * d_perp)
    at = centre + np.concatenate([planar, ((point == POINTS.index("top")) * half)[:, None]], axis=1)
    at[:, 2] += height
    grip = np.ones(n)  # open
    target = at.copy()
    holding = (skill == K["grasp"]) | (skill == K["lift"]) | (skill == K["transport"]) | (skill == K["place"])
    near = np.linalg.norm(tcp - centre, axis=1) < NEAR_GRASP_M
    grip = np.where(holding & ((skill != K["grasp"]) | near | (closed_steps > 0)), -1.0, grip)
    # lift: straight up over the held object; transport/place: the object over the destination
    lift = moved.copy()
    lift[:, 2] = table_z + half + height
    target = _where3(skill == K["lift"], lift, target)
    over = np.concatenate([centre[:, :2], (table_z + half + height)[:, None]], axis=1)
    carry = (skill == K["transport"]) | (skill == K["place"])
    target = _where3(carry, over, target)
    # push: stay on the line from the pad through the object; push into the object when lined up
    # behind it, otherwise go back to the point behind it first (a lateral contact spins it away)
    push_dir = _unit(centre[:, :2] - moved[:, :2])
    behind = moved[:, :2] - CLEARANCE * push_dir
    rel = tcp[:, :2] - behind
    along = (rel * push_dir).sum(axis=1)
    lateral = np.linalg.norm(rel - along[:, None] * push_dir, axis=1)
    # lined up: fingers at the point behind the object or touching it; a TCP further along is on or
    # beyond the object and must go back around it (pushing from there drives it away from the pad)
    low = tcp[:, 2] < moved[:, 2] + PUSH_HEIGHT + PUSH_HEIGHT_TOL
    lined_up = (lateral < PUSH_LATERAL_TOL) & (along > -0.03) & (along < 0.02) & low
    # lead by the object's remaining distance to the destination, at most PUSH_DEPTH: the push slows
    # down as the object arrives instead of shoving it past (a cube pushed at 0.5 m/s slides on)
    lead = np.minimum(np.linalg.norm(centre[:, :2] - moved[:, :2], axis=1, keepdims=True), PUSH_DEPTH)
    ahead = _where3(lined_up, behind + lead * push_dir, behind)
    push = np.concatenate([ahead, moved[:, 2:3] + PUSH_HEIGHT], axis=1)
    target = _where3(skill == K["push"], push, target)
    # closed fingers push; open ones straddle the object, so they close before coming down behind it
    pushing = (skill == K["push"]) | ((skill == K["reach"]) & (point == POINTS.index("behind")))
    grip = np.where(pushing, -1.0, grip)
    release = tcp + np.array([0.0, 0.0, 0.01])
    target = _where3(skill == K["release"], release, target)
    # plan finished: back straight up, fingers as they were (opening them beside the object nudges it)
    target = _where3(~active, release, target)
    grip = np.where(active, grip, np.where(last_skill == K["push"], -1.0, 1.0))
    beyond = along >= 0.02  # on the pad's side of the object's back: go over it
    descend = ((skill == K["reach"]) & from_top) | ((skill == K["push"]) & beyond)
    return target, grip, descend & active


def subgoal_achieved(
    skill: np.ndarray,
    height: np.ndarray,
    active: np.ndarray,
    moved: np.ndarray,
    centre: np.ndarray,
    target: np.ndarray,
    tcp: np.ndarray,
    width: np.ndarray,
    closed_steps: np.ndarray,
    surface: tuple[float, float],
) -> np.ndarray:
    """Whether each world's current subgoal holds now (n,). moved: the object the plan moves, centre: the
    option's body (both where they are, not the controller's estimates); target: the TCP target the subgoal
    was given; width (n,): the gripper's opening (m)."""
    table_z, half = surface
    holding = (width > 0.03) & (width < 0.056) & (np.linalg.norm(tcp - moved, axis=1) < 0.03)
    xy_err = np.linalg.norm(moved[:, :2] - centre[:, :2], axis=1)
    checks = {
        K["reach"]: np.linalg.norm(tcp - target, axis=1) < 0.02,
        K["grasp"]: holding & (closed_steps >= 5),
        K["lift"]: holding & (moved[:, 2] > table_z + half + 0.8 * height),
        K["transport"]: holding & (xy_err < 0.03),
        K["place"]: (xy_err < 0.04) & (moved[:, 2] < table_z + half + height + 0.02),
        K["release"]: width > 0.07,
        K["push"]: xy_err < 0.015,
    }
    out = np.zeros(len(skill), dtype=bool)
    for k, v in checks.items():
        out |= (skill == k) & v
    return out & active


def waypoint(tcp: np.ndarray, target: np.ndarray, descend: np.ndarray) -> np.ndarray:
    """Where the TCP heads now: the target, or for a target to be reached from above, first a point
    APPROACH_HEIGHT over it (rising in place while still low), descending once horizontally close.
    Sweeping in at table height knocks the object away before the fingers are behind it."""
    far = np.linalg.norm(target[:, :2] - tcp[:, :2], axis=1) > APPROACH_RADIUS
    above = target.copy()
    above[:, 2] += APPROACH_HEIGHT
    low = tcp[:, 2] < target[:, 2] + 0.5 * APPROACH_HEIGHT
    rise = np.concatenate([tcp[:, :2], above[:, 2:]], axis=1)
    over = _where3(low, rise, above)
    return _where3(descend & far, over, target)


def approach_step(tcp: np.ndarray, target: np.ndarray, descend: np.ndarray, gain: float, scale_xyz) -> np.ndarray:
    """The plan's TCP action (n, 3) in the ee action space: gain times the way to the waypoint, in action units."""
    step = gain * (waypoint(tcp, target, descend) - tcp) / np.asarray(scale_xyz, dtype=np.float64)
    return np.clip(step, -1.0, 1.0)


def plan_features(
    skill: np.ndarray, active: np.ndarray, target: np.ndarray, tcp: np.ndarray, grip: np.ndarray, progress
) -> np.ndarray:
    """What a plan-guided policy observes of the plan (n, 3 + len(SKILLS) + 2): the target relative to the TCP
    (FEATURE_RANGE_M units, clipped), the current skill one-hot (zero once the plan is done), the gripper
    command and the progress (subgoals achieved / subgoals)."""
    rel = np.clip((target - tcp) / FEATURE_RANGE_M, -1.0, 1.0)
    onehot = np.eye(len(SKILLS))[skill] * active[:, None]
    return np.concatenate([rel, onehot, grip[:, None], np.asarray(progress, dtype=np.float64)[:, None]], axis=1)


FEATURE_DIM = 3 + len(SKILLS) + 2

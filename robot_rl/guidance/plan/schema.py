"""The plan data model: a list of subgoals, each one *skill* with one or more *affordance options*.

Options are alternative ways to do a subgoal (the online option selector picks among them). An
option names a scene body and where/how the gripper meets it:

- ``object``: a body name from the scene (``red_cube``, ``blue_bowl``, ``white_pad``, ``pink_marker``).
- ``point`` (named keypoint of that body; offsets are in the table plane unless noted, see
  :func:`point_offset`):

  * ``center``: the body's centre (grasp centre, bowl/pad centre, marker position);
  * ``top``: the centre of its top face;
  * ``behind`` / ``front``: the side facing away from / towards the plan's *destination* (the
    bowl or pad the plan moves the object to); with no destination, away from / towards the
    robot along the base x axis. ``behind`` is where the fingers go to push an object to its pad.
  * ``left`` / ``right``: the sides 90 degrees counter-clockwise / clockwise (seen from above) from
    the ``front`` direction.

- ``approach``: the axis the gripper moves along for the last few centimetres before contact,
  base frame: ``top`` (fingers down, descending along -z), ``front`` (horizontal, along +x, from
  the robot's side of the object), ``side`` (horizontal, along +-y, from the side the gripper is on).
- ``height_m``: extra height above the point, metres, in [0, 0.3] (e.g. carry 0.12 m above a bowl).

What each skill means and needs is in ``validation``. Plans hold at most MAX_SUBGOALS subgoals and
each subgoal at most MAX_OPTIONS options.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from robot_conventions.plan_geometry import APPROACHES, POINTS, SKILLS

MAX_HEIGHT_M = 0.3
MAX_SUBGOALS = 12
MAX_OPTIONS = 6


class Affordance(BaseModel):
    """One way to do a subgoal: which body, which point on it, gripper approach axis, extra height."""

    object: str = Field(description="body name from the scene's object list, e.g. red_cube")
    point: str = Field(default="center", description="one of: " + ", ".join(POINTS))
    approach: str = Field(default="top", description="one of: " + ", ".join(APPROACHES))
    height_m: float = Field(default=0.0, description=f"extra height above the point in metres, 0 to {MAX_HEIGHT_M}")


class Subgoal(BaseModel):
    skill: str = Field(description="one of: " + ", ".join(SKILLS))
    options: list[Affordance] = Field(description="alternative ways to do this subgoal, most likely first")


class Plan(BaseModel):
    subgoals: list[Subgoal]
    rationale: str = ""


def point_offset(point: str, toward_xy: tuple[float, float] | None, half_size: float) -> tuple[float, float, float]:
    """Offset (m, base frame) of a named point from a body's centre; ``toward_xy`` is the direction
    from the body to the plan's destination (None: the base +x axis). ``height_m`` is added on top."""
    if point not in POINTS:
        raise ValueError(f"unknown point '{point}' (points: {', '.join(POINTS)})")
    dx, dy = toward_xy if toward_xy is not None else (1.0, 0.0)
    norm = math.hypot(dx, dy)
    dx, dy = (dx / norm, dy / norm) if norm > 1e-9 else (1.0, 0.0)
    planar = {
        "center": (0.0, 0.0),
        "behind": (-dx, -dy),
        "front": (dx, dy),
        "left": (-dy, dx),  # +90 degrees about +z
        "right": (dy, -dx),
    }
    if point == "top":
        return (0.0, 0.0, half_size)
    ux, uy = planar[point]
    return (ux * half_size, uy * half_size, 0.0)

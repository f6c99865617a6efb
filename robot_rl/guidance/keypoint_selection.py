"""Keypoint selection (KAGI): which marked keypoints to grasp and to bring the object to, and a coarse path.

A VLM sees the marked top-down image and the instruction and answers with mark ids and grid cells
(`KeypointAnswer`); the `oracle` backend answers the same question from simulator ground truth
(the offline default and the ablation every paper reports); `noisy_oracle` gives a wrong mark in a share p
of the layouts. The answer becomes a `KeypointGuide`: body-attached grasp and target keypoints and
world-frame waypoints for the object centre, which `keypoint_reward` turns into reward.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from robot_rl.guidance.keypoint_proposer import Proposal
from robot_rl.guidance.model_client import Answer, ModelClient, system_message, user_message

PROMPT_VERSION = "kagi-v1"
BACKENDS = ("oracle", "noisy_oracle", "vlm")
MAX_WAYPOINTS = 6
MAX_HEIGHT_CM = 30.0
OBJECT_HALF_HEIGHT = 0.025  # the object centre rides this far above a waypoint's surface point


class Waypoint(BaseModel):
    cell: str = Field(description="grid cell label, e.g. 'B3'")
    height_cm: float = Field(0.0, description="height of the object above the table at this waypoint, cm")


class KeypointAnswer(BaseModel):
    grasp: int = Field(description="mark id where the gripper takes (or pushes) the object")
    target: int = Field(description="mark id where the object must end up")
    waypoints: list[Waypoint] = Field(default_factory=list, description="ordered path of the object")
    rationale: str = ""


def check_answer(answer: KeypointAnswer, proposal: Proposal) -> None:
    """Reject answers that name marks or cells not in the image, or leave the workspace (ValueError)."""
    ids = sorted(k.id for k in proposal.keypoints)
    for name in ("grasp", "target"):
        if getattr(answer, name) not in ids:
            raise ValueError(f"{name} mark {getattr(answer, name)} is not in the image (marks: {ids})")
    if proposal.by_id(answer.grasp).body == proposal.by_id(answer.target).body:
        raise ValueError("grasp and target marks are on the same object")
    if len(answer.waypoints) > MAX_WAYPOINTS:
        raise ValueError(f"{len(answer.waypoints)} waypoints; at most {MAX_WAYPOINTS}")
    labels = [c.label for c in proposal.grid]
    for w in answer.waypoints:
        if w.cell not in labels:
            raise ValueError(f"waypoint cell '{w.cell}' is outside the workspace grid ({labels[0]}..{labels[-1]})")
        if not 0.0 <= w.height_cm <= MAX_HEIGHT_CM:
            raise ValueError(f"waypoint height {w.height_cm} cm outside [0, {MAX_HEIGHT_CM}] cm")


@dataclass
class KeypointGuide:
    """What one scene layout's answer means in the world: the reward's path."""

    grasp_body: int
    grasp_local: np.ndarray  # (3,) in the grasped body's frame
    target_body: int
    target_local: np.ndarray  # (3,) in the destination body's frame
    waypoints: np.ndarray  # (k, 3) world positions of the object centre, in order
    source: str  # oracle | noisy_oracle | model | cache
    answer: dict

    def to_json(self) -> dict:
        return {
            "grasp_body": self.grasp_body,
            "grasp_local": self.grasp_local.tolist(),
            "target_body": self.target_body,
            "target_local": self.target_local.tolist(),
            "waypoints": self.waypoints.tolist(),
            "source": self.source,
            "answer": self.answer,
        }


def guide_from_answer(answer: KeypointAnswer, proposal: Proposal, source: str, table_z: float = 0.0) -> KeypointGuide:
    g, t = proposal.by_id(answer.grasp), proposal.by_id(answer.target)
    wps = [
        [*proposal.cell(w.cell).world_xy, table_z + OBJECT_HALF_HEIGHT + 0.01 * w.height_cm] for w in answer.waypoints
    ]
    return KeypointGuide(
        grasp_body=g.body_id,
        grasp_local=np.asarray(g.local, dtype=np.float64),
        target_body=t.body_id,
        target_local=np.asarray(t.local, dtype=np.float64),
        waypoints=np.asarray(wps, dtype=np.float64).reshape(-1, 3),
        source=source,
        answer=answer.model_dump(),
    )


def _nearest_cell(proposal: Proposal, xy: np.ndarray) -> str:
    return min(proposal.grid, key=lambda c: float(np.linalg.norm(c.world_xy - xy))).label


def oracle_answer(proposal: Proposal, task: str, object_body: str, goal_body: str) -> KeypointAnswer:
    """Ground truth: grasp the named object (push: from its side away from the goal), target the goal's
    centroid; pick-and-place lifts over the object, carries at 12 cm and lowers into the bowl."""
    own = [k for k in proposal.keypoints if k.body == object_body]
    dest = [k for k in proposal.keypoints if k.body == goal_body]
    if not own or not dest:
        missing = object_body if not own else goal_body
        raise ValueError(f"no keypoint on '{missing}' in the image: the oracle cannot answer")
    target = next((k for k in dest if k.kind == "centroid"), dest[0])
    if task == "arm_push":
        grasp = max(own, key=lambda k: float(np.linalg.norm(k.world[:2] - target.world[:2])))
        return KeypointAnswer(grasp=grasp.id, target=target.id, rationale="oracle: push from the far side")
    grasp = next((k for k in own if k.kind == "centroid"), own[0])
    lift = Waypoint(cell=_nearest_cell(proposal, grasp.world[:2]), height_cm=12.0)
    carry = Waypoint(cell=_nearest_cell(proposal, target.world[:2]), height_cm=12.0)
    return KeypointAnswer(grasp=grasp.id, target=target.id, waypoints=[lift, carry], rationale="oracle")


def wrong_layouts(layouts: int, p: float, rng: random.Random) -> set[int]:
    """Which layouts noisy_oracle answers wrongly: round(p * layouts) of them, drawn without replacement, so each
    layout is wrong with probability ~p and every run carries the nominal noise (independent draws put no wrong
    mark in any of 16 layouts for one seed)."""
    return set(rng.sample(range(layouts), round(p * layouts)))


def noisy_oracle_answer(
    proposal: Proposal, task: str, object_body: str, goal_body: str, wrong: bool, rng: random.Random
) -> KeypointAnswer:
    """The oracle's answer, or (wrong) the same with the grasp or the target mark replaced by a wrong one."""
    answer = oracle_answer(proposal, task, object_body, goal_body)
    if not wrong:
        return answer
    field = rng.choice(["grasp", "target"])
    keep = answer.target if field == "grasp" else answer.grasp
    keep_body = proposal.by_id(keep).body
    wrong = [k.id for k in proposal.keypoints if k.id != getattr(answer, field) and k.body != keep_body]
    return answer.model_copy(update={field: rng.choice(wrong), "rationale": f"noisy oracle: wrong {field} mark"})


def prompt_text(instruction: str, proposal: Proposal) -> str:
    labels = [c.label for c in proposal.grid]
    return (
        f"Task for the robot arm: {instruction}\n"
        f"The image is a top-down view of the table; the robot stands at the bottom edge. Numbered marks "
        f"(1..{len(proposal.keypoints)}) are candidate keypoints on the objects; the grid cells "
        f"{labels[0]}..{labels[-1]} cover the workspace.\n"
        "Answer with one JSON object: 'grasp' = the mark where the gripper should take (or push) the object "
        "named in the task, 'target' = the mark where that object must end up, 'waypoints' = the ordered cells "
        "(with height_cm above the table, 0-30) the object should pass through on its way, [] if none are needed, "
        "'rationale' = one sentence."
    )


def ask_vlm(
    client: ModelClient,
    proposal: Proposal,
    instruction: str,
    layout_seed: int,
    layout: int,
    oracle: KeypointAnswer | None,
) -> Answer:
    """One request per scene layout; the cache key is semantic (the image hash is provenance only)."""
    key = {
        "kind": "keypoints",
        "prompt_version": PROMPT_VERSION,
        "layout_seed": layout_seed,
        "layout": layout,
        "camera": proposal.camera_name,
        "marks": proposal.marks(),
        "instruction": instruction,
    }
    messages = [
        system_message("You are a robot manipulation expert. You answer with JSON only."),
        user_message(prompt_text(instruction, proposal), images=[proposal.png_bytes()]),
    ]
    return client.ask(
        key=key,
        messages=messages,
        schema=KeypointAnswer,
        check=lambda a: check_answer(a, proposal),
        oracle=(lambda: oracle) if oracle is not None else None,
    )

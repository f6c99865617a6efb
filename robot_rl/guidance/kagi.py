"""The KAGI path of a training run: per scene layout, marked image -> keypoint answer -> guide -> reward.

One answer per layout of the task's layout pool (worlds sharing a layout share it), never per
step. Each layout is rendered in a one-world copy of the task with no randomization, so the
image shows the layout as the pool defines it. Artifacts land in `<run>/guidance/` for the
dashboard: the prompt images, the chosen marks and waypoints drawn on the first, keypoints.json.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from robot_conventions.options import PIXELS, POS_INT, PROB, SEED, Choice, option
from robot_rl.guidance.keypoint_proposer import Proposal, propose_keypoints
from robot_rl.guidance.keypoint_reward import KeypointReward, KeypointRewardWeights
from robot_rl.guidance.keypoint_selection import (
    BACKENDS,
    KeypointAnswer,
    KeypointGuide,
    ask_vlm,
    guide_from_answer,
    noisy_oracle_answer,
    oracle_answer,
    wrong_layouts,
)
from robot_rl.guidance.model_client import ModelClient, ModelConfig

log = logging.getLogger("robot_rl.guidance")


@dataclass
class KeypointGuidanceConfig:
    backend: str = option("oracle", Choice(BACKENDS))  # oracle | noisy_oracle | vlm
    # noisy_oracle: the share of layouts with a wrong mark (round(p x layouts) of them)
    noise_p: float = option(0.2, PROB)
    camera: str = "top"
    width: int = option(640, PIXELS)
    height: int = option(480, PIXELS)
    per_object: int = option(3, POS_INT)
    grid: tuple[int, int] = option((5, 5), POS_INT)
    seed: int = option(0, SEED)  # keypoint sampling (farthest-point seeds): the same marks for every run of a sweep
    # noisy_oracle's draws; the config sets it to the run's seed, so seeds differ in noise
    noise_seed: int = option(0, SEED)
    model: ModelConfig = field(default_factory=ModelConfig)
    weights: KeypointRewardWeights = field(default_factory=KeypointRewardWeights)

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown keypoint backend '{self.backend}' ({', '.join(BACKENDS)})")
        if not 0.0 <= self.noise_p <= 1.0:
            raise ValueError(f"noise_p must be in [0, 1], not {self.noise_p}")


def keypoint_config(d: dict) -> KeypointGuidanceConfig:
    """From the `guidance` config group (a plain dict); unknown keys are errors, not silently ignored."""
    d = {k: v for k, v in d.items() if k != "name"}
    try:
        model = ModelConfig(**d.pop("model", {}))
        weights = KeypointRewardWeights(**d.pop("weights", {}))
        grid = tuple(d.pop("grid", (5, 5)))
        return KeypointGuidanceConfig(**d, grid=grid, model=model, weights=weights)
    except TypeError as e:
        raise ValueError(f"guidance=keypoint: {e}") from None


def _render_env(task):
    """A one-world, unrandomized copy of the task, for rendering pooled layouts as they are defined."""
    from sim.env import BatchedEnv, EnvConfig

    copy = dataclasses.replace(task)
    cfg = EnvConfig(
        num_worlds=1, seed=0, randomization="none", obs_noise=False, action_latency=False, pushes=False, nthread=1
    )
    return BatchedEnv(copy, cfg)


def draw_choice(proposal: Proposal, guide: KeypointGuide, answer: KeypointAnswer) -> np.ndarray:
    """The prompt image with the chosen grasp (green ring) and target (blue ring) and the waypoint path."""
    img = proposal.image.copy()
    pts = [proposal.by_id(answer.grasp).pixel]
    if len(guide.waypoints):
        pts += list(proposal.camera.project(guide.waypoints))
    pts.append(proposal.by_id(answer.target).pixel)
    path = np.round(np.asarray(pts)).astype(np.int32)
    cv2.polylines(img, [path.reshape(-1, 1, 2)], False, (255, 220, 0), 2, cv2.LINE_AA)
    for (u, v), colour in ((path[0], (0, 200, 0)), (path[-1], (0, 80, 255))):
        cv2.circle(img, (int(u), int(v)), 16, colour, 3, cv2.LINE_AA)
    return img


def build_guides(
    task, cfg: KeypointGuidanceConfig, out_dir: Path | None = None, client: ModelClient | None = None
) -> tuple[list[KeypointGuide], dict]:
    """One guide per layout of the task's pool; returns the guides and a summary (sources, requests)."""
    if task.layouts <= 0:
        raise ValueError("keypoint guidance needs a layout pool: set task.params.layouts > 0")
    if task.name not in ("arm_push", "arm_pick_place"):
        raise ValueError(f"keypoint guidance is defined for arm_push and arm_pick_place, not {task.name}")
    if cfg.backend == "vlm" and client is None:
        client = ModelClient(cfg.model)
    env = _render_env(task)
    rng = random.Random(cfg.noise_seed)
    noisy = wrong_layouts(task.layouts, cfg.noise_p, rng) if cfg.backend == "noisy_oracle" else set()
    guides, records = [], []
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    try:
        for layout in range(task.layouts):
            env.task.forced_layout = layout
            env.reset()
            ident = env.task.identities()[0]
            bodies = [ident["object"], *_other_bodies(env.task, ident)]
            proposal = propose_keypoints(
                env.backend,
                0,
                bodies,
                camera=cfg.camera,
                width=cfg.width,
                height=cfg.height,
                per_object=cfg.per_object,
                grid=tuple(cfg.grid),
                seed=cfg.seed,
            )
            goal = ident["goal"]
            truth = oracle_answer(proposal, task.name, ident["object"], goal)
            errors: list[str] = []
            if cfg.backend == "oracle":
                answer, source = truth, "oracle"
            elif cfg.backend == "noisy_oracle":
                answer, source = (
                    noisy_oracle_answer(proposal, task.name, ident["object"], goal, layout in noisy, rng),
                    ("noisy_oracle"),
                )
            else:
                reply = ask_vlm(client, proposal, ident["instruction"], task.layout_seed, layout, truth)
                answer, source, errors = reply.value, reply.source, reply.errors
            guide = guide_from_answer(answer, proposal, source, table_z=env.task.scene_view().table_z)
            guides.append(guide)
            if out is not None:
                proposal.save(out / f"layout_{layout:03d}.png")
                if layout == 0:
                    cv2.imwrite(str(out / "keypoints_prompt.png"), draw_choice(proposal, guide, answer)[..., ::-1])
            records.append(
                {
                    "layout": layout,
                    "instruction": ident["instruction"],
                    "marks": proposal.marks(),
                    "answer": answer.model_dump(),
                    "oracle": truth.model_dump(),
                    "matches_oracle": (answer.grasp, answer.target) == (truth.grasp, truth.target),
                    "source": source,
                    "errors": errors,
                    "guide": guide.to_json(),
                }
            )
    finally:
        env.close()
    summary = {
        "backend": cfg.backend,
        "camera": cfg.camera,
        "layouts": task.layouts,
        "layout_seed": task.layout_seed,
        "requests": client.requests_made if client is not None else 0,
        "sources": {s: sum(r["source"] == s for r in records) for s in sorted({r["source"] for r in records})},
        "wrong_layouts": sum(not r["matches_oracle"] for r in records),  # the realized noise (or VLM errors)
        "records": records,
    }
    if out is not None:
        (out / "keypoints.json").write_text(json.dumps(summary, indent=1))
    log.info(
        "keypoint guides for %d layouts: %s, %d not the oracle's",
        task.layouts,
        summary["sources"],
        summary["wrong_layouts"],
    )
    return guides, summary


def _other_bodies(task, ident: dict) -> list[str]:
    """Every object and destination of the task in a fixed order, the named object excluded."""
    view = task.scene_view()
    names = [*view.objects, *view.destinations]
    return [b for b in names if b != ident["object"]]


def attach_keypoint_reward(env, cfg: KeypointGuidanceConfig, gamma: float, out_dir: Path | None = None) -> dict:
    """Build the guides for env's layout pool and make the keypoint reward the env's reward."""
    guides, summary = build_guides(env.task, cfg, out_dir)
    env.set_reward(KeypointReward(env.task, guides, gamma, cfg.weights))
    return summary

"""Plan-guided bundles: the deploy runtime's plan executor drives the arm as the training env's plan controller
did, and bad plan sections are refused in one line.

The policy is tests/data/arm_pick_place_td3bc_plan: a TD3+BC residual on the oracle plan with two injected wrong
grasp options, trained by scripts/sample_efficiency.py (its README has the command).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from robot_rl.deploy import PolicyRuntime, load_bundle
from robot_rl.deploy.bundle import BundleError
from robot_rl.deploy.plan_executor import PlanSpec, PlanSpecError, compile_plan


@pytest.fixture(scope="module")
def plan_run(trained_pick_place_bundle) -> Path:
    """The committed plan-guided run, exported by `robot-rl export` with today's code (tests/conftest.py)."""
    return trained_pick_place_bundle.parent


def test_export_carries_the_corrected_plans(plan_run):
    bundle = load_bundle(plan_run / "bundle")
    plan = bundle.plan
    assert plan is not None and len(plan.plans) == 16
    assert bundle.observation[-1].inputs == ("plan_features",)
    for p in plan.plans:
        grasp = next(sg for sg in p["subgoals"] if sg["skill"] == "grasp")
        assert len(grasp["options"]) == 3  # the right one and the two injected
        # online correction measured the right grasp (centre, from the top, at the object) best: it comes first
        assert grasp["options"][0] == {"object": p["target_object"], "point": "center", "approach": "top",
                                       "height_m": 0.0}  # fmt: skip
    assert 0 < plan.residual_scale < 0.25 and plan.base_gain == 1.0  # the schedule's gains at iteration 50


@pytest.mark.parametrize("perceived", [False, True], ids=["simulator_state", "perceived_state"])
def test_runtime_acts_as_the_training_env(plan_run, perceived):
    """Step by step, on the same states, the runtime's action (plan + ONNX residual) equals what the training env
    applied: without observation noise (the runtime's perceived positions are then the simulator's), and with it
    when the training env's controller reads the perceived state too (guidance.perceived_state)."""
    from omegaconf import OmegaConf

    from robot_rl.commands.common import load_actor
    from robot_rl.envs import make_env
    from robot_rl.evaluation.evaluate import episode_info
    from robot_rl.training.checkpoint import load_checkpoint, task_record
    from robot_rl.training.ppo_trainer import restore_guidance

    cfg = OmegaConf.load(plan_run / "config.yaml")
    actor, _ = load_actor(cfg, plan_run)
    cfg.guidance.perceived_state = perceived
    env = make_env(cfg, num_worlds=24, seed=3, obs_noise=perceived, pushes=False)
    checkpoint = load_checkpoint(plan_run / "checkpoints" / "model_50.pt", expect=task_record(env.task))
    restore_guidance(env, checkpoint, evaluation=True)
    runtime = PolicyRuntime(plan_run / "bundle")
    obs = env.reset()
    worst, advanced = 0.0, 0
    for _ in range(120):
        raw = {k: v.numpy() for k, v in env.task.last_raw.items()}
        deployed = runtime.policy_actions(raw, **episode_info(env.env))
        assert np.array_equal(runtime.plan.sub, env.sub.numpy())  # the same subgoal in every world
        with torch.inference_mode():
            residual = actor(obs)
        obs, _, _, _ = env.step(residual)
        worst = max(worst, float(np.abs(deployed - env.last_action.numpy()).max()))
        advanced = max(advanced, int(env.sub.max()))
    print(f"largest action difference {worst:.2e}; furthest subgoal {advanced}")
    assert advanced >= 3  # the worlds got past reach, grasp and lift: the comparison covered the plan's skills
    assert worst < 1e-5


def test_bad_plan_sections_are_refused():
    plan = {
        "target_object": "red_cube",
        "destination": "blue_bowl",
        "subgoals": [{"skill": "grasp", "options": [{"object": "red_cube"}]}],
    }
    assert compile_plan(plan).skill.tolist() == [1]
    bad = [
        ({**plan, "subgoals": [{"skill": "juggle", "options": [{"object": "red_cube"}]}]}, "skill 'juggle'"),
        ({**plan, "subgoals": [{"skill": "grasp", "options": [{"object": "green_cube"}]}]}, "perceives only"),
        ({**plan, "subgoals": []}, "no subgoals"),
        ({"subgoals": plan["subgoals"]}, "needs target_object"),
        ({**plan, "subgoals": [{"skill": "grasp", "options": [{"object": "red_cube", "height_m": 3}]}]}, "height"),
    ]
    for p, words in bad:
        with pytest.raises(PlanSpecError, match=words) as e:
            compile_plan(p)
        assert "\n" not in str(e.value)
    with pytest.raises(PlanSpecError, match="timeout_steps"):
        PlanSpec.from_dict(
            {"approach_gain": 0.7, "base_gain": 1, "residual_scale": 0.1, "timeout_steps": 0, "scale_xyz": [0.03] * 3,
             "table_z": 0, "object_half_height": 0.025, "destination_offset": [0, 0, 0], "plans": [plan]}
        )  # fmt: skip


def test_edited_or_inconsistent_plan_bundles_are_refused(plan_run, tmp_path):
    from robot_rl.deploy.bundle import integrity_hash, sha256_file

    def resealed(edit) -> Path:
        out = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
        shutil.copytree(plan_run / "bundle", out)
        doc = yaml.safe_load((out / "policy.yaml").read_text())
        edit(doc)
        doc["integrity"]["sha256"] = integrity_hash(doc, sha256_file(out / "policy.onnx"))
        (out / "policy.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        return out

    edited = tmp_path / "edited"
    shutil.copytree(plan_run / "bundle", edited)
    text = (edited / "policy.yaml").read_text().replace("point: center", "point: left", 1)
    (edited / "policy.yaml").write_text(text)
    with pytest.raises(BundleError, match="edited after export"):
        load_bundle(edited)
    # what the hash cannot tell: sections resealed by hand that do not fit together
    with pytest.raises(BundleError, match="no plan section"):
        load_bundle(resealed(lambda d: d.pop("plan")))
    with pytest.raises(BundleError, match="perceives only"):
        load_bundle(resealed(lambda d: d["plan"]["plans"][0]["subgoals"][0]["options"][0].update(object="x_cube")))

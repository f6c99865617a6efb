"""The deploy runtime alone, in a venv holding only the base install (numpy, onnxruntime, pyyaml),
flies the exported policy as well as torch does on the same seeds (within 2 points).

The policy is tests/data/crazyflie_hover_ppo: the final checkpoint of a `make demo` run (seed 0),
kept so this test measures a policy that really succeeds rather than an untrained one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "crazyflie_hover_ppo"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("base")
    wheel_dir = tmp / "wheel"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheel_dir),
            str(ROOT),
        ],
        check=True,
    )
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    (wheel,) = wheel_dir.glob("robot_rl-*.whl")
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True)  # base deps only
    for heavy in ("torch", "mujoco", "rsl_rl", "hydra"):
        probe = subprocess.run([str(py), "-c", f"import {heavy}"], capture_output=True)
        assert probe.returncode != 0, f"{heavy} must not be in the base install"
    return py


def evaluate_served(python: Path, bundle: Path, env, cwd: Path) -> dict:
    """evaluate() with the actions of `python -m robot_rl.deploy.pipe_server bundle` run by that interpreter."""
    from robot_rl.evaluation.evaluate import evaluate, pipe_policy

    # cwd: not the repo, the base venv must not see our sources
    proc = subprocess.Popen(
        [str(python), "-m", "robot_rl.deploy.pipe_server", str(bundle)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=cwd,
    )
    try:
        return evaluate(env, pipe_policy(proc), progress=False)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_deploy_runtime_in_base_venv_matches_torch(base_venv, tmp_path):
    from omegaconf import OmegaConf

    from robot_rl.commands.common import load_actor
    from robot_rl.envs import make_env
    from robot_rl.evaluation.evaluate import evaluate, torch_policy
    from robot_rl.export.bundle_export import export_bundle

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(DATA / "config.yaml", run / "config.yaml")
    shutil.copy(DATA / "model.pt", run / "checkpoints" / "model_1.pt")
    cfg = OmegaConf.load(run / "config.yaml")
    actor, env1 = load_actor(cfg, run)
    bundle = export_bundle(actor, env1.task, run / "bundle", {"run": "test"})

    def env():
        return make_env(cfg, num_worlds=256, seed=777, pushes=False)

    torch_result = evaluate(env(), torch_policy(actor), progress=False)
    onnx_result = evaluate_served(base_venv, bundle.path, env(), tmp_path)
    s_torch = torch_result["metrics"]["success_rate"]
    s_onnx = onnx_result["metrics"]["success_rate"]
    print(f"success torch {s_torch:.3f} vs deploy runtime {s_onnx:.3f} over 256 episodes")
    assert s_torch > 0.5  # a real policy, or the comparison says nothing
    assert abs(s_torch - s_onnx) <= 0.02


def test_plan_guided_bundle_in_base_venv_matches_torch(base_venv, trained_pick_place_bundle, tmp_path):
    """The pick-and-place residual on its plan (tests/data/arm_pick_place_td3bc_plan) through the base install:
    the bundle's plan executor and ONNX network against the training env's plan controller and torch actor, in
    the run's evaluation conditions (observation noise on; its controller read the perceived state in training
    too, guidance.perceived_state)."""
    from omegaconf import OmegaConf

    from robot_rl.commands.common import load_actor
    from robot_rl.commands.evaluate import evaluation_env
    from robot_rl.evaluation.evaluate import evaluate, torch_policy
    from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint, task_record
    from robot_rl.training.ppo_trainer import restore_guidance

    run = trained_pick_place_bundle.parent  # the committed run, exported (tests/conftest.py)
    cfg = OmegaConf.load(run / "config.yaml")
    cfg.eval.episodes = 512  # outcomes of a few contact-rich episodes flip with float rounding: more of them
    actor, _ = load_actor(cfg, run)
    guided = evaluation_env(cfg)
    restore_guidance(guided, load_checkpoint(latest_checkpoint(run), expect=task_record(guided.task)), evaluation=True)
    torch_result = evaluate(guided, torch_policy(actor), progress=False)
    served = evaluation_env(cfg, guidance=False)
    onnx_result = evaluate_served(base_venv, trained_pick_place_bundle, served, tmp_path)
    s_torch = torch_result["metrics"]["success_rate"]
    s_onnx = onnx_result["metrics"]["success_rate"]
    print(f"pick-and-place success torch {s_torch:.3f} vs deploy runtime {s_onnx:.3f} over 512 episodes")
    assert s_torch > 0.8
    assert abs(s_torch - s_onnx) <= 0.02

"""Bad input: one clear line on stderr, exit code 2, never a traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, MUJOCO_GL="egl")
    return subprocess.run(
        [sys.executable, "-m", "robot_rl.cli", *args], capture_output=True, text=True, cwd=cwd or ROOT, env=env
    )


def assert_one_line_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_unknown_task(tmp_path):
    p = run_cli("train", "task=crazyflie_hoover", f"runs_root={tmp_path}")
    assert_one_line_error(p, "crazyflie_hoover", "crazyflie_hover")


def test_wrong_type_in_override(tmp_path):
    p = run_cli("train", "train.iterations=lots", f"runs_root={tmp_path}")
    assert_one_line_error(p, "train.iterations", "int")


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["backend.device=cuda"], ["backend.device=cuda", "backend=mujoco steps on the CPU"]),
        (["backend=mjwarp", "backend.device=cuda:1"], ["backend.device=cuda:1", "torch sees"]),
        (["algo=td3", "algo.device=cuda"], ["algo.device=cuda", "torch sees"]),
        (["backend=mjwarp", "backend.device=gpu"], ["backend.device", "cuda"]),
    ],
)
def test_a_device_this_machine_or_backend_cannot_use(tmp_path, overrides, needles):
    """Refused before a run directory exists (this machine's torch is CPU-only: see requirements/constraints.txt)."""
    if torch.cuda.is_available() and "torch sees" in needles:
        pytest.skip("a CUDA device is visible here")
    p = run_cli("train", *overrides, "task.num_worlds=4", f"runs_root={tmp_path}")
    assert_one_line_error(p, *needles)
    assert not any(tmp_path.iterdir())


def test_unknown_command():
    assert_one_line_error(run_cli("fly"), "unknown command")


def _fake_run(tmp_path: Path) -> Path:
    from robot_rl.config import load_config, to_yaml

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(to_yaml(load_config([f"runs_root={tmp_path}"])))
    return run


def test_missing_checkpoint(tmp_path):
    run = _fake_run(tmp_path)
    assert_one_line_error(run_cli("export", f"run={run}"), "no checkpoints")


def test_corrupt_checkpoint(tmp_path):
    run = _fake_run(tmp_path)
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "model_10.pt").write_bytes(b"\x80\x02garbage" * 100)
    assert_one_line_error(run_cli("export", f"run={run}"), "model_10.pt", "corrupt")


def test_foreign_checkpoint(tmp_path):
    run = _fake_run(tmp_path)
    (run / "checkpoints").mkdir()
    torch.save({"weights": torch.zeros(3)}, run / "checkpoints" / "model_1.pt")
    assert_one_line_error(run_cli("eval", f"run={run}"), "not a robot_rl checkpoint")


def test_unknown_eval_policy(tmp_path):
    assert_one_line_error(
        run_cli("eval", f"run={tmp_path}", "policy=random"), "'trained' (default), 'zero' or 'corrected_plan'"
    )


def test_not_a_run_directory(tmp_path):
    assert_one_line_error(run_cli("eval", f"run={tmp_path}"), "not a run directory")


def test_malformed_mjcf(tmp_path):
    from sim.backends.mujoco_batch import ModelError, load_model

    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body><geom type='sphere' size='oops'/></body></worldbody></mujoco>")
    with pytest.raises(ModelError, match="bad.xml does not compile"):
        load_model(bad)
    # and through the CLI: a task pointing at that file
    code = (
        "import sys; from robot_rl import cli; import sim.tasks.crazyflie as c; "
        f"c.CrazyflieHover.model_path = {str(bad)!r}; sys.exit(cli.main(sys.argv[1:]))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, "train", f"runs_root={tmp_path}", "task.num_worlds=2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert_one_line_error(p, "bad.xml does not compile")


def test_bundle_with_wrong_schema_version(tmp_path):
    (tmp_path / "policy.yaml").write_text("schema_version: 99\nrobot: x\n")
    assert_one_line_error(run_cli("sitl", f"bundle={tmp_path}"), "schema_version 99")


def test_bundle_observation_layout_mismatch(tmp_path, hover_bundle):
    import shutil

    import yaml

    b = tmp_path / "b"
    shutil.copytree(hover_bundle, b)
    doc = yaml.safe_load((b / "policy.yaml").read_text())
    doc["observation"]["terms"] = doc["observation"]["terms"][:-1]  # one term fewer than the network expects
    doc["observation"]["size"] -= 3
    for k in ("mean", "std"):
        doc["normalizer"][k] = doc["normalizer"][k][:-3]
    (b / "policy.yaml").write_text(yaml.safe_dump(doc))
    assert_one_line_error(run_cli("sitl", f"bundle={b}", "ros=false"), "edited after export")
    from robot_rl.deploy.bundle import integrity_hash, sha256_file

    doc["integrity"]["sha256"] = integrity_hash(doc, sha256_file(b / "policy.onnx"))  # resealed by hand
    (b / "policy.yaml").write_text(yaml.safe_dump(doc))
    assert_one_line_error(run_cli("sitl", f"bundle={b}", "ros=false"), "ONNX input size")

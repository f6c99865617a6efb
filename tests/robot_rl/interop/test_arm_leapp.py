"""The arm's policies stay out of LEAPP for now: `robot-rl export format=leapp` of the committed arm_reach run
ends in one line saying why (the runtime's IK is not traceable into an ONNX stage), exit 2; import has no arm."""

import shutil
from pathlib import Path

import pytest

pytest.importorskip("leapp")

from robot_rl.cli import main  # noqa: E402

DATA = Path(__file__).parents[2] / "data" / "arm_reach_ppo"


def test_arm_leapp_export_is_refused_naming_the_ik(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(DATA / "config.yaml", run / "config.yaml")
    shutil.copy(DATA / "model.pt", run / "checkpoints" / "model_300.pt")
    (run / "config.yaml").write_text(
        (run / "config.yaml").read_text().replace("runs_root: runs", f"runs_root: {tmp_path}")
    )
    code = main(["export", f"run={run}", "format=leapp"])
    line = capsys.readouterr().err.strip()
    assert code == 2, line
    assert "\n" not in line and "differential IK" in line and "matrix inverse" in line
    assert (run / "bundle" / "policy.yaml").is_file()  # our bundle (with its IK stage) is still written
    assert not (run / "leapp").exists()


def test_import_onto_an_arm_is_refused(tmp_path, capsys):
    code = main(["import", str(tmp_path), "robot=panda_like"])
    line = capsys.readouterr().err.strip()
    assert code == 2 and "import maps onto go1_like, crazyflie_2_1 only" in line

"""The sample-efficiency sweep resumes after an interruption and skips finished runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("pydantic")
pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[2] / "scripts" / "sample_efficiency.py"


def load_script():
    spec = importlib.util.spec_from_file_location("sample_efficiency", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sweep_resumes_and_skips_finished_runs(tmp_path, monkeypatch):
    sweep = load_script()
    monkeypatch.chdir(tmp_path)
    argv = ["--task", "arm_push", "--variants", "dense,plan", "--seeds", "0", "--chunks", "2", "--chunk-iterations",
            "1", "--worlds", "16", "--layouts", "2", "--episodes", "8", "--out", str(tmp_path / "sweep")]  # fmt: skip
    assert sweep.main(argv) == 0
    curve = tmp_path / "sweep" / "dense_s0" / "curve.json"
    points = json.loads(curve.read_text())
    assert [p["iterations"] for p in points] == [1, 2] and points[1]["env_steps"] == 2 * points[0]["env_steps"]
    table = json.loads((tmp_path / "sweep" / "table.json").read_text())
    assert set(table) >= {"dense", "plan"} and table["dense"]["cap"] == points[1]["env_steps"]

    # Finished: nothing is trained again.
    stamp = curve.stat().st_mtime_ns
    calls = []
    monkeypatch.setattr(sweep.commands, "cmd_train", lambda o: calls.append(o) or [])
    assert sweep.main(argv) == 0
    assert calls == [] and curve.stat().st_mtime_ns == stamp
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)

    # Interrupted after the first chunk: resumes from the checkpoint, not from scratch.
    curve.write_text(json.dumps(points[:1]))
    assert sweep.main(argv) == 0
    again = json.loads(curve.read_text())
    assert [p["iterations"] for p in again] == [1, 2]
    meta = json.loads((tmp_path / "sweep" / "dense_s0" / "meta.json").read_text())
    assert meta["iterations"] == 2 and meta["total_steps"] == points[1]["env_steps"]

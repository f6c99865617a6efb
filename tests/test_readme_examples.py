"""The README's short examples, run verbatim as a new user would: `.venv/bin/robot-rl ...` from a directory
holding `.venv` and `runs/`, no `make`, no display and MUJOCO_GL unset. Placeholders (`<run>`, `<plan run>`)
name a real tiny run (tests/conftest.py). Each works (exit 0) or ends in one clear line on stderr.

Not run here: `play ... episode=N` (tests/robot_rl/play/test_play_episode.py films an evaluation episode and
checks its error against the record), training commands (minutes; the same code paths run in tests/robot_rl/training
and cli), SITL and deploy check (tests/ros_nodes), replay/sysid (need a flight log: tests/robot_rl/sim2real)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"<(run|plan run)>")
SHORT_VERBS = ("eval", "export", "play")  # seconds on a tiny run
# eval/play read the run (its file order: a play of an evaluation episode needs that evaluation first)
ORDER = {"eval": 0, "export": 1, "play": 2}


def readme_blocks(lang: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def readme_commands() -> list[str]:
    """Every `.venv/bin/robot-rl` line of the README's bash blocks, continuations joined, comments cut."""
    out = []
    for block in readme_blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith(".venv/bin/robot-rl "):
                out.append(" ".join(line.split()))
    return out


def short_commands() -> list[str]:
    cmds = [c for c in readme_commands() if c.split()[1] in SHORT_VERBS and " episode=" not in c]
    return sorted(cmds, key=lambda c: ORDER[c.split()[1]])


def headless_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")}
    env["ROS_DOMAIN_ID"] = "87"
    return env


@pytest.fixture(scope="module")
def user_dir(tiny_run: Path, tmp_path_factory) -> Path:
    """A directory as a user's clone looks after training: .venv/ and runs/<run>/."""
    d = tmp_path_factory.mktemp("user")
    (d / ".venv").symlink_to(Path(sys.prefix))  # the environment running the tests (make test: the repo's .venv)
    shutil.copytree(tiny_run, d / "runs" / "tiny")
    return d


def test_the_readme_lists_the_examples_this_test_runs():
    verbs = {c.split()[1] for c in readme_commands()}
    assert {"train", "eval", "export", "play", "dashboard", "sitl", "deploy"} <= verbs
    assert len(short_commands()) >= 5


@pytest.mark.parametrize("command", short_commands())
def test_short_readme_command_runs_headless(command: str, user_dir: Path) -> None:
    args = PLACEHOLDER.sub("tiny", command).split()
    proc = subprocess.run(args, cwd=user_dir, env=headless_env(), capture_output=True, text=True, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 0 or len(err) == 1, (command, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, (command, proc.stderr[-2000:])
    assert proc.returncode == 0, (command, proc.stderr)  # on a trained run every short example works


def test_readme_python_example_runs_verbatim(user_dir: Path) -> None:
    (block,) = [b for b in readme_blocks("python") if "PolicyRuntime" in b]
    script = PLACEHOLDER.sub("tiny", block)
    proc = subprocess.run([str(user_dir / ".venv/bin/python"), "-c", script], cwd=user_dir, env=headless_env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.split()) == 4  # roll, pitch, yaw rate, thrust


def test_readme_dashboard_command_serves(user_dir: Path) -> None:
    (command,) = [c for c in readme_commands() if c.split()[1] == "dashboard"]
    args = command.split() + ["--port", "0"]
    proc = subprocess.Popen(args, cwd=user_dir, env=headless_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    try:
        deadline, url = time.monotonic() + 60, None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            m = re.search(r"http://127\.0\.0\.1:\d+", line)
            url = m.group(0) if m else None
        assert url, "the dashboard printed no URL"
        import json
        import urllib.request

        with urllib.request.urlopen(url + "/api/leaderboard", timeout=30) as r:
            board = json.loads(r.read())
        assert [x["name"] for x in board["runs"]] == ["tiny"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)

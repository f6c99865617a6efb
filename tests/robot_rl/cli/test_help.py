"""`robot-rl <verb> --help` lists the verb's options with their defaults, `--version` names the installed
version, and a machine without a display renders offscreen without MUJOCO_GL set by hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robot_rl import cli
from robot_rl.cli_help import VERBS

ROOT = Path(__file__).parents[3]

# a default each verb's help must show, as `key = default`
SHOWN = {
    "train": "train.iterations = 300",
    "demo": "algo.learning_rate = 0.001",
    "imitate": "imitation.rounds = 8",
    "eval": "eval.episodes = 1024",
    "play": "play.seconds = 8.0",
    "export": "format=bundle|leapp",
    "import": "rate_hz=HZ",
    "sitl": "record=FILE.mcap",
    "collect": "episodes=N",
    "replay": "params=sysid.yaml",
    "sysid": "mass_kg=KG",
}


def test_every_verb_has_a_help_case():
    assert set(SHOWN) == set(VERBS)


@pytest.mark.parametrize("verb", sorted(SHOWN))
def test_verb_help_lists_its_options_and_exits_0(verb, capsys):
    assert cli.main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: robot-rl {verb}")
    assert SHOWN[verb] in out, out


def test_help_shows_allowed_values_from_the_schema(capsys):
    assert cli.main(["train", "-h"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "algo.gamma = " in ln)
    assert "a number in [0, 1]" in line


def test_version_is_the_installed_one(capsys):
    assert cli.main(["--version"]) == 0
    want = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert capsys.readouterr().out.strip() == f"robot-rl {want}"


def test_a_machine_without_a_display_renders_offscreen_by_default():
    code = (
        "from robot_rl.cli_help import choose_gl_backend\n"
        "chosen = choose_gl_backend()\n"
        "import mujoco\n"
        "m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=\"1\"/></worldbody></mujoco>')\n"
        "r = mujoco.Renderer(m, 32, 32)\n"
        "r.update_scene(mujoco.MjData(m))\n"
        "print(chosen, r.render().shape)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[0] in ("egl", "osmesa") and "(32, 32, 3)" in out.stdout


def test_a_rendering_failure_is_one_line_naming_the_fix(tiny_run):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["MUJOCO_GL"] = "glfw"  # chosen by hand, and no display to open a window on
    robot_rl = Path(sys.executable).parent / "robot-rl"
    out = subprocess.run(
        [str(robot_rl), "play", f"run={tiny_run}", "play.seconds=0.1"], env=env, capture_output=True, text=True
    )
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert lines[-1].startswith("robot-rl: error: rendering failed") and "MUJOCO_GL=egl" in lines[-1]

"""`robot-rl play episode=<id>`: one episode of a recorded evaluation filmed, with the final error the evaluation
recorded for it (the evaluation's env rebuilt with its seed and conditions is deterministic)."""

from __future__ import annotations

import json

import pytest

from robot_rl import commands
from robot_rl.config import ConfigError


def test_the_filmed_episode_ends_with_the_recorded_error(tiny_run, capsys):
    record = json.loads((tiny_run / "eval" / "checkpoint_train.json").read_text())
    episode = 5
    out = commands.cmd_play([f"run={tiny_run}", f"episode={episode}"])
    assert out == tiny_run / "videos" / f"checkpoint_train_episode_{episode}.mp4" and out.stat().st_size > 1000
    printed = capsys.readouterr().out
    recorded = record["per_episode"][episode]["position_error_m"] * 100
    # the same number, to the printed 0.01 cm, twice in the line: replayed and recorded
    assert f"final position error {recorded:.2f} cm (recorded {recorded:.2f} cm)" in printed, printed


@pytest.mark.parametrize(
    "args,expect",
    [
        (["episode=32"], "has episodes 0..31"),
        (["episode=two"], "an episode number, not 'two'"),
        (["episode=0", "evaluation=nope"], "no evaluation 'nope'"),
        (["evaluation=checkpoint_train"], "give episode=<number> too"),
        (["episode=0", "checkpoint=x.pt"], "drop checkpoint="),
    ],
)
def test_bad_episode_requests_are_one_clear_error(tiny_run, args, expect):
    with pytest.raises(ConfigError, match=expect):
        commands.cmd_play([f"run={tiny_run}", *args])

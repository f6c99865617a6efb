"""Building a learner prints nothing: rsl_rl's observation-group banner and network dumps go to the run's
model.txt (and to the terminal only with ROBOT_RL_VERBOSE=1)."""

from __future__ import annotations

from omegaconf import OmegaConf

from robot_rl.config import load_config
from robot_rl.envs import make_env
from robot_rl.training.ppo_trainer import PPOTrainer


def _trainer(tmp_path):
    cfg = load_config(["task.num_worlds=4"])
    env = make_env(cfg, num_worlds=4, nthread=1)
    return PPOTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True), run_dir=tmp_path)


def test_the_model_dump_goes_to_the_run_not_the_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ROBOT_RL_VERBOSE", raising=False)
    trainer = _trainer(tmp_path)
    assert capsys.readouterr().out == ""
    saved = (tmp_path / "model.txt").read_text()
    assert "Actor Model" in saved and "Critic Model" in saved and saved == trainer.model_summary


def test_verbose_prints_the_model_dump(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROBOT_RL_VERBOSE", "1")
    _trainer(tmp_path)
    assert "Actor Model" in capsys.readouterr().out

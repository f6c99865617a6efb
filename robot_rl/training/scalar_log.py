"""Where training scalars go: TensorBoard (``<run>/tb``) always, and with ``logger=wandb`` a Weights & Biases
run beside it in offline mode (``<run>/wandb``; nothing is sent: ``wandb sync`` uploads it when you choose).

The trainers only call ``add_scalar(tag, value, step)`` and ``close()``, TensorBoard's SummaryWriter API.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class ScalarLog:
    """SummaryWriter's add_scalar/close, mirrored to a W&B run when one is given (its step is the iteration)."""

    def __init__(self, tensorboard: Any, wandb_run: Any = None) -> None:
        self.tensorboard = tensorboard
        self.wandb_run = wandb_run

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.tensorboard.add_scalar(tag, value, step)
        if self.wandb_run is not None:
            self.wandb_run.log({tag: float(value)}, step=int(step))

    def close(self) -> None:
        self.tensorboard.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()


def open_scalar_log(run_dir: Path, logger: str, config: dict[str, Any]) -> ScalarLog:
    """The run's scalar log for ``logger`` (tensorboard or wandb)."""
    from torch.utils.tensorboard import SummaryWriter

    tensorboard = SummaryWriter(log_dir=str(run_dir / "tb"), flush_secs=5)
    if logger != "wandb":
        return ScalarLog(tensorboard)
    os.environ["WANDB_MODE"] = "offline"  # also for anything wandb starts in a child process
    import wandb

    (run_dir / "wandb").mkdir(exist_ok=True)
    settings = wandb.Settings(
        mode="offline", silent=True, console="off", x_disable_stats=True, disable_git=True, save_code=False
    )
    run = wandb.init(
        project="robot_rl",
        name=run_dir.name,
        dir=str(run_dir),
        config=config,
        settings=settings,
        reinit="create_new",  # a sweep trains several runs in one process
    )
    return ScalarLog(tensorboard, run)

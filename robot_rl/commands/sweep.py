"""robot-rl train -m ... hydra/launcher=<name>: a sweep handed to a Hydra launcher.

The launchers are Hydra's own plugins: `joblib` (local processes), `ray` (a Ray cluster: `ray.init`'s address, or a
local one on this machine's loopback), `submitit_slurm` (a SLURM array job) and `submitit_local`. Every combination
is checked by our loader before any job starts; each job then trains one run exactly as `robot-rl train` does
(run directory, checkpoints, the evaluation store's index) from the config Hydra composed for it. Settings of the
launcher are Hydra's overrides (`hydra.launcher.n_jobs=4`, `hydra.launcher.partition=gpu`, `hydra.sweep.dir=...`).
Without hydra/launcher=, `-m` trains the combinations one after another in this process.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from robot_rl.config import CONFIG_DIR, ConfigError, expand_sweep, load_config

LAUNCHERS = ("basic", "joblib", "ray", "submitit_local", "submitit_slurm")
# Ray's own defaults bind its services to the machine's network address and start a dashboard; ours keep a local
# cluster on the loopback (a given ray.init address= is used as it is).
RAY_LOCAL = (
    "+hydra.launcher.ray.init._node_ip_address=127.0.0.1",
    "+hydra.launcher.ray.init.include_dashboard=false",
)


def is_hydra_override(arg: str) -> bool:
    """hydra/<group>=... and hydra.<key>=...: settings of the sweep, not of the runs."""
    key = arg.lstrip("+~").split("=", 1)[0]
    return key.startswith(("hydra/", "hydra."))


def launcher_name(args: list[str]) -> str | None:
    for a in args:
        if a.lstrip("+").startswith("hydra/launcher="):
            return a.split("=", 1)[1]
    return None


def run_sweep(args: list[str], job: Callable[[DictConfig], str]) -> list[Path]:
    """Every combination of the overrides in args, launched by the Hydra launcher they name: job(cfg) runs once
    per combination (a module-level function: launchers pickle it) and returns its run directory."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from hydra.types import RunMode
    from omegaconf.errors import OmegaConfBaseException

    name = launcher_name(args)
    if name not in LAUNCHERS:
        raise ConfigError(f"hydra/launcher={name}: one of {', '.join(LAUNCHERS)}")
    run_args = [a for a in args if not is_hydra_override(a)]
    for combination in expand_sweep(run_args):  # refuse a bad combination before any job starts
        load_config(combination)
    given = {a.lstrip("+~").split("=", 1)[0] for a in args}
    extra = []  # a local Ray cluster on the loopback, whatever other ray.init settings are given
    if name == "ray" and "hydra.launcher.ray.init.address" not in given:  # joining a cluster: its own settings
        extra = [o for o in RAY_LOCAL if o.lstrip("+").split("=", 1)[0] not in given]
    overrides = [*args, *extra, "hydra/job_logging=none", "hydra/hydra_logging=none"]
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2("robot_rl", create_config_search_path(str(CONFIG_DIR)))
    try:
        if name == "submitit_slurm" and shutil.which("srun") is None:
            cfg = hydra.compose_config("config", overrides, run_mode=RunMode.MULTIRUN)
            script = write_slurm_script(cfg.hydra, len(expand_sweep(run_args)))
            raise ConfigError(f"no SLURM on this machine (srun not found), nothing submitted; the job: {script}")
        batches = hydra.multirun(config_name="config", task_function=job, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(" ".join(str(e).split())) from None
    finally:
        GlobalHydra.instance().clear()
    return [Path(job.return_value) for batch in batches for job in batch]  # a failed job's error is raised here


def write_slurm_script(hydra_cfg: DictConfig, jobs: int) -> Path:
    """The sbatch script of the array job that hydra/launcher=submitit_slurm submits for `jobs` jobs, rendered by
    submitit from the launcher's settings as the launcher passes them, written to <sweep dir>/slurm_array.sh."""
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from submitit.slurm.slurm import SlurmExecutor

    class RenderOnly(SlurmExecutor):  # submitit checks for srun before it renders anything; this one submits nothing
        @classmethod
        def affinity(cls) -> int:
            return 1

    params = OmegaConf.to_container(hydra_cfg.launcher, resolve=True)
    params.pop("_target_", None)
    executor = RenderOnly(params.pop("submitit_folder"), max_num_timeout=params.pop("max_num_timeout"))
    shared = set(OmegaConf.structured(BaseQueueConf).keys())  # the launcher's names common to every cluster
    generic = {k: v for k, v in params.items() if k in shared and v is not None}  # None: not set
    specific = {k: v for k, v in params.items() if k not in shared}
    executor.update_parameters(**executor._convert_parameters(generic), **specific)
    executor.parameters["map_count"] = jobs  # an array job, as the launcher submits a sweep
    text = executor._make_submission_file_text(executor._submitit_command_str, uid="sweep")
    path = Path(str(hydra_cfg.sweep.dir)) / "slurm_array.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def job_config() -> tuple[DictConfig, list[str]]:
    """Inside a launched job (whichever process or machine Hydra runs it in): our loader's config for the job's
    overrides, and those overrides. Composed again rather than taken from Hydra: the schemas are classes made at
    run time, which a Ray worker would otherwise receive as copies of another process's classes."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    overrides = [o for o in HydraConfig.get().overrides.task if not is_hydra_override(o)]
    running = GlobalHydra.instance().hydra  # the launching Hydra, set aside while our loader composes
    GlobalHydra.instance().clear()
    try:
        return load_config(overrides), overrides
    finally:
        GlobalHydra.instance().clear()
        if running is not None:
            GlobalHydra.instance().initialize(running)

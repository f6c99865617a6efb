"""The env owns the decimation loop: a task's controls() only says what the actuators get; the physics
advances in sim.env.step_control_period, by exactly the task's substeps, under each kind of Controls."""

from __future__ import annotations

import pytest
import torch

from sim.env import BatchedEnv, EnvConfig, step_control_period
from sim.tasks import make_task
from sim.tasks.base import Controls

CASES = [
    ("crazyflie_hover", {"action_mode": "rpyt"}, "callback"),  # the native firmware model
    ("crazyflie_hover", {"action_mode": "rpyt", "firmware_impl": "torch"}, "per_substep"),
    ("arm_reach", {"action_mode": "ee_position"}, "schedule"),
    ("quadruped_velocity", {"action_mode": "joint_position"}, "schedule"),
    ("crazyflie_swarm", {"action_mode": "motors"}, "hold"),
]


def _env(name: str, params: dict) -> BatchedEnv:
    cfg = EnvConfig(num_worlds=2, seed=0, nthread=1, randomization="none", obs_noise=False, pushes=False)
    env = BatchedEnv(make_task(name, **params), cfg)
    env.reset()
    return env


@pytest.mark.parametrize("name, params, kind", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_controls_do_not_step_and_the_env_steps_the_substeps(name, params, kind):
    env = _env(name, params)
    task, backend = env.task, env.backend
    t0 = backend.time.clone()
    controls = task.controls(torch.zeros(env.num_envs, env.num_actions, dtype=torch.float64))
    assert isinstance(controls, Controls)
    set_fields = [f for f in ("hold", "schedule", "per_substep", "callback") if getattr(controls, f) is not None]
    assert set_fields == [kind]
    assert torch.equal(backend.time, t0), "controls() must not step the physics"
    step_control_period(task, controls)
    dt = backend.model.opt.timestep
    assert torch.allclose(backend.time - t0, torch.full_like(t0, task.substeps * dt))
    env.close()


def test_a_torch_actuator_model_is_asked_once_per_substep_in_order():
    env = _env("crazyflie_hover", {"action_mode": "rpyt", "firmware_impl": "torch"})
    task = env.task
    inner = task.controls(torch.zeros(env.num_envs, env.num_actions, dtype=torch.float64))
    asked: list[tuple[int, float]] = []

    def per_substep(k: int) -> torch.Tensor:
        asked.append((k, float(env.backend.time[0])))
        return inner.per_substep(k)

    step_control_period(task, Controls(per_substep=per_substep))
    dt = env.backend.model.opt.timestep
    assert [k for k, _ in asked] == list(range(task.substeps))
    # each tick sees the state after the substeps before it (the firmware runs between physics steps)
    assert [round((t - asked[0][1]) / dt) for _, t in asked] == list(range(task.substeps))
    env.close()

"""Every tensor the env, its task and the backends create names its device: the env's (`backend.device`).

A factory call without one (torch.zeros(n), torch.rand(n, generator=g)) puts its tensor on the CPU, which a GPU
env (backend=mjwarp backend.device=cuda) then mixes with its own and fails, or copies to the host every step. No
GPU is here to show that failure, so the factory calls are recorded instead: each task is built, reset and
stepped, its teachers and capabilities called, and any call made from sim/ or robot_rl/ that names no device is
reported with where it was made. (`_like` and `Tensor.new_*` calls take their source's device and are fine.)
"""

from __future__ import annotations

import collections
import traceback

import pytest
import torch
from torch.overrides import TorchFunctionMode

from sim.env import BatchedEnv, EnvConfig
from sim.tasks import make_task

FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "eye",
             "tensor", "as_tensor"}  # fmt: skip


class UndevicedFactories(TorchFunctionMode):
    """Records the tensor factory calls made by our code that name no device (as_tensor and tensor of a tensor keep
    its device and are not counted; calls made inside a library, e.g. warp's to_torch, are the library's)."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        of_tensor = name in ("tensor", "as_tensor") and args and isinstance(args[0], torch.Tensor)
        if name in FACTORIES and "device" not in kwargs and not of_tensor:
            caller = next(f for f in reversed(traceback.extract_stack()[:-1]) if "/torch/" not in f.filename)
            if ("/sim/" in caller.filename or "/robot_rl/" in caller.filename) and "/tests/" not in caller.filename:
                self.sites[f"{name} at {caller.filename.rsplit('/', 3)[-1]}:{caller.lineno}"] += 1
        return func(*args, **kwargs)


CASES = [
    ("crazyflie_hover", {}),  # the native firmware (a MuJoCo callback)
    ("crazyflie_hover", {"firmware_impl": "torch"}),
    ("crazyflie_goto", {}),
    ("crazyflie_swarm", {}),
    ("arm_reach", {}),
    ("arm_push", {"action_mode": "joint"}),
    ("arm_pick_place", {"action_mode": "ee_position"}),
    ("quadruped_velocity", {}),
]


def undeviced_sites(task: str, params: dict, backend: str = "mujoco", steps: int = 12) -> dict[str, int]:
    with UndevicedFactories() as recorded:
        env = BatchedEnv(make_task(task, **params), EnvConfig(num_worlds=3, backend=backend, nthread=1))
        gen = torch.Generator().manual_seed(0)
        for _ in range(steps):
            action = torch.randn(3, env.num_actions, generator=gen, dtype=torch.float64, device=env.device)
            env.step(0.5 * action)
            for teacher in env.task.TEACHERS:
                env.task.teacher(teacher)
            env.task.scene_view()
            env.task.trace_position()
        env.close()
    return dict(recorded.sites)


@pytest.mark.parametrize(
    ("task", "params"), CASES, ids=[f"{t}-{'-'.join(map(str, p.values())) or 'default'}" for t, p in CASES]
)
def test_every_tensor_a_task_creates_names_the_envs_device(task, params):
    assert undeviced_sites(task, params) == {}


def test_the_gpu_backend_names_its_device_too():
    pytest.importorskip("mujoco_warp")
    assert undeviced_sites("crazyflie_swarm", {}, backend="mjwarp", steps=4) == {}  # rays, resets, expand

"""Settings that keep an off-policy training run to seconds in the tests (off-policy learners, planned exploration)."""

import pytest

FAST = [
    "task.num_worlds=16",
    "train.iterations=2",
    "algo.steps_per_iteration=8",
    "algo.batch_size=128",
    "algo.learning_starts=64",
    "algo.buffer_size=4096",
    "algo.actor_hidden_dims=[32,32]",
    "algo.critic_hidden_dims=[32,32]",
    "train.progress=false",
]


@pytest.fixture(scope="session")
def fast_overrides() -> list[str]:
    return list(FAST)

"""A replay buffer for num_worlds parallel worlds: a preallocated ring of env steps, on the learner's device.

Row t of the ring holds one env step of every world: observations (and critic observations when the critic
is asymmetric), actions, rewards, the next observations and two flags, `done` (the episode ended here: a
termination or a time-out) and `terminated` (it ended in a terminal state: nothing to bootstrap). For an
ended episode the next observation is the env's `final_observation`, taken before the auto-reset, so a
time-out bootstraps from where the episode actually was.

n-step returns are computed when sampling. For a sampled (row t, world e) with the window k = 0..n-1 along
world e's own rows, the return is sum_k gamma^k r_{t+k} up to and including the first row that ends the
episode (or the newest row written), and the bootstrap is the next observation at that last row with the
discount gamma^(k+1), zero where that row is a termination. Windows never cross into another episode.
"""

from __future__ import annotations

import torch


class ReplayBuffer:
    def __init__(
        self,
        capacity: int,
        num_envs: int,
        obs_dim: int,
        act_dim: int,
        critic_obs_dim: int | None = None,
        device: str | torch.device = "cpu",
    ):
        """capacity: transitions; the ring keeps ceil(capacity / num_envs) env steps (at least 2)."""
        self.num_envs = int(num_envs)
        self.rows = max(2, -(-int(capacity) // self.num_envs))
        self.device = torch.device(device)
        shape = (self.rows, self.num_envs)
        z = lambda *d, dtype=torch.float32: torch.zeros(*shape, *d, dtype=dtype, device=self.device)  # noqa: E731
        self.data: dict[str, torch.Tensor] = {
            "obs": z(obs_dim),
            "next_obs": z(obs_dim),
            "actions": z(act_dim),
            "rewards": z(),
            "done": z(dtype=torch.bool),
            "terminated": z(dtype=torch.bool),
        }
        if critic_obs_dim is not None:
            self.data["critic_obs"] = z(critic_obs_dim)
            self.data["next_critic_obs"] = z(critic_obs_dim)
        self.ptr = 0  # the row the next add writes
        self.filled = 0  # rows written (<= rows)

    def __len__(self) -> int:
        """Transitions held."""
        return self.filled * self.num_envs

    def add(self, **step: torch.Tensor) -> None:
        """One env step of every world: obs, next_obs, actions, rewards, done, terminated (and critic_obs,
        next_critic_obs when the buffer has them), each (num_envs, ...)."""
        if set(step) != set(self.data):
            raise KeyError(f"add() needs {sorted(self.data)}, got {sorted(step)}")
        for k, v in step.items():
            self.data[k][self.ptr] = v.to(self.device, non_blocking=True)
        self.ptr = (self.ptr + 1) % self.rows
        self.filled = min(self.filled + 1, self.rows)

    def sample(self, batch_size: int, n_step: int, gamma: float, generator: torch.Generator | None = None) -> dict:
        """A batch of n-step transitions: obs (and critic_obs), actions, returns, next_obs (and
        next_critic_obs) to bootstrap from, and discount (gamma^steps, 0 after a termination)."""
        if self.filled == 0:
            raise ValueError("sample() from an empty replay buffer")
        dev = self.device
        offset = torch.randint(0, self.filled, (batch_size,), device=dev, generator=generator)  # 0 = oldest row
        env = torch.randint(0, self.num_envs, (batch_size,), device=dev, generator=generator)
        oldest = (self.ptr - self.filled) % self.rows
        start = (oldest + offset) % self.rows
        last_k = (self.filled - 1 - offset).clamp(max=n_step - 1)  # the window ends at the newest row written
        returns = torch.zeros(batch_size, device=dev)
        end = start.clone()  # the row whose next observation is bootstrapped from
        steps = torch.ones(batch_size, device=dev)
        terminal = torch.zeros(batch_size, dtype=torch.bool, device=dev)
        alive = torch.ones(batch_size, dtype=torch.bool, device=dev)
        d = self.data
        for k in range(n_step):
            row = (start + k) % self.rows
            returns += alive * (gamma**k) * d["rewards"][row, env]
            end = torch.where(alive, row, end)
            steps = torch.where(alive, torch.full_like(steps, k + 1), steps)
            terminal = torch.where(alive, d["terminated"][row, env], terminal)
            alive = alive & ~d["done"][row, env] & (k < last_k)
        batch = {
            "obs": d["obs"][start, env],
            "actions": d["actions"][start, env],
            "returns": returns,
            "next_obs": d["next_obs"][end, env],
            "discount": torch.where(terminal, torch.zeros_like(steps), gamma**steps),
        }
        if "critic_obs" in d:
            batch["critic_obs"] = d["critic_obs"][start, env]
            batch["next_critic_obs"] = d["next_critic_obs"][end, env]
        return batch

    # -- checkpoints: only the rows written, so a young buffer is a small file ---------------------------------
    def state_dict(self) -> dict:
        order = (torch.arange(self.filled, device=self.device) + self.ptr - self.filled) % self.rows  # oldest first
        return {
            "rows": self.rows,
            "num_envs": self.num_envs,
            "filled": self.filled,
            "data": {k: v[order].cpu() for k, v in self.data.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        if int(state["rows"]) != self.rows or int(state["num_envs"]) != self.num_envs:
            raise ValueError(
                f"replay of {state['rows']} x {state['num_envs']} steps x worlds does not fit this buffer "
                f"({self.rows} x {self.num_envs})"
            )
        if set(state["data"]) != set(self.data):
            raise ValueError(f"replay holds {sorted(state['data'])}, this buffer {sorted(self.data)}")
        self.filled = int(state["filled"])
        for k, v in state["data"].items():
            self.data[k][: self.filled] = v.to(self.device)
        self.ptr = self.filled % self.rows

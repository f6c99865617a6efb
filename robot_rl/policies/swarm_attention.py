"""Compact per-drone policies for the Crazyflie team (LEARN), small enough for a Crazyflie's MCU.

SwarmAttentionPolicy reproduces the architecture recovered from LEARN's on-board C arrays
(crazyflie_ros2_facts.md 1.1): self MLP 18 -> 16; neighbour MLP (k x 6) -> 16; obstacle MLP (ToF) -> 16;
single-head self-attention over the two tokens [neighbour, obstacle] (Wq, Wk, Wv, Wfc 16 x 16 without
bias, then LayerNorm with a residual); concat [self, attended x 2] = 48 -> 16 (tanh) -> 4. With k = 2 and
32 ToF zones it has 2,948 parameters, LEARN's count. SwarmMlpPolicy is the baseline of similar size.

Both share weights across drones: the env's observation (..., N * D) is reshaped to (..., N, D), and
actions come back as (..., N * 4), drone-major, matching sim.tasks.crazyflie.swarm.
Observation normalization (mean/std buffers, not parameters) is part of the module, as on board.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn

SELF_DIM = 18


class _PerDrone(nn.Module, ABC):
    def __init__(self, obs_dim: int, num_drones: int):
        super().__init__()
        self.obs_dim, self.num_drones = obs_dim, num_drones
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(*obs.shape[:-1], self.num_drones, self.obs_dim)
        x = (x - self.obs_mean) / self.obs_std
        return self.drone(x).flatten(-2)

    @abstractmethod
    def drone(self, x: torch.Tensor) -> torch.Tensor:
        """One drone's observation (..., D) -> its four motor commands (..., 4)."""


class SwarmAttentionPolicy(_PerDrone):
    def __init__(self, num_drones: int = 6, k_neighbours: int = 2, num_beams: int = 32, hidden: int = 16):
        super().__init__(SELF_DIM + 6 * k_neighbours + num_beams, num_drones)
        self.n_nb = 6 * k_neighbours
        self.self_enc = nn.Sequential(nn.Linear(SELF_DIM, hidden), nn.Tanh())
        self.neighbour_enc = nn.Sequential(nn.Linear(self.n_nb, hidden), nn.Tanh())
        self.obstacle_enc = nn.Sequential(nn.Linear(num_beams, hidden), nn.Tanh())
        self.wq = nn.Linear(hidden, hidden, bias=False)
        self.wk = nn.Linear(hidden, hidden, bias=False)
        self.wv = nn.Linear(hidden, hidden, bias=False)
        self.wfc = nn.Linear(hidden, hidden, bias=False)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 4))
        self.scale = hidden**-0.5

    def drone(self, x: torch.Tensor) -> torch.Tensor:
        s = self.self_enc(x[..., :SELF_DIM])
        nb = self.neighbour_enc(x[..., SELF_DIM : SELF_DIM + self.n_nb])
        obstacle = self.obstacle_enc(x[..., SELF_DIM + self.n_nb :])
        tokens = torch.stack([nb, obstacle], dim=-2)  # (..., 2, hidden)
        q, k, v = self.wq(tokens), self.wk(tokens), self.wv(tokens)
        attn = torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1)
        out = self.norm(tokens + self.wfc(attn @ v))
        return self.head(torch.cat([s, out.flatten(-2)], dim=-1))


class SwarmMlpPolicy(_PerDrone):
    def __init__(self, num_drones: int = 6, k_neighbours: int = 2, num_beams: int = 32, hidden: int = 32):
        super().__init__(SELF_DIM + 6 * k_neighbours + num_beams, num_drones)
        self.net = nn.Sequential(
            nn.Linear(self.obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 4)
        )

    def drone(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())

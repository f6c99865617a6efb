"""One training run across processes started by `torchrun` (gloo on the CPU; start() picks NCCL for CUDA devices).

torchrun starts one process per rank and sets RANK, LOCAL_RANK and WORLD_SIZE. Every rank steps its own worlds
(seed + rank) and fills its own buffers. The gradients (rsl_rl's multi-GPU mode for PPO; average_gradients before
each optimizer step for TD3/SAC) and the observation-normalizer statistics (rsl_rl's EmpiricalNormalization, which
both use) are averaged over the ranks; rank 0 alone writes the run directory (config, meta, checkpoints,
TensorBoard). After every update (PPO) or iteration (TD3/SAC) the ranks compare their networks: a rank that has
drifted ends the run with an error instead of training on quietly with different networks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def rsl_rl_config(self) -> dict | None:
        """rsl_rl's `multi_gpu` section: None for one process."""
        if not self.distributed:
            return None
        return {"global_rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size}


def ranks_from_env(environ: dict | None = None) -> Ranks:
    """The ranks torchrun set (one process without them); inconsistent values are a ValueError."""
    env = os.environ if environ is None else environ
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
        local = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError as e:
        raise ValueError(f"torchrun's RANK, LOCAL_RANK and WORLD_SIZE must be integers: {e}") from None
    if world < 1 or not 0 <= rank < world or not 0 <= local < world:
        raise ValueError(f"RANK={rank}, LOCAL_RANK={local} do not fit WORLD_SIZE={world}")
    return Ranks(rank, local, world)


def rank_device(device: str, ranks: Ranks) -> str:
    """The device this rank steps and learns on: `cuda` (no index) in a run across ranks is the rank's own GPU,
    cuda:<LOCAL_RANK>, as torchrun lays out one process per GPU; any other device as named."""
    return f"cuda:{ranks.local_rank}" if device == "cuda" and ranks.distributed else device


def start(ranks: Ranks, device: str = "cpu") -> None:
    """Join the process group torchrun describes (MASTER_ADDR/MASTER_PORT): NCCL for CUDA, gloo otherwise."""
    if ranks.distributed and not dist.is_initialized():
        backend = "nccl" if str(device).startswith("cuda") else "gloo"
        dist.init_process_group(backend=backend, rank=ranks.rank, world_size=ranks.world_size)


def stop() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def share_from_main(value: str | None) -> str:
    """Rank 0's value on every rank (the run directory's path)."""
    box = [value]
    if dist.is_initialized():
        dist.broadcast_object_list(box, src=0)
    return str(box[0])


def gather_objects(obj) -> list:
    """Every rank's obj, in rank order, on every rank ([obj] in one process)."""
    if not dist.is_initialized():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def saved_ranks(checkpoint: dict) -> int:
    """The number of ranks a checkpoint was trained on (PPO under torchrun saves every rank's RNG streams)."""
    return len(checkpoint.get("rank_rngs") or [None])


def broadcast_from_main(modules: list[torch.nn.Module]) -> None:
    """Rank 0's parameters and buffers in these modules on every rank (a no-op in one process)."""
    if dist.is_initialized():
        for m in modules:
            for t in m.state_dict().values():
                dist.broadcast(t, src=0)


def average_gradients(params) -> None:
    """Each parameter's gradient replaced by its mean over the ranks, in one all-reduce (a no-op in one process).
    A parameter without a gradient on this rank counts as a zero gradient, so every rank reduces the same vector."""
    if not dist.is_initialized():
        return
    params = list(params)
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()


def flat_state(modules: list[torch.nn.Module]) -> torch.Tensor:
    """Every floating-point parameter and buffer of the modules in one float64 vector (exact for float32)."""
    parts = [
        t.detach().reshape(-1).to("cpu", torch.float64)
        for m in modules
        for t in m.state_dict().values()
        if t.is_floating_point()
    ]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def check_in_sync(modules: list[torch.nn.Module], what: str) -> None:
    """Raise on every rank unless all ranks hold bitwise-equal parameters and buffers (a no-op in one process).
    The networks of a PPO run are small (10^4-10^5 values): comparing them whole costs less than a rollout step."""
    if not dist.is_initialized():
        return
    mine = flat_state(modules)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    differ = [r for r, theirs in enumerate(gathered) if not torch.equal(theirs, gathered[0])]
    if differ:
        worst = max(float((gathered[r] - gathered[0]).abs().max()) for r in differ)
        raise RuntimeError(
            f"the ranks' networks differ after {what}: ranks {differ} from rank 0 (largest difference {worst:.3g})"
        )

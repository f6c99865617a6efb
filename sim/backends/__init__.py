"""Physics backends: one model, many worlds, live batched torch tensors."""

from sim.backends.mjwarp import MjWarpBackend
from sim.backends.mujoco_batch import MujocoBatchBackend, load_model

BACKENDS = {"mujoco": MujocoBatchBackend, "mjwarp": MjWarpBackend}


def make_backend(name: str, model, num_worlds: int, **kwargs):
    """Construct a backend by name. The seam where mjwarp (and later an Isaac Lab adapter) plug in."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}' (available: {', '.join(sorted(BACKENDS))})")
    return BACKENDS[name](model, num_worlds, **kwargs)


__all__ = ["BACKENDS", "MjWarpBackend", "MujocoBatchBackend", "load_model", "make_backend"]

"""Whether torch can use a device named in a config (backend.device, algo.device) on this machine."""

from __future__ import annotations

import torch


def unavailable(device: str) -> str | None:
    """Why torch cannot use `device` here, in a few words; None when it can."""
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return "torch sees no CUDA device here (a CPU-only torch build, or no GPU visible)"
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            return f"torch sees {torch.cuda.device_count()} CUDA device(s), numbered from 0"
    if device == "mps" and not torch.backends.mps.is_available():
        return "torch sees no MPS device here"
    return None

"""Serve a bundle over stdin/stdout: raw robot state in, actions out. numpy + onnxruntime only.

Lets any process (a simulator in another environment, a test harness, a non-ROS robot stack)
drive the deploy runtime without importing it. Frames are an 8-byte little-endian length followed
by an .npz payload; a request holds raw-state arrays (batched or not), the reply holds
'policy_action' (policy space, clipped to [-1, 1]) and 'command' (robot units). For a plan-guided bundle a
request may add 'episode_start' (bool per robot: its episode begins now) and 'plan_index' (which of the bundle's
plans it follows); 'policy_action' is then the plan's action plus the policy's residual.

    python -m robot_rl.deploy.pipe_server path/to/bundle
"""

from __future__ import annotations

import io
import struct
import sys
from typing import BinaryIO

import numpy as np

from robot_rl.deploy.bundle import BundleError
from robot_rl.deploy.runtime import PolicyRuntime


def write_frame(stream: BinaryIO, arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def read_frame(stream: BinaryIO) -> dict[str, np.ndarray] | None:
    header = stream.read(8)
    if len(header) < 8:
        return None
    (n,) = struct.unpack("<Q", header)
    with np.load(io.BytesIO(stream.read(n)), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def serve(bundle_dir: str, inp: BinaryIO, out: BinaryIO) -> int:
    runtime = PolicyRuntime(bundle_dir)
    while (raw := read_frame(inp)) is not None:
        try:
            if runtime.plan is not None:
                action = runtime.policy_actions(raw, raw.get("episode_start"), raw.get("plan_index"))
            else:
                obs = runtime.observation(raw, update="goal_error_integral" not in raw)
                action = np.clip(runtime.policy(obs).astype(np.float64), -1.0, 1.0)
            write_frame(out, {"policy_action": action, "command": runtime.bundle.action.to_raw(action)})
        except ValueError as e:
            write_frame(out, {"error": np.array(str(e))})
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m robot_rl.deploy.pipe_server BUNDLE_DIR", file=sys.stderr)
        return 2
    try:
        return serve(argv[0], sys.stdin.buffer, sys.stdout.buffer)
    except BundleError as e:
        print(f"pipe_server: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The generated C99 per-drone policy is the torch/ONNX policy (issue 8, "fly it fully on board").

Two levels:
- host: built with the host gcc and target-independent flags (strict C99, warnings as errors) and compared with
  ONNX and torch; checks conformance and numerics, not STM32F405 code generation.
- target: cross-compiled for the Crazyflie's Cortex-M4F with the hard-float ABI, the object must call no
  soft-float/double helpers, hold no RAM and keep a small fixed stack frame (needs arm-none-eabi-gcc, its
  binutils and newlib); then it is linked with the bare-metal harness in stm32/ and run under QEMU's
  netduinoplus2 (an STM32F405 board), and its outputs must match ONNX within the same bound (also needs
  qemu-system-arm). Missing tools skip these tests with the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from robot_rl.export.c_export import OneDrone, export_c
from robot_rl.export.onnx_export import export_module_onnx
from robot_rl.policies.swarm_attention import SwarmAttentionPolicy, SwarmMlpPolicy, parameter_count

torch.set_num_threads(1)

GCC = shutil.which("gcc")
# -Wdouble-promotion: the M4F FPU is single precision, a stray double would be software-emulated on board.
CFLAGS = ["-std=c99", "-pedantic", "-O2", "-Wall", "-Wextra", "-Werror", "-Wdouble-promotion", "-Wvla", "-Wshadow"]
TOL = 1e-4  # the bound

# The Crazyflie's STM32F405: Cortex-M4 with the single-precision FPU, hard-float calling convention.
M4F = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]
STM32_DIR = Path(__file__).parent / "stm32"  # bare-metal startup, linker script and main for the QEMU run
ARM_KINDS = ["attention", "mlp", "attention_w32"]
STACK_LIMIT = 4096  # bytes for one call (libm frames aside): it runs on a FreeRTOS task stack
QEMU_TIMEOUT_S = 60

HARNESS = r"""
#include <stdio.h>
#include "robot_rl_policy.h"

/* Reads observations (whitespace-separated floats) from stdin, prints one line of 4 outputs each. */
int main(void)
{
    float obs[ROBOT_RL_POLICY_OBS_DIM], out[ROBOT_RL_POLICY_ACT_DIM];
    int i;
    for (;;) {
        for (i = 0; i < ROBOT_RL_POLICY_OBS_DIM; ++i) {
            if (scanf("%f", &obs[i]) != 1) return i == 0 ? 0 : 1;
        }
        robot_rl_policy(obs, out);
        for (i = 0; i < ROBOT_RL_POLICY_ACT_DIM; ++i) printf(i ? " %.9g" : "%.9g", (double)out[i]);
        printf("\n");
    }
}
"""


def _policy(kind: str) -> nn.Module:
    """Random weights, LayerNorm affine off its identity init and normalization buffers far from (0, 1)."""
    torch.manual_seed({"attention": 0, "mlp": 1, "attention_w32": 2}[kind])
    if kind == "mlp":
        pol = SwarmMlpPolicy()
    else:  # the default width (16) and the wider one bench/swarm_policy_inference.py also times
        pol = SwarmAttentionPolicy(**({"hidden": 32} if kind == "attention_w32" else {}))
    with torch.no_grad():
        if isinstance(pol, SwarmAttentionPolicy):
            pol.norm.weight.copy_(1 + 0.3 * torch.randn_like(pol.norm.weight))
            pol.norm.bias.copy_(0.2 * torch.randn_like(pol.norm.bias))
        pol.obs_mean.copy_(2 * torch.randn(pol.obs_dim))
        pol.obs_std.copy_(0.1 + 2 * torch.rand(pol.obs_dim))
    return pol.eval()


def _observations(pol: nn.Module, n: int = 1000) -> np.ndarray:
    rng = np.random.default_rng(7)
    d = pol.obs_dim
    mean, std = pol.obs_mean.numpy(), pol.obs_std.numpy()
    typical = mean + std * rng.normal(size=(n // 2, d))
    large = rng.normal(size=(n // 4, d)) * 1e3  # saturates every first-layer tanh
    extreme = rng.choice([-1e4, 0.0, 1e4], size=(n - n // 2 - n // 4, d)) + mean * rng.integers(0, 2, size=(1, d))
    return np.concatenate([typical, large, extreme]).astype(np.float32)


def _compile(src_dir: Path, *extra: str) -> Path:
    (src_dir / "harness.c").write_text(HARNESS)
    exe = src_dir / "policy_test"
    cmd = [GCC, *CFLAGS, *extra, "-o", str(exe), str(src_dir / "harness.c"), str(src_dir / "robot_rl_policy.c"), "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0 and not res.stderr, res.stderr
    return exe


def _run_c(exe: Path, obs: np.ndarray) -> np.ndarray:
    text = "\n".join(" ".join(f"{v:.9g}" for v in row) for row in obs.tolist())
    res = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True)
    return np.array([[float(v) for v in line.split()] for line in res.stdout.splitlines()], dtype=np.float64)


def _onnx(pol: nn.Module, path: Path, obs: np.ndarray) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    export_module_onnx(OneDrone(pol), pol.obs_dim, path)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"obs": obs})[0]


def _need_gcc() -> None:
    if GCC is None:
        pytest.skip("gcc not found: cannot compile the generated C")


@pytest.mark.parametrize("kind", ["attention", "mlp"])
def test_c_matches_onnx_and_torch(kind, tmp_path):
    _need_gcc()
    pol = _policy(kind)
    export_c(pol, tmp_path)
    obs = _observations(pol)
    c_out = _run_c(_compile(tmp_path), obs)
    with torch.no_grad():
        torch_out = OneDrone(pol)(torch.from_numpy(obs)).numpy()
        # the per-drone reference is the full policy's path: N copies of obs give N copies of the actions
        full = pol(torch.from_numpy(obs).repeat(1, pol.num_drones)).reshape(len(obs), pol.num_drones, 4)
    torch.testing.assert_close(full, torch.from_numpy(torch_out)[:, None].expand_as(full), rtol=0, atol=1e-6)
    onnx_out = _onnx(pol, tmp_path / "drone.onnx", obs)

    assert c_out.shape == (len(obs), 4) and np.isfinite(c_out).all()
    assert np.abs(c_out).max() > 0.1 and np.ptp(c_out, axis=0).min() > 1e-3  # not a constant output
    d_onnx, d_torch = np.abs(c_out - onnx_out).max(), np.abs(c_out - torch_out).max()
    print(f"\n{kind}: max |C - ONNX| = {d_onnx:.3g}, max |C - torch| = {d_torch:.3g} over {len(obs)} observations")
    assert d_onnx <= TOL and d_torch <= TOL


@pytest.mark.parametrize("kind", ["attention", "mlp"])
def test_parameter_count_and_flash_size(kind, tmp_path):
    pol = _policy(kind)
    info = export_c(pol, tmp_path)
    assert info["parameters"] == parameter_count(pol)
    if kind == "attention":
        assert info["parameters"] == 2948  # LEARN's on-board count
    # flash = the static const float arrays: every parameter plus obs_mean and obs_std (4 bytes each)
    assert info["flash_bytes"] == 4 * (parameter_count(pol) + 2 * pol.obs_dim)
    assert sorted(Path(f).name for f in info["files"]) == ["robot_rl_policy.c", "robot_rl_policy.h"]
    header = (tmp_path / "robot_rl_policy.h").read_text()
    assert f"#define ROBOT_RL_POLICY_OBS_DIM {pol.obs_dim}" in header
    assert (
        "void robot_rl_policy(const float obs[ROBOT_RL_POLICY_OBS_DIM], float out[ROBOT_RL_POLICY_ACT_DIM]);" in header
    )


@pytest.mark.parametrize("kind", ["attention", "mlp"])
def test_no_dynamic_allocation_only_const_data_and_few_libm_calls(kind, tmp_path):
    _need_gcc()
    pol = _policy(kind)
    info = export_c(pol, tmp_path)
    src = (tmp_path / "robot_rl_policy.c").read_text() + (tmp_path / "robot_rl_policy.h").read_text()
    assert not re.search(r"\b(malloc|calloc|realloc|free|alloca)\b", src)
    assert set(re.findall(r"#include\s*[<\"]([^>\"]+)", src)) == {"math.h", "stddef.h", "robot_rl_policy.h"}
    obj = tmp_path / "policy.o"
    res = subprocess.run(
        [GCC, *CFLAGS, "-c", "-o", str(obj), str(tmp_path / "robot_rl_policy.c")], capture_output=True, text=True
    )
    assert res.returncode == 0 and not res.stderr, res.stderr
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found: cannot inspect the object's symbols")
    syms = [
        line.split()
        for line in subprocess.run([nm, "-S", str(obj)], capture_output=True, text=True).stdout.splitlines()
    ]
    undefined = {s[-1] for s in syms if s[-2] == "U"}
    assert undefined <= {"expf", "tanhf", "sqrtf"}, undefined
    assert not [s for s in syms if s[-2] in "DdBbCG"], "writable globals would cost RAM and make it non-reentrant"
    # sized read-only symbols are exactly our arrays: their bytes are the reported flash size
    arrays = {s[-1]: int(s[1], 16) for s in syms if len(s) == 4 and s[2] in "rR"}
    assert sum(arrays.values()) == info["flash_bytes"], arrays


def _need_arm(*tools: str) -> dict[str, str]:
    """Paths of the named tools (arm-none-eabi-* binutils, qemu-system-arm), or a skip naming what is missing."""
    paths = {t: shutil.which(t) for t in ("arm-none-eabi-gcc", *tools)}
    missing = sorted(t for t, p in paths.items() if p is None)
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: the STM32F405 build is not checked here")
    # math.h and the hard-float libm come from newlib (libnewlib-arm-none-eabi); gcc echoes the bare name if absent
    if not Path(_tool(paths["arm-none-eabi-gcc"], *M4F, "-print-file-name=libm.a").strip()).is_absolute():
        pytest.skip("newlib for arm-none-eabi not installed: cannot link the STM32F405 harness")
    return paths


def _tool(*cmd: str | Path) -> str:
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    assert res.returncode == 0 and not res.stderr, f"{' '.join(map(str, cmd))}\n{res.stderr}"
    return res.stdout


def _arm_object(gcc: str, kind: str, out_dir: Path) -> tuple[nn.Module, dict, Path]:
    """Export the policy and cross-compile it exactly as for the Crazyflie; .su stack report beside the object."""
    pol = _policy(kind)
    info = export_c(pol, out_dir)
    obj = out_dir / "policy.o"
    _tool(gcc, *CFLAGS, *M4F, "-fstack-usage", "-c", "-o", obj, out_dir / "robot_rl_policy.c")
    return pol, info, obj


@pytest.mark.parametrize("kind", ARM_KINDS)
def test_cortex_m4f_object_is_hard_float_single_precision_const_and_small_stack(kind, tmp_path):
    tools = _need_arm("arm-none-eabi-nm", "arm-none-eabi-size", "arm-none-eabi-readelf")
    _, info, obj = _arm_object(tools["arm-none-eabi-gcc"], kind, tmp_path)

    # a software float or any double operation would show up as an __aeabi_* helper call
    undefined = {line.split()[-1] for line in _tool(tools["arm-none-eabi-nm"], "-u", obj).splitlines()}
    assert undefined <= {"expf", "tanhf", "sqrtf", "memcpy"}, undefined
    attrs = _tool(tools["arm-none-eabi-readelf"], "-A", obj)
    assert "Tag_ABI_VFP_args: VFP registers" in attrs and "Tag_ABI_HardFP_use: SP only" in attrs, attrs

    text, data, bss = (int(v) for v in _tool(tools["arm-none-eabi-size"], obj).splitlines()[1].split()[:3])
    assert data == 0 and bss == 0, "no RAM besides the stack: weights stay in flash, the call is reentrant"
    assert text >= info["flash_bytes"]

    # .su lines: "file:line:col:function<TAB>bytes<TAB>qualifiers"; "static" = fixed frame, no VLA/alloca
    frames = {}
    for line in (tmp_path / "policy.su").read_text().splitlines():
        where, size, qualifier = line.split("\t")
        assert qualifier == "static", line
        frames[where.rsplit(":", 1)[1]] = int(size)
    # helpers gcc did not inline nest at most once below robot_rl_policy: the sum bounds the deepest chain
    print(
        f"\n{kind} Cortex-M4F: .text+.rodata {text} B ({info['flash_bytes']} B weights), "
        f"stack {frames['robot_rl_policy']} B for robot_rl_policy, {sum(frames.values())} B all frames {frames}"
    )
    assert sum(frames.values()) < STACK_LIMIT, frames


def _obs_source(obs: np.ndarray) -> str:
    """C file with the observations as raw float bits, so the target computes on exactly the host's values."""
    rows = ",\n".join("    {" + ", ".join(f"0x{b:08x}u" for b in row) + "}" for row in obs.view(np.uint32).tolist())
    return (
        '#include <stdint.h>\n#include "robot_rl_policy.h"\n\n'
        f"const uint32_t OBS_BITS[][ROBOT_RL_POLICY_OBS_DIM] = {{\n{rows}\n}};\n"
        f"const unsigned OBS_COUNT = {len(obs)}u;\n"
    )


@pytest.mark.parametrize("kind", ARM_KINDS)
def test_stm32f405_build_under_qemu_matches_onnx(kind, tmp_path):
    tools = _need_arm("qemu-system-arm")
    pol, _, obj = _arm_object(tools["arm-none-eabi-gcc"], kind, tmp_path)
    obs = _observations(pol)
    (tmp_path / "obs_data.c").write_text(_obs_source(obs))
    elf = tmp_path / "policy_test.elf"
    _tool(
        tools["arm-none-eabi-gcc"], *CFLAGS, *M4F, "-I", tmp_path, "-I", STM32_DIR, "-nostartfiles",
        "-T", STM32_DIR / "stm32f405.ld", "-o", elf, STM32_DIR / "startup.c", STM32_DIR / "main.c",
        tmp_path / "obs_data.c", obj, "-lm",
    )  # fmt: skip

    # netduinoplus2 is QEMU's STM32F405 board (Cortex-M4 with FPU, flash at 0x08000000): the program sees the
    # Crazyflie's memory map. Semihosting output goes to a file so QEMU's own messages cannot mix in.
    out_txt = tmp_path / "semihosting.txt"
    cmd = [
        tools["qemu-system-arm"], "-M", "netduinoplus2", "-nodefaults", "-display", "none",
        "-chardev", f"file,id=semihost,path={out_txt}",
        "-semihosting-config", "enable=on,target=native,chardev=semihost", "-kernel", str(elf),
    ]  # fmt: skip
    t0 = time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=QEMU_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"qemu did not finish in {QEMU_TIMEOUT_S} s (a hang or a fault loop on the target)")
    wall = time.perf_counter() - t0
    lines = out_txt.read_text().splitlines() if out_txt.exists() else []
    # the harness exits through semihosting: 0 only after main returned, 1 after a fault
    assert res.returncode == 0 and lines and lines[-1] == "END", (res.returncode, res.stderr, lines[-3:])
    bits = np.array([[int(h, 16) for h in line.split()] for line in lines[:-1]], dtype=np.uint32)
    arm_out = bits.view(np.float32).astype(np.float64)

    onnx_out = _onnx(pol, tmp_path / "drone.onnx", obs)
    assert arm_out.shape == (len(obs), 4) and np.isfinite(arm_out).all()
    assert np.abs(arm_out).max() > 0.1 and np.ptp(arm_out, axis=0).min() > 1e-3  # not a constant output
    diff = np.abs(arm_out - onnx_out).max()
    print(f"\n{kind} on qemu netduinoplus2: max |STM32 - ONNX| = {diff:.3g} over {len(obs)} observations, {wall:.2f} s")
    assert diff <= TOL


class _Subclassed(SwarmMlpPolicy):
    def drone(self, x):
        return super().drone(x) * 2


def test_unsupported_modules_are_a_clear_value_error(tmp_path):
    with pytest.raises(ValueError, match="supports SwarmAttentionPolicy and SwarmMlpPolicy, not Linear"):
        export_c(nn.Linear(62, 4), tmp_path)
    with pytest.raises(ValueError, match="not _Subclassed"):  # a subclass may change the forward pass
        export_c(_Subclassed(), tmp_path)
    relu = SwarmMlpPolicy()
    relu.net[1] = nn.ReLU()
    with pytest.raises(ValueError, match="unsupported layer ReLU"):
        export_c(relu, tmp_path)
    with pytest.raises(ValueError, match="not a C identifier"):
        export_c(SwarmMlpPolicy(), tmp_path, name="robot-rl")
    zero_std = SwarmMlpPolicy()
    zero_std.obs_std[3] = 0.0
    with pytest.raises(ValueError, match="obs_std contains zeros"):
        export_c(zero_std, tmp_path)
    assert not list(tmp_path.iterdir())  # nothing half-written

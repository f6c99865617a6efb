"""The native firmware callback (sim/robots/crazyflie_firmware_native.c) against the torch firmware.

The two agree to rounding, not bit for bit: torch's vectorized sqrt, atan2 and asin (SLEEF) are not always
correctly rounded, libm's are, so single values differ by an ulp now and then. Measured: one tick, relative
4e-14 (rpyt), 2e-15 (ctbr), 0 (motors: no libm call); 64 worlds, max randomization, 150 control steps with
resets: qpos 6e-15 (rpyt), 2e-14 (ctbr), 0 (motors), 2e-13 after 400 steps; float32 observations differ
in one element by 6e-14 (a value near zero), rewards not at all.
"""

import ctypes
import logging
import shutil
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch

from sim.env import BatchedEnv, EnvConfig
from sim.robots import crazyflie_firmware_native as native
from sim.robots.crazyflie_firmware import CrazyflieFirmware, PidGains
from sim.tasks import make_task
from sim.tasks.crazyflie import MODEL_PATH, CrazyflieHover
from sim.tasks.crazyflie.hover_config import LATENCY_HISTORY

HAVE_GCC = shutil.which("gcc") is not None
needs_gcc = pytest.mark.skipif(not HAVE_GCC, reason="no gcc: the native firmware cannot be built")


def _lib():
    lib = native.load()
    assert lib is not None, "gcc exists, yet the native firmware did not build (see the log)"
    return lib


def _rand(g, *shape, lo=0.0, hi=1.0):
    return lo + (hi - lo) * torch.rand(*shape, generator=g, dtype=torch.float64)


@needs_gcc
@pytest.mark.parametrize("mode", ["rpyt", "ctbr", "motors"])
def test_one_tick_matches_torch_firmware(mode):
    """Every substep of a control period: C on userdata rows vs the torch firmware on the command that
    CrazyflieHover._arrival_rows picks; thrusts and firmware state within 1e-9 relative."""
    lib, n, substeps, dt = _lib(), 2048, 5, 0.002
    g = torch.Generator().manual_seed({"rpyt": 0, "ctbr": 1, "motors": 2}[mode])
    fw = CrazyflieFirmware(n, dt)
    fw.gain_scale[:] = _rand(g, n, 3, lo=0.8, hi=1.2)
    fw.kf_scale[:] = _rand(g, n, 1, lo=0.8, hi=1.25)
    fw.att_int[:] = _rand(g, n, 2, lo=-25, hi=25)  # beyond the limit too: the clamp must agree
    fw.rate_int[:] = _rand(g, n, 3, lo=-200, hi=200)
    fw.rate_prev_err[:] = _rand(g, n, 3, lo=-300, hi=300)
    spec = {  # commands in robot units, a sixth of them with motors off (zero thrust)
        "rpyt": ([-30, -30, -200, 0], [30, 30, 200, 60000]),
        "ctbr": ([0, -400, -400, -200], [0.6, 400, 400, 200]),
        "motors": ([0, 0, 0, 0], [1, 1, 1, 1]),
    }[mode]
    lo, hi = (torch.tensor(v, dtype=torch.float64) for v in spec)
    hist = lo + (hi - lo) * _rand(g, n, LATENCY_HISTORY, 4)
    thrust_col = 0 if mode == "ctbr" else 3
    hist[:, :, thrust_col] *= torch.rand(n, LATENCY_HISTORY, generator=g) > 1 / 6
    latency = torch.randint(0, 16, (n,), generator=g)

    ud = np.zeros((n, native.NUSERDATA))
    ud[:, : native.PARAMS_END] = native.constants(mode, substeps, PidGains(), fw.gain_scale, fw.kf_scale, latency)
    for col, t in (
        (native.ATT_INT, fw.att_int),
        (native.RATE_INT, fw.rate_int),
        (native.RATE_PREV_ERR, fw.rate_prev_err),
    ):
        ud[:, col : col + t.shape[1]] = t.numpy()
    ud[:, native.CMD_HIST : native.CMD_HIST + 4 * LATENCY_HISTORY] = hist.reshape(n, -1).numpy()

    task = SimpleNamespace(latency=latency, substeps=substeps, n=n)
    rows = CrazyflieHover._arrival_rows(task)  # the torch path's choice of command per substep
    arrived = hist.reshape(-1, 4).index_select(0, rows).view(substeps, n, 4)
    worst = 0.0
    for k in range(substeps):
        quat = torch.randn(n, 4, generator=g, dtype=torch.float64)
        quat /= quat.norm(dim=1, keepdim=True)
        gyro = _rand(g, n, 3, lo=-8, hi=8)  # rad/s
        f_c = native.tick_many(lib, quat.numpy(), gyro.numpy(), ud, dt)
        if mode == "rpyt":
            f_t = fw.motor_thrust(arrived[k], quat, gyro)
        elif mode == "ctbr":
            f_t = fw.motor_thrust_ctbr(arrived[k], gyro)
        else:
            f_t = arrived[k] * 0.15 * fw.kf_scale  # CrazyflieHover._motor_thrust
        assert np.all(ud[:, native.SUBSTEP] == k + 1)
        pairs = [(f_c, f_t.numpy(), 1e-12)]  # newtons; a thrust is 0 or >= 5e-3 N
        for col, t in (
            (native.ATT_INT, fw.att_int),
            (native.RATE_INT, fw.rate_int),
            (native.RATE_PREV_ERR, fw.rate_prev_err),
        ):
            pairs.append((ud[:, col : col + t.shape[1]], t.numpy(), 1e-9))  # degrees (per second)
        for c, t, atol in pairs:
            np.testing.assert_allclose(c, t, rtol=1e-9, atol=atol)
            worst = max(worst, float(np.max(np.abs(c - t) / np.maximum(np.abs(t), atol))))
        assert (f_t == 0).any() or mode == "motors"  # idle worlds were exercised
    print(f"{mode}: max relative difference {worst:.1e}")
    assert worst <= 1e-9


def _run(firmware_impl, steps, mode="rpyt", n=64):
    env = BatchedEnv(make_task("crazyflie_hover", firmware_impl=firmware_impl, action_mode=mode),
                     EnvConfig(num_worlds=n, seed=3, nthread=1, randomization="max"))  # fmt: skip
    env.stagger_episodes()  # resets throughout the run
    g = torch.Generator().manual_seed(1)
    obs, rew, qpos, resets = [], [], [], 0
    for _ in range(steps):
        o, r, dones, _ = env.step(_rand(g, n, 4, lo=-1, hi=1))
        obs.append(torch.cat([o["policy"], o["critic"]], dim=1))
        rew.append(r)
        qpos.append(env.backend.qpos.clone())
        resets += int(dones.sum())
    return env, torch.stack(obs), torch.stack(rew), torch.stack(qpos), resets


@needs_gcc
@pytest.mark.parametrize("mode", ["rpyt", "ctbr", "motors"])
def test_trajectories_match_torch_firmware(mode):
    """64 worlds, max randomization, latency and pushes on, same seed, 150 steps with resets: native vs torch.

    Per-tick differences are an ulp (see the module docstring); 150 steps amplify them to 2e-14 in qpos
    (2e-13 at 400 steps), so 1e-11 leaves room for other seeds without hiding a wrong formula (measured: a
    rate gain 0.1% off moves qpos by 2e-7 in the first step, a latency one substep off by 5e-4).
    Observations and rewards are float32: a last-bit flip (<= 1e-6 for values <= 8, relative 1.2e-7 above)
    is all that may differ."""
    env_n, obs_n, rew_n, qpos_n, resets = _run("native", 150, mode)
    env_t, obs_t, rew_t, qpos_t, _ = _run("torch", 150, mode)
    assert env_n.task.native and not env_t.task.native  # gcc exists: the native path must be the one used
    assert resets > 10
    assert torch.equal(env_n.task.latency, env_t.task.latency) and env_n.task.latency.max() > 0
    torch.testing.assert_close(qpos_n, qpos_t, rtol=0, atol=1e-11)
    torch.testing.assert_close(obs_n, obs_t, rtol=1.2e-7, atol=1e-6)
    torch.testing.assert_close(rew_n, rew_t, rtol=1.2e-7, atol=1e-6)
    for a, b in zip(env_n.task.controller_state(), env_t.task.controller_state(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
    if mode == "motors":  # no libm function in this mode: bit for bit
        assert torch.equal(qpos_n, qpos_t)


@needs_gcc
def test_callback_is_restored_and_other_models_untouched():
    lib = _lib()
    env = BatchedEnv(make_task("crazyflie_hover"), EnvConfig(num_worlds=4, nthread=1))
    assert env.task.native and env.backend.model.nuserdata == native.NUSERDATA

    def fly_plain(model):  # another model, stepped with controls of its own
        d = mujoco.MjData(model)
        d.ctrl[:] = 0.07
        for _ in range(20):
            mujoco.mj_step(model, d)
        assert np.all(d.ctrl == 0.07)
        return d.qpos.copy()

    plain = mujoco.MjModel.from_xml_path(str(MODEL_PATH))
    with_userdata = mujoco.MjModel.from_xml_path(str(env.task.model_path))
    reference = fly_plain(plain)

    previous = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(lambda m, d: None)  # someone else's
    for before in (None, previous):
        mujoco.set_mjcb_control(before)
        try:
            env.step(torch.zeros(4, 4))
            assert mujoco.get_mjcb_control() is before
        finally:
            mujoco.set_mjcb_control(None)
    np.testing.assert_array_equal(fly_plain(plain), reference)

    # installed by hand: worlds without the marker (or without userdata) are left alone
    mujoco.set_mjcb_control(lib.cf_control)
    try:
        np.testing.assert_array_equal(fly_plain(plain), reference)
        np.testing.assert_array_equal(fly_plain(with_userdata), reference)
    finally:
        mujoco.set_mjcb_control(None)


@needs_gcc
def test_envs_stepped_from_two_threads():
    """Batch steps release the GIL: two envs stepping at once share the process-global callback, which must
    stay installed until both are done (and be restored then)."""
    import threading

    def make_env(seed):
        return BatchedEnv(make_task("crazyflie_hover"), EnvConfig(num_worlds=16, seed=seed, nthread=1))

    def fly(env, steps=40):
        for _ in range(steps):
            env.step(torch.zeros(16, 4))

    alone = [make_env(s) for s in (0, 1)]
    for env in alone:
        fly(env)
    together = [make_env(s) for s in (0, 1)]
    threads = [threading.Thread(target=fly, args=(env,)) for env in together]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mujoco.get_mjcb_control() is None
    for a, b in zip(alone, together, strict=True):
        assert torch.equal(a.backend.qpos, b.backend.qpos)


def test_bad_firmware_impl_is_refused():
    with pytest.raises(ValueError, match="firmware_impl must be one of native, torch, not 'fortran'"):
        make_task("crazyflie_hover", firmware_impl="fortran")


def test_torch_fallback_without_a_compiler(monkeypatch, caplog):
    """No compiler: one log line, and the task flies the torch firmware."""
    monkeypatch.setenv("CC", "/nonexistent/gcc")
    native.load.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            env = BatchedEnv(make_task("crazyflie_hover"), EnvConfig(num_worlds=4, nthread=1))
        assert not env.task.native and isinstance(env.task.firmware, CrazyflieFirmware)
        env.step(torch.zeros(4, 4))
    finally:
        native.load.cache_clear()  # the next load() builds with the real compiler again
    assert caplog.text.count("running the torch firmware") == 1


@needs_gcc
def test_a_world_mujoco_resets_mid_step_ends_its_episode_and_keeps_its_firmware(tmp_path, monkeypatch):
    """mj_step resets a world whose state diverges (a MuJoCo warning), userdata included: the env ends that
    world's episode (counted), the firmware's marker and parameters are written back, and the callback goes on
    flying it."""
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warning to MUJOCO_LOG.TXT in the working directory
    env = BatchedEnv(make_task("crazyflie_hover", firmware_impl="native"),
                     EnvConfig(num_worlds=4, seed=0, nthread=1, randomization="max"))  # fmt: skip
    env.reset()
    fw = env.task.firmware
    assert env.task.native
    for _ in range(3):
        env.step(torch.zeros(4, 4))
    params = [c for c in range(native.PARAMS_END) if c != native.SUBSTEP]  # SUBSTEP counts within a period
    before = fw._ud[:, params].copy()
    env.backend.batch.bind("qvel")[2, :] = 1e11  # beyond mjMAXVAL: MuJoCo warns and resets world 2
    _, _, dones, extras = env.step(torch.zeros(4, 4))
    assert dones.tolist() == [False, False, True, False] and env.mujoco_resets == 1
    assert extras["final"]["ids"].tolist() == [2] and not extras["time_outs"][2]
    assert fw._ud[2, native.MARKER] == native.MAGIC
    np.testing.assert_array_equal(fw._ud[[0, 1, 3]][:, params], before[[0, 1, 3]])  # the others untouched
    ctrl = env.backend.batch.bind("ctrl")
    for _ in range(3):  # the commands in flight were lost with the reset: new ones arrive after the latency
        _, _, dones, _ = env.step(torch.zeros(4, 4))
        assert not dones.any()
    assert np.all(ctrl[2] > 0) and np.all(np.isfinite(ctrl[2]))  # its motors are driven again

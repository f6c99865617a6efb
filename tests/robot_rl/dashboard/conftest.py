"""Run directories for the dashboard tests, in the layout ``robot-rl train/eval`` writes.

Most are synthesised here (many tasks, guidance artifacts, HTML names, a live half-written run)
with real artifacts: TensorBoard event files from torch's SummaryWriter and an H.264 mp4. One,
``hover_real``, is a real run made by our own train/eval/export/play commands (tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from robot_rl.dashboard.server import DashboardServer, make_server

HTML_RUN = '<img src=x onerror="window.__pwned=1">'


def write_png(path: Path, rgb: np.ndarray) -> None:
    """Minimal PNG encoder (no Pillow/OpenCV needed for a test image)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    path.write_bytes(png)


def write_video(path: Path, seconds: float = 2.0, fps: int = 20, size: tuple[int, int] = (160, 120)) -> None:
    """H.264 yuv420p mp4 with the moov atom up front (what browsers stream)."""
    import imageio_ffmpeg

    w, h = size
    writer = imageio_ffmpeg.write_frames(
        str(path),
        size,
        fps=fps,
        codec="libx264",
        pix_fmt_in="rgb24",
        pix_fmt_out="yuv420p",
        macro_block_size=8,
        output_params=["-movflags", "+faststart"],
        ffmpeg_log_level="error",
    )
    writer.send(None)
    for i in range(int(seconds * fps)):
        frame = np.zeros((h, w, 3), np.uint8)
        frame[:, :] = (30, 40, 60)
        x = int((w - 20) * i / (seconds * fps))
        frame[h // 2 - 10 : h // 2 + 10, x : x + 20] = (250, 200, 40)  # a moving "drone"
        writer.send(frame)
    writer.close()


def write_tb(tb_dir: Path, steps: int, terms: dict[str, float], seed: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(seed)
    writer = SummaryWriter(log_dir=str(tb_dir))
    for it in range(steps):
        writer.add_scalar("Train/mean_reward", float(it * 0.5 + rng.normal()), it)
        writer.add_scalar("Loss/value_function", float(2.0 / (1 + it) + 0.01 * rng.random()), it)
        for term, v in terms.items():
            writer.add_scalar(f"Episode/rew_{term}", float(v * (it + 1) / steps), it)
    writer.add_scalar("Eval/success_rate", 0.8, steps)
    writer.close()


def make_run(
    root: Path,
    name: str,
    *,
    task: str,
    reward: str,
    guidance: str,
    seed: int,
    success: float,
    video: Path | None = None,
    guidance_files: bool = False,
    finished: bool = True,
    episodes: int = 20,
) -> Path:
    run = root / name
    (run / "eval").mkdir(parents=True)
    config = (
        f"task:\n  name: {task}\n  num_envs: 64\nalgo:\n  name: ppo\n  learning_rate: {3e-4 * seed}\n"
        f"reward:\n  name: {reward}\nguidance:\n  name: {guidance}\nseed: {seed}\nbackend: mujoco\n"
    )
    (run / "config.yaml").write_text(config)
    meta = {
        "run_name": name,
        "task": task,
        "algo": "ppo",
        "reward": reward,
        "guidance": guidance,
        "seed": seed,
        "git_revision": "abc1234",
        "versions": {"torch": "2.13.0", "mujoco": "4.0.0"},
        "started_at": "2026-01-01T00:00:00Z",
        "status": "finished" if finished else "running",
        "train_wall_time_s": 42.0,
    }
    if finished:
        meta["finished_at"] = "2026-01-01T00:10:00Z"
    (run / "meta.json").write_text(json.dumps(meta))
    terms = {"position": 1.5, "orientation": 0.4, "action_rate": -0.2}
    write_tb(run / "tb", 30, terms, seed)
    if finished:
        rng = np.random.default_rng(seed)
        per = [
            {
                "episode": i,
                "success": bool(rng.random() < success),
                "return": float(rng.normal(10, 2)),
                "position_error_m": float(abs(rng.normal(0.05, 0.02))),
                "crashed": False,
            }
            for i in range(episodes)
        ]
        k = sum(e["success"] for e in per)
        ev = {
            "name": "final",
            "task": task,
            "episodes": episodes,
            "randomization": "train",
            "seed": 1000 + seed,
            "metrics": {"success_rate": k / episodes, "position_error_m": 0.05, "crash_rate": 0.0},
            "reward_terms": terms,
            "per_episode": per,
        }
        (run / "eval" / "final.json").write_text(json.dumps(ev))
    if video is not None:
        (run / "videos").mkdir()
        (run / "videos" / "rollout.mp4").write_bytes(video.read_bytes())
    if guidance_files:
        (run / "guidance").mkdir()
        img = np.full((64, 96, 3), 200, np.uint8)
        img[20:30, 40:50] = (255, 0, 0)
        write_png(run / "guidance" / "keypoints_prompt.png", img)
        plan = {
            "subgoals": [{"description": "reach above <b>cube</b>"}, {"description": "grasp"}],
            "verification": {"attempts": 12, "verified_subgoals": 2, "success_rate": 0.75},
        }
        (run / "guidance" / "plan.json").write_text(json.dumps(plan))
    return run


@pytest.fixture(scope="session")
def video_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("video") / "rollout.mp4"
    write_video(path)
    return path


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory, video_file: Path, tiny_run: Path) -> Path:
    import shutil

    root = tmp_path_factory.mktemp("runs")
    real = root / "hover_real"
    shutil.copytree(tiny_run, real)
    meta = json.loads((real / "meta.json").read_text())
    meta["run_name"] = real.name
    (real / "meta.json").write_text(json.dumps(meta))
    make_run(
        root,
        "hover_ppo_s1",
        task="crazyflie_hover",
        reward="dense",
        guidance="none",
        seed=1,
        success=0.9,
        video=video_file,
    )
    make_run(root, "hover_ppo_s2", task="crazyflie_hover", reward="dense", guidance="none", seed=2, success=0.7)
    make_run(
        root,
        "lift_vlm_s1",
        task="franka_lift",
        reward="keypoint",
        guidance="vlm_keypoints",
        seed=1,
        success=0.5,
        video=video_file,
        guidance_files=True,
    )
    make_run(root, HTML_RUN, task="crazyflie_hover", reward="sparse", guidance="none", seed=3, success=0.2)
    # A live run: no evaluation, meta says running, the newest event file is cut mid-record.
    live = make_run(
        root,
        "hover_live",
        task="crazyflie_hover",
        reward="dense",
        guidance="llm_plan",
        seed=4,
        success=0.0,
        finished=False,
    )
    ev_file = next((live / "tb").glob("*tfevents*"))
    data = ev_file.read_bytes()
    ev_file.write_bytes(data[: len(data) - 7])
    (live / "eval" / "partial.json").write_text('{"name": "partial", "metrics": {"succ')
    # A symlink leading out of the runs root, which must never be served.
    secret = root.parent / "secret.txt"
    secret.write_text("top secret")
    (root / "hover_ppo_s1" / "videos" / "escape.mp4").symlink_to(secret)
    return root


def _serve(srv: DashboardServer) -> Iterator[DashboardServer]:
    """Serve on a thread for the test, then shut down."""
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


@pytest.fixture()
def server(runs_root: Path, tmp_path: Path) -> Iterator[DashboardServer]:
    srv = make_server(runs_root, port=0, store=str(tmp_path / "store.sqlite"), rescan_interval_s=0)
    yield from _serve(srv)


@pytest.fixture()
def serve(tmp_path: Path) -> Iterator[Callable[[Path], DashboardServer]]:
    """A function that serves another runs root (a fresh store in tmp_path) until the test ends."""
    running: list[Iterator[DashboardServer]] = []

    def start(root: Path) -> DashboardServer:
        srv = make_server(root, port=0, store=str(tmp_path / f"store{len(running)}.sqlite"), rescan_interval_s=0)
        running.append(_serve(srv))
        return next(running[-1])

    yield start
    for gen in running:
        next(gen, None)


# Malformed evaluation files: wrong types, huge integers, junk per-episode rows, not JSON.
BAD_EVALS: dict[str, str | bytes] = {
    "wrong_types": '{"name": "wrong_types", "episodes": "many", "metrics": {"success_rate": "high"}}',
    "huge_ints": '{"name": "huge_ints", "episodes": 100000000000000000000000000000, "seed": 1}',
    "huge_digits": '{"name": "huge_digits", "seed": ' + "9" * 5000 + "}",
    "junk_rows": '{"name": "junk_rows", "episodes": 3, "per_episode": [{"episode": 0}, 7, "x"]}',
    "not_json": b"\x00\xff this is not JSON {",
    "deep": "[" * 100_000 + "]" * 100_000,
}


def make_hostile_root(root: Path) -> Path:
    """Runs whose files lead out of their run, and one with malformed evaluation files.

    ``victim`` and ``other`` are ordinary runs. ``thief`` links to the store database
    (``eval_store.sqlite``, which the dashboard creates in the runs root), to
    another run, to ``/`` and to its own private tb/; its ``tb`` is a symlink to ``/``.
    ``tb_links`` has a real tb/ holding links to another run's logs and to ``/``. ``alias`` is
    a run directory that is a symlink to another run. ``badeval`` has one good evaluation and
    every kind of malformed one.
    """
    make_run(root, "victim", task="crazyflie_hover", reward="dense", guidance="none", seed=1, success=0.9)
    other = make_run(root, "other", task="crazyflie_hover", reward="dense", guidance="none", seed=2, success=0.8)
    (other / "videos").mkdir()
    (other / "videos" / "rollout.mp4").write_bytes(b"other run's video")
    (other / "guidance").mkdir()
    (other / "guidance" / "plan.json").write_text('{"subgoals": ["other run\'s plan"]}')

    thief = make_run(root, "thief", task="crazyflie_hover", reward="dense", guidance="none", seed=3, success=0.5)
    shutil.rmtree(thief / "tb")
    (thief / "tb").symlink_to("/", target_is_directory=True)
    (thief / "videos").mkdir()
    (thief / "videos" / "own.mp4").write_bytes(b"thief's own video")
    (thief / "videos" / "db.mp4").symlink_to("../../eval_store.sqlite")
    (thief / "videos" / "other.mp4").symlink_to("../../other/videos/rollout.mp4")
    (thief / "videos" / "root").symlink_to("/", target_is_directory=True)
    (thief / "videos" / "same.mp4").symlink_to("own.mp4")  # stays inside: allowed
    (thief / "bundle").symlink_to("/", target_is_directory=True)
    (thief / "guidance").mkdir()
    (thief / "guidance" / "plan.json").symlink_to("../../other/guidance/plan.json")
    (thief / "eval" / "stolen.json").symlink_to("../../other/eval/final.json")
    (thief / "checkpoints").mkdir()
    (thief / "checkpoints" / "meta.pt").symlink_to("../meta.json")  # inside, but not an artifact

    tb_links = make_run(root, "tb_links", task="franka_lift", reward="dense", guidance="none", seed=1, success=0.4)
    other_event = next((other / "tb").glob("*tfevents*"))
    (tb_links / "tb" / "borrowed").symlink_to(other / "tb", target_is_directory=True)
    (tb_links / "tb" / "events.out.tfevents.1.stolen").symlink_to(other_event)
    (tb_links / "tb" / "root").symlink_to("/", target_is_directory=True)

    (root / "alias").symlink_to("other", target_is_directory=True)

    bad = make_run(root, "badeval", task="franka_lift", reward="dense", guidance="none", seed=2, success=0.6)
    for name, text in BAD_EVALS.items():
        (bad / "eval" / f"{name}.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


@pytest.fixture(scope="session")
def hostile_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_hostile_root(tmp_path_factory.mktemp("hostile"))


@pytest.fixture()
def hostile_server(hostile_root: Path, tmp_path: Path) -> Iterator[DashboardServer]:
    # The default store, inside the runs root: the database a symlink points at.
    srv = make_server(hostile_root, port=0, rescan_interval_s=0)
    yield from _serve(srv)


@pytest.fixture(scope="session")
def sim2real_root(flight_fit: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs root whose sim2real/ holds what our own commands write for the "real" flight (tests/conftest.py):
    ``flight/`` from ``robot-rl sysid`` then ``robot-rl replay`` with the fit and the bundle (open and closed
    loop, the session's flight_fit); ``broken/`` the same files with replay.json cut mid-write; ``two_logs/`` that
    replay.json with a second log whose positions were cut short (one bad log in a good file); and one ordinary
    run."""
    root = tmp_path_factory.mktemp("s2r_runs")
    out = shutil.copytree(flight_fit["out"], root / "sim2real" / "flight")
    broken = shutil.copytree(out, root / "sim2real" / "broken")
    data = (broken / "replay.json").read_bytes()
    (broken / "replay.json").write_bytes(data[: len(data) // 2])
    two = shutil.copytree(out, root / "sim2real" / "two_logs")
    doc = json.loads((two / "replay.json").read_text())
    second = json.loads(json.dumps(doc["logs"][0]))
    second["log"] = "second_flight.mcap"
    second["position"] = second["position"][:10]
    doc["logs"].append(second)
    (two / "replay.json").write_text(json.dumps(doc))
    make_run(root, "hover_ppo_s1", task="crazyflie_hover", reward="dense", guidance="none", seed=1, success=0.9)
    return root


@pytest.fixture(scope="session")
def pick_place_s2r_root(pick_place_log: Path, trained_pick_place_bundle: Path, tmp_path_factory) -> Path:
    """A runs root whose sim2real/pick/ is what `robot-rl replay` wrote for the SITL pick-and-place log with the
    bundle that made it (closed loop on layout 0: the arm's and the object's trajectories)."""
    import contextlib
    import io

    from robot_rl.cli import main

    root = tmp_path_factory.mktemp("s2r_pick")
    args = [
        f"log={pick_place_log}",
        f"bundle={trained_pick_place_bundle}",
        "layout=0",
        f"out={root / 'sim2real' / 'pick'}",
    ]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["replay", *args]) == 0, printed.getvalue()
    return root


@pytest.fixture(scope="session")
def seed_sweep_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-seed sweep of two learning rates: six short real runs by one `robot-rl train -m`."""
    from robot_rl import commands

    root = tmp_path_factory.mktemp("sweep")
    runs = commands.cmd_train(
        [
            "-m",
            "seed=0,1,2",
            "algo.learning_rate=0.001,0.0003",
            f"runs_root={root}",
            "task.num_worlds=16",
            "train.iterations=5",
            "algo.num_steps_per_env=8",
            "train.progress=false",
        ]  # fmt: skip
    )
    assert len(runs) == 6
    return root

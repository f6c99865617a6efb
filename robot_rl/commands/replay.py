"""robot-rl replay: a flight log replayed in simulation, open loop and (with bundle=) closed loop; an arm's log
(joint_states and forward position controller commands) open loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robot_rl.commands.common import split_options
from robot_rl.commands.sysid import read_arm_logs, read_logs, read_quadruped_logs, sim2real_dir
from robot_rl.config import ConfigError

OPTIONS = ("log", "params", "bundle", "out", "runs_root", "namespace")


def cmd_replay(args: list[str]) -> dict:
    from robot_rl.sim2real.replay import closed_loop, error_table, open_loop_errors
    from sim.crazyflie_replay import CrazyflieReplay
    from sim.tasks.crazyflie.physical import CrazyflieParams, load_fit

    opts, rest = split_options(args, OPTIONS)
    if rest:
        raise ConfigError(f"replay takes {', '.join(o + '=' for o in OPTIONS)} not {rest[0].split('=')[0]}=")
    if read_quadruped_logs(opts) is not None:
        raise ConfigError("replay of a quadruped's log is not built yet (robot-rl sysid fits it)")
    arm = read_arm_logs(opts)
    if arm is not None:
        return _replay_arm(opts, arm)
    logs = read_logs(opts, "replay")
    models = {"nominal": CrazyflieParams()}
    if opts.get("params"):
        try:
            fit = load_fit(opts["params"])
        except ValueError as e:
            raise ConfigError(str(e)) from None
        models["fitted"] = CrazyflieParams.from_mapping({k: v[0] for k, v in fit.items()})
    out = sim2real_dir(logs, opts)
    out.mkdir(parents=True, exist_ok=True)
    replay = CrazyflieReplay()
    summary = {"logs": []}
    for log in logs:
        try:
            results = [open_loop_errors(log, p, name, replay=replay) for name, p in models.items()]
        except ValueError as e:
            raise ConfigError(str(e)) from None
        print(f"{log.source}: {log.duration_s:.1f} s, {results[0].windows} windows; open-loop |position error|")
        print(error_table(results))
        entry = {
            "log": log.source,
            "t": log.t.round(4).tolist(),
            "position": log.position.round(4).tolist(),
            "report": log.report.lines(),
            "open_loop": [r.as_dict() for r in results],
            "params": {name: p.as_dict() for name, p in models.items()},
        }
        if opts.get("bundle"):
            entry["closed_loop"] = {name: closed_loop(log, Path(opts["bundle"]), p) for name, p in models.items()}
            for name, c in entry["closed_loop"].items():
                rms = ", ".join(f"{a} {v * 100:.1f} cm" for a, v in c["rms_m"].items())
                print(f"closed loop ({name}): RMS sim - log {rms}{'; crashed' if c['crashed'] else ''}")
        summary["logs"].append(entry)
    if opts.get("params"):
        summary["sysid"] = str(Path(opts["params"]).resolve())
        summary["fit"] = {k: {"value": v, "interval": [lo, hi]} for k, (v, lo, hi) in fit.items()}
    return _write(summary, out)


def _replay_arm(opts: dict, logs: list) -> dict:
    """An arm's logs open loop under the nominal model and, with params=, an arm fit: TCP and joint errors."""
    from robot_rl.sim2real.arm_replay import arm_model, arm_open_loop_errors, tcp_positions
    from robot_rl.sim2real.replay import error_table
    from sim.tasks.arm.physical import ArmParams, load_fit

    if opts.get("bundle"):
        raise ConfigError("replay bundle= (closed loop) is the Crazyflie's; an arm's log replays open loop only")
    models = {"nominal": ArmParams()}
    fit = None
    if opts.get("params"):
        try:
            fit = load_fit(opts["params"])
        except ValueError as e:
            raise ConfigError(str(e)) from None
        models["fitted"] = ArmParams.from_mapping({k: v[0] for k, v in fit.items()})
    out = sim2real_dir(logs, opts)
    out.mkdir(parents=True, exist_ok=True)
    model = arm_model(ArmParams())
    summary = {"robot": "arm", "logs": []}
    for log in logs:
        try:
            runs = [arm_open_loop_errors(log, p, name) for name, p in models.items()]
        except ValueError as e:
            raise ConfigError(str(e)) from None
        results = [r for r, _ in runs]
        print(f"{log.source}: {log.duration_s:.1f} s, {results[0].windows} windows; open-loop |TCP error|")
        print(error_table(results))
        for r, joint in runs:
            cells = ", ".join(f"{h:.1f} s {e * 1000:.2f} mrad" for h, e in zip(r.horizons_s, joint, strict=True))
            print(f"median |joint error| ({r.label}): {cells}")
        qpos = np.zeros((len(log.t), model.nq))
        qpos[:, : log.position.shape[1]] = log.position
        summary["logs"].append({
            "log": log.source,
            "t": log.t.round(4).tolist(),
            "position": tcp_positions(model, qpos).round(4).tolist(),
            "report": log.report.lines(),
            "open_loop": [r.as_dict() | {"joint_median_rad": j.round(6).tolist()} for r, j in runs],
            "params": {name: p.as_dict() for name, p in models.items()},
        })  # fmt: skip
    if fit is not None:
        summary["sysid"] = str(Path(opts["params"]).resolve())
        summary["fit"] = {k: {"value": v, "interval": [lo, hi]} for k, (v, lo, hi) in fit.items()}
    return _write(summary, out)


def _write(summary: dict, out: Path) -> dict:
    path = out / "replay.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary))
    tmp.replace(path)
    _plot(summary, out)
    print(f"wrote {path} and {out / 'replay.svg'}")
    return summary


def _plot(summary: dict, out: Path) -> None:
    """Per axis: the logged position and each model's open-loop windows over it (the first log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entry = summary["logs"][0]
    t, pos = np.array(entry["t"]), np.array(entry["position"])
    dt = float(np.median(np.diff(t))) if len(t) > 1 else 0.01  # the log's period (0.01 s Crazyflie, 0.04 s arm)
    prefix = "TCP " if summary.get("robot") == "arm" else ""
    fig, axes = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    colors = {"nominal": "tab:red", "fitted": "tab:blue"}
    for i, (ax, name) in enumerate(zip(axes, "xyz", strict=True)):
        ax.plot(t, pos[:, i], color="black", lw=1.2, label="log")
        for r in entry["open_loop"]:
            pred = np.array(r["predicted"])
            for j, s in enumerate(r["starts_s"]):
                tt = s + dt * np.arange(1, pred.shape[1] + 1)
                ax.plot(
                    tt,
                    pred[j, :, i],
                    color=colors.get(r["label"], "tab:green"),
                    lw=0.8,
                    label=r["label"] if j == 0 else None,
                )
        ax.set_ylabel(f"{prefix}{name} (m)")
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(out / "replay.svg")
    plt.close(fig)

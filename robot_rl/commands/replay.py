"""robot-rl replay: a flight log, an arm's or a quadruped's log (the topics tell which) replayed in simulation, open
loop and (with bundle=) closed loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robot_rl.commands.common import split_options
from robot_rl.commands.sysid import read_joint_logs, read_logs, sim2real_dir
from robot_rl.config import ConfigError

OPTIONS = ("log", "params", "bundle", "out", "runs_root", "namespace", "layout", "layout_seed")


def cmd_replay(args: list[str]) -> dict:
    from robot_rl.sim2real.replay import closed_loop, error_table, open_loop_errors
    from sim.crazyflie_replay import CrazyflieReplay
    from sim.tasks.crazyflie.physical import CrazyflieParams, load_fit

    opts, rest = split_options(args, OPTIONS)
    if rest:
        raise ConfigError(f"replay takes {', '.join(o + '=' for o in OPTIONS)} not {rest[0].split('=')[0]}=")
    joint_logs = read_joint_logs(opts)
    if joint_logs is not None:
        robot, logs = joint_logs
        return _replay_joint_robot(opts, logs, _quadruped_robot() if robot == "quadruped" else _arm_robot(opts))
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


def _arm_robot(opts: dict) -> dict:
    """layout= / layout_seed=: the pick-and-place table a pick-and-place bundle's closed loop is replayed on."""
    from robot_rl.sim2real.arm_replay import arm_closed_loop, arm_model, arm_open_loop_errors, tcp_positions
    from sim.tasks.arm.physical import ArmParams, load_fit

    try:
        layout = int(opts["layout"]) if opts.get("layout") else None
        layout_seed = int(opts.get("layout_seed") or 0)
    except ValueError:
        raise ConfigError("replay: layout= and layout_seed= are integers") from None

    model = arm_model(ArmParams())  # the nominal arm's TCP: compiled once for every log

    def positions(log) -> np.ndarray:
        qpos = np.zeros((len(log.t), model.nq))
        qpos[:, : log.position.shape[1]] = log.position
        return tcp_positions(model, qpos)

    return {"robot": "arm", "what": "TCP", "params": ArmParams, "load_fit": load_fit, "errors": arm_open_loop_errors,
            "positions": positions,
            "closed_loop": lambda log, bundle, p: arm_closed_loop(log, bundle, p, layout, layout_seed)}  # fmt: skip


def _quadruped_robot() -> dict:
    from robot_rl.sim2real.quadruped_replay import quadruped_closed_loop, quadruped_open_loop_errors
    from sim.tasks.quadruped.physical import QuadrupedParams, load_fit

    return {"robot": "quadruped", "what": "trunk", "params": QuadrupedParams, "load_fit": load_fit,
            "errors": quadruped_open_loop_errors, "positions": lambda log: log.base_position,
            "closed_loop": quadruped_closed_loop}  # fmt: skip


def _replay_joint_robot(opts: dict, logs: list, robot: dict) -> dict:
    """An arm's or a quadruped's logs under the nominal model and, with params=, its fit: open loop, per-axis errors
    of a point (the arm's TCP, the quadruped's trunk) and the joints' median errors; with bundle=, closed loop."""
    from robot_rl.sim2real.replay import error_table

    name, what = robot["robot"], robot["what"]
    models = {"nominal": robot["params"]()}
    fit = None
    if opts.get("params"):
        try:
            fit = robot["load_fit"](opts["params"])
        except ValueError as e:
            raise ConfigError(str(e)) from None
        models["fitted"] = robot["params"].from_mapping({k: v[0] for k, v in fit.items()})
    out = sim2real_dir(logs, opts)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"robot": name, "logs": []}
    for log in logs:
        try:
            runs = [robot["errors"](log, p, label) for label, p in models.items()]
        except ValueError as e:
            raise ConfigError(str(e)) from None
        results = [r for r, _ in runs]
        print(f"{log.source}: {log.duration_s:.1f} s, {results[0].windows} windows; open-loop |{what} error|")
        print(error_table(results))
        for r, joint in runs:
            cells = ", ".join(f"{h:.1f} s {e * 1000:.2f} mrad" for h, e in zip(r.horizons_s, joint, strict=True))
            print(f"median |joint error| ({r.label}): {cells}")
        entry = {
            "log": log.source,
            "t": log.t.round(4).tolist(),
            "position": np.asarray(robot["positions"](log)).round(4).tolist(),
            "report": log.report.lines(),
            "open_loop": [r.as_dict() | {"joint_median_rad": j.round(6).tolist()} for r, j in runs],
            "params": {label: p.as_dict() for label, p in models.items()},
        }
        if opts.get("bundle"):
            try:
                entry["closed_loop"] = {
                    label: robot["closed_loop"](log, Path(opts["bundle"]), p) for label, p in models.items()
                }
            except ValueError as e:
                raise ConfigError(str(e)) from None
            for label, c in entry["closed_loop"].items():
                rms = ", ".join(f"{a} {v * 1000:.2f} mm" for a, v in c["rms_m"].items())
                print(f"closed loop ({label}): RMS sim - log {what} {rms}; joints {c['joint_rms_rad'] * 1000:.2f} mrad"
                      f"{'; fell' if c['crashed'] else ''}")  # fmt: skip
                if "object" in c:  # pick-and-place: where the object went
                    o, rms = c["object"], ", ".join(f"{a} {v * 1000:.1f} mm" for a, v in c["object"]["rms_m"].items())
                    print(f"  object: RMS sim - log {rms}; final sim {o['final_m']['sim']}, log {o['final_m']['log']}"
                          f" (goal {o['goal']}); in the bowl in sim: {o['sim_in_goal']}")  # fmt: skip
                for seg in c.get("segments", []):  # a quadruped: mean body velocity per velocity command
                    triple = lambda v: "(" + ", ".join(f"{x:+.2f}" for x in v) + ")"  # noqa: E731
                    print(f"  command {triple(seg['command'])}: log {triple(seg['log'])}, sim {triple(seg['sim'])}")
        summary["logs"].append(entry)
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
    prefix = {"arm": "TCP ", "quadruped": "trunk "}.get(summary.get("robot", ""), "")
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

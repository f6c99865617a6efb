"""robot-rl replay: a flight log replayed in simulation, open loop and (with bundle=) closed loop."""

from __future__ import annotations

import json
from pathlib import Path

from robot_rl.commands.common import split_options
from robot_rl.commands.sysid import read_logs, sim2real_dir
from robot_rl.config import ConfigError

OPTIONS = ("log", "params", "bundle", "out", "namespace")


def cmd_replay(args: list[str]) -> dict:
    from robot_rl.sim2real.replay import closed_loop, error_table, open_loop_errors
    from sim.crazyflie_replay import CrazyflieReplay
    from sim.tasks.crazyflie.physical import CrazyflieParams, load_fit

    opts, rest = split_options(args, OPTIONS)
    if rest:
        raise ConfigError(f"replay takes {', '.join(o + '=' for o in OPTIONS)} not {rest[0].split('=')[0]}=")
    logs = read_logs(opts, "replay")
    models = {"nominal": CrazyflieParams()}
    if opts.get("params"):
        try:
            fit = load_fit(opts["params"])
        except ValueError as e:
            raise ConfigError(str(e)) from None
        models["fitted"] = CrazyflieParams.from_mapping({k: v[0] for k, v in fit.items()})
    out = Path(opts["out"]) if "out" in opts else sim2real_dir(logs)
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
    import numpy as np

    entry = summary["logs"][0]
    t, pos = np.array(entry["t"]), np.array(entry["position"])
    fig, axes = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    colors = {"nominal": "tab:red", "fitted": "tab:blue"}
    for i, (ax, name) in enumerate(zip(axes, "xyz", strict=True)):
        ax.plot(t, pos[:, i], color="black", lw=1.2, label="log")
        for r in entry["open_loop"]:
            pred = np.array(r["predicted"])
            for j, s in enumerate(r["starts_s"]):
                tt = s + 0.01 * np.arange(1, pred.shape[1] + 1)
                ax.plot(
                    tt,
                    pred[j, :, i],
                    color=colors.get(r["label"], "tab:green"),
                    lw=0.8,
                    label=r["label"] if j == 0 else None,
                )
        ax.set_ylabel(f"{name} (m)")
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(out / "replay.svg")
    plt.close(fig)

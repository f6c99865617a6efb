"""Issue 8's comparison: two-stage safety-guided swarm policies against classical planners, on held-out scenes.

    python scripts/swarm_comparison.py --seeds 0,1,2 --iterations 60 --worlds 256 --guide 0.25 \\
        --scenes 100 --gap-episodes 32 --out runs/sweeps/swarm_comparison

Per seed, through `robot-rl train` (task=crazyflie_swarm algo=ppo_swarm):
- with --imitation-rounds N > 0, first an imitation warm start (<out>/imitation_s<seed>, `robot-rl imitate`):
  N DAgger rounds of --imitation-steps env steps on --worlds worlds from the task's sensed CBF teacher, then
  a critic warm-up under stage 1's rewards (robot_rl/training/imitation.py); stage 1 starts from it (init_from)
  and its wall time and env steps include it;
- stage 1 (<out>/stage1_s<seed>): --iterations PPO iterations with the safety guide on
  (task.params.rewards.safety_guide=--guide: -guide |a - a_cbf| against the CBF-filtered planner command);
- stage 2 (<out>/stage2_s<seed>): init_from= stage 1's final checkpoint (weights, optimizer; its env
  steps count on), --iterations more with the guide off (and any --stage2 overrides, e.g. the collision weights that
  have to carry the safety once the guide is gone);
- with --anchor-coef c > 0, both stages are pulled toward the warm start's policy (algo.anchor, algo.anchor_coef:
  c * |mean action - warm start's mean action|^2 on each rollout's observations after every PPO update).
Then every policy (the checkpoint's actor as a stand-alone SwarmAttentionPolicy / SwarmMlpPolicy, what
c_export writes to C) and every baseline (goto, and apf and cbf with the gains of
configs/baselines/swarm_planners.yaml, and the imitation teacher: the same CBF filter on what the policy
senses, ToF beams and delayed neighbour broadcasts) flies the same --scenes held-out scenes (scene_set test), --drones
drones each, one --episode-s episode, with DR and observation noise as in training; and the gap scenario
(one 0.2 m gap on each drone's straight path, planner speed 0.5 m/s, ToF noise and DR on), which reports the
collision-free traversal rate.

Interrupt it at any time and run the same command again: a finished stage (its final checkpoint exists) is
skipped (so is a finished warm start; an unfinished one starts over), an interrupted one resumes from its
latest checkpoint, and evaluations already written to <out>/eval/<name>.json are not repeated. Writes
<out>/table.md and <out>/table.json (with the command).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from robot_rl import commands
from robot_rl.baselines.swarm_planners import TUNED_PATH, evaluate, policy_controller, tuned_planners
from robot_rl.config import load_config
from robot_rl.policies.swarm_actor import policy_from_checkpoint

COLUMNS = ["success", "collision", "obstacle_collision", "neighbour_collision", "time_to_goal_s", "mean_speed",
           "deadlock", "gap_traversal"]  # fmt: skip


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def common_overrides(args) -> list[str]:
    return ["task=crazyflie_swarm", "algo=ppo_swarm", f"algo.actor={args.actor}", f"task.num_worlds={args.worlds}",
            f"task.params.num_drones={args.drones}", *args.extra]  # fmt: skip


def imitate_stage(args, seed: int) -> Path:
    """The imitation warm start of one seed (skipped when its checkpoint exists); returns its checkpoint."""
    run = args.out / f"imitation_s{seed}"
    final = run / "checkpoints" / "model_0.pt"
    if final.exists():
        return final
    if run.exists():  # killed before its checkpoint: a warm start is short, start over
        shutil.rmtree(run)
    # stage 1's rewards (the guide on): the warm start's critic learns the values stage 1 will estimate
    overrides = [*common_overrides(args), f"task.params.rewards.safety_guide={args.guide}", f"seed={seed}",
                 f"runs_root={args.out}", f"run_name={run.name}", "train.progress=false",
                 f"imitation.rounds={args.imitation_rounds}",
                 f"imitation.steps_per_round={args.imitation_steps}"]  # fmt: skip
    print(f"[imitation seed {seed}] DAgger warm start {run}", flush=True)
    commands.cmd_imitate(overrides)
    return final


def train_stage(args, stage: int, seed: int) -> Path:
    """Train (or finish, or skip) one stage of one seed; returns its final checkpoint."""
    run = args.out / f"stage{stage}_s{seed}"
    target = args.iterations  # each stage is a run of its own: init_from trains train.iterations more
    final = run / "checkpoints" / f"model_{target}.pt"
    if final.exists():
        return final
    if (run / "config.yaml").exists() and any(run.glob("checkpoints/model_*.pt")):
        print(f"[stage {stage} seed {seed}] resuming {run}", flush=True)
        # its final checkpoint is missing: go on, whatever its meta.json says (a copy may say finished)
        commands.cmd_train([f"resume={run}", f"train.iterations={target}", "resume_finished=true"])
        return final
    if run.exists():  # killed before its first checkpoint: nothing to keep
        shutil.rmtree(run)
    guide = args.guide if stage == 1 else 0.0
    overrides = [*common_overrides(args), f"task.params.rewards.safety_guide={guide}", f"seed={seed}",
                 f"runs_root={args.out}", f"run_name={run.name}", f"train.iterations={target}",
                 f"train.save_every={args.save_every}", "train.progress=false"]  # fmt: skip
    warm = args.out / f"imitation_s{seed}" / "checkpoints" / "model_0.pt"
    if stage == 2:
        overrides.append(f"init_from={args.out / f'stage1_s{seed}' / 'checkpoints' / f'model_{args.iterations}.pt'}")
        overrides += args.stage2
    elif args.imitation_rounds > 0:
        overrides.append(f"init_from={warm}")
    if args.anchor_coef > 0:  # both stages are pulled toward the warm start's policy
        overrides += [f"algo.anchor={warm}", f"algo.anchor_coef={args.anchor_coef}"]
    print(f"[stage {stage} seed {seed}] training {run} to iteration {target}", flush=True)
    commands.cmd_train(overrides)
    return final


def task_params(args) -> dict:
    """The trained task's parameters (reward weights aside): every method is evaluated on the same task."""
    params = OmegaConf.to_container(load_config(common_overrides(args)).task.params, resolve=True)
    for evaluation_own in ("rewards", "scene_set", "scene_offset"):  # evaluate() sets which scenes it flies
        params.pop(evaluation_own, None)
    return params


def evaluate_entry(args, name: str, controller_fn, gap: bool) -> dict:
    """One cached evaluation: <out>/eval/<name>.json."""
    path = args.out / "eval" / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())
    kw = task_params(args)
    if gap:  # a 0.2 m gap on each drone's straight path, flown at 0.5 m/s
        kw.update(scenario="gap", gap_width=0.2, speed_mean=0.5, speed_std=0.0)
    t0 = time.perf_counter()
    r = evaluate(controller_fn(), args.gap_episodes if gap else args.scenes, args.episode_s, seed=args.eval_seed,
                 scene_set="test", nthread=args.eval_threads, randomization="train", obs_noise=True, **kw)  # fmt: skip
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    _write_json(path, r)
    print(f"[eval] {name}: success {r['success']:.3f} collision {r['collision']:.3f} traversed {r['traversed']:.3f}"
          f" ({r['wall_s']} s)", flush=True)  # fmt: skip
    return r


def _row(main: dict, gap: dict) -> dict:
    row = {c: main[c] for c in COLUMNS if c != "gap_traversal"}
    row["gap_traversal"] = gap["traversed"]
    if "per_scene" in main:  # absent from evaluations cached before it was recorded
        row["per_scene"] = main["per_scene"]
    return row


def paired_collision_change(stage1: dict[int, dict], stage2: dict[int, dict], drones: int) -> dict | None:
    """Stage 2 minus stage 1 collision rate, paired scene by scene (both fly the same held-out scenes):
    mean over every seed's scenes and a normal 95% interval, in fractions of drones."""
    diffs = [
        (c2 - c1) / drones
        for seed in sorted(set(stage1) & set(stage2))
        if "per_scene" in stage1[seed] and "per_scene" in stage2[seed]
        for c1, c2 in zip(stage1[seed]["per_scene"]["collision"], stage2[seed]["per_scene"]["collision"], strict=True)
    ]
    if len(diffs) < 2:
        return None
    mean = sum(diffs) / len(diffs)
    half = 1.96 * math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
    return {"mean": mean, "ci95": [mean - half, mean + half], "scene_pairs": len(diffs)}


def _nanmean(values: list[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]  # time to goal is NaN for a seed where no drone arrived
    return sum(vals) / len(vals) if vals else math.nan


def _fmt(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def warm_start(args) -> str:
    if args.imitation_rounds <= 0:
        return ""
    anchor = (f" Both stages are anchored to the warm start's policy (anchor_coef {args.anchor_coef:g})."
              if args.anchor_coef > 0 else "")  # fmt: skip
    return (f" Stage 1 starts from an imitation warm start (row imitation): {args.imitation_rounds} DAgger rounds x "
            f"{args.imitation_steps} env steps x {args.worlds} worlds, then a critic warm-up; stage 1's wall time "
            f"and env steps include it.{anchor}")  # fmt: skip


def table(args, baselines: dict, policies: dict, runs: dict, command: str) -> tuple[str, dict]:
    """Markdown and JSON: baselines, then per stage the mean over seeds and every seed's value."""
    stage2_extra = "".join(f", {o}" for o in args.stage2)
    lines = [f"# Swarm comparison (issue 8)\n\nCommand: `{command}`\n",
             f"Budget per seed: stage 1 = {args.iterations} PPO iterations with safety_guide={args.guide}, stage 2 = "
             f"{args.iterations} more without it{stage2_extra}; {args.worlds} worlds x {args.drones} drones, "
             f"{args.iterations * args.worlds * 24:,} env steps per stage; actor {args.actor}.{warm_start(args)}",
             f"Evaluation: {args.scenes} held-out scenes x {args.drones} drones, {args.episode_s:g} s episodes, DR and "
             f"observation noise on (seed {args.eval_seed}); gap: {args.gap_episodes} episodes x {args.drones} drones, "
             "each through its own 0.2 m gap at 0.5 m/s, column = collision-free traversal rate. Planners read true "
             "geometry, except cbf_sensed (the imitation teacher: the cbf filter on the ToF beams and delayed "
             "neighbour broadcasts, what the policies read).\n",
             "| method | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]  # fmt: skip
    data = {"command": command, "args": {k: str(v) for k, v in vars(args).items()}, "baselines": baselines,
            "policies": {}, "training": runs}  # fmt: skip
    for name, row in baselines.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(row[c]) for c in COLUMNS) + " |")
    for stage, seeds in policies.items():
        mean = {c: _nanmean([r[c] for r in seeds.values()]) for c in COLUMNS}
        data["policies"][stage] = {"mean": mean, "per_seed": seeds}
        lines.append(f"| **{stage}** (mean of {len(seeds)}) | " + " | ".join(_fmt(mean[c]) for c in COLUMNS) + " |")
        for seed, r in seeds.items():
            lines.append(f"| {stage} seed {seed} | " + " | ".join(_fmt(r[c]) for c in COLUMNS) + " |")
    if "stage2" in data["policies"]:
        s2 = data["policies"]["stage2"]["mean"]["success"]
        margins = {b: s2 - r["success"] for b, r in baselines.items()}
        data["stage2_success_margin"] = margins
        lines.append("\nStage 2 success minus each baseline's (points): "
                     + ", ".join(f"{b} {100 * m:+.1f}" for b, m in margins.items()))  # fmt: skip
        change = paired_collision_change(policies.get("stage1", {}), policies["stage2"], args.drones)
        if change:
            data["stage2_minus_stage1_collision"] = change
            lo, hi = change["ci95"]
            lines.append(f"Stage 2 minus stage 1 collision rate, paired over {change['scene_pairs']} scenes (every "
                         f"seed's): {100 * change['mean']:+.1f} points (95% interval {100 * lo:+.1f} to "
                         f"{100 * hi:+.1f}).")  # fmt: skip
    walls = ", ".join(f"{k} {v['train_wall_time_s']}" for k, v in runs.items())
    lines.append(f"\nTraining wall time (s; stage 2's includes its stage 1, which it continues, and stage 1's its "
                 f"warm start if any): {walls}")  # fmt: skip
    return "\n".join(lines) + "\n", data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--iterations", type=int, default=60, help="PPO iterations per stage")
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--worlds", type=int, default=256)
    p.add_argument("--drones", type=int, default=6)
    p.add_argument("--actor", default="swarm_attention", choices=["swarm_attention", "swarm_mlp"])
    p.add_argument("--guide", type=float, default=0.25, help="stage 1's safety_guide reward weight")
    p.add_argument("--imitation-rounds", type=int, default=0, help="DAgger rounds before stage 1 (0: no warm start)")
    p.add_argument("--imitation-steps", type=int, default=500, help="env steps per DAgger round")
    p.add_argument(
        "--anchor-coef",
        type=float,
        default=0.0,
        help="pull both PPO stages toward the imitation warm start's policy (algo.anchor_coef; 0: off)",
    )
    p.add_argument("--scenes", type=int, default=100, help="held-out scenes for the main table")
    p.add_argument("--gap-episodes", type=int, default=32)
    p.add_argument("--episode-s", type=float, default=20.0)
    p.add_argument("--eval-seed", type=int, default=12345)
    p.add_argument("--eval-threads", type=int, default=0, help="mujoco threads in evaluation (0: all cores)")
    p.add_argument("--baselines", type=Path, default=TUNED_PATH, help="tuned planner gains")
    p.add_argument("--out", type=Path, default=Path("runs/sweeps/swarm_comparison"))
    p.add_argument(
        "--stage2",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for stage 2 only (repeatable)",
    )
    p.add_argument("extra", nargs="*", help="more config overrides for every training run")
    args = p.parse_args(argv)
    if args.anchor_coef > 0 and args.imitation_rounds <= 0:
        p.error("--anchor-coef needs an imitation warm start (--imitation-rounds > 0) to anchor to")
    command = "python scripts/swarm_comparison.py " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]

    stages = (["imitation"] if args.imitation_rounds > 0 else []) + ["stage1", "stage2"]
    finals = {}
    for seed in seeds:
        if args.imitation_rounds > 0:
            finals["imitation", seed] = imitate_stage(args, seed)
        for stage in (1, 2):
            finals[f"stage{stage}", seed] = train_stage(args, stage, seed)
    runs = {}
    for (stage, seed), ckpt in finals.items():
        meta = json.loads((ckpt.parents[1] / "meta.json").read_text())
        runs[f"{stage}_s{seed}"] = {k: meta.get(k) for k in ("train_wall_time_s", "total_steps", "iterations")}

    baselines = {}
    for name, planner in tuned_planners(args.baselines).items():
        main_r = evaluate_entry(args, name, lambda planner=planner: planner, gap=False)
        gap_r = evaluate_entry(args, f"gap_{name}", lambda planner=planner: planner, gap=True)
        baselines[name] = _row(main_r, gap_r)
    # the imitation teacher: CBF-filtered go-to from the sensed ToF beams and delayed neighbour broadcasts
    sensed = lambda: lambda task: task.sensed_safe_command()  # noqa: E731
    baselines["cbf_sensed"] = _row(evaluate_entry(args, "cbf_sensed", sensed, gap=False),
                                   evaluate_entry(args, "gap_cbf_sensed", sensed, gap=True))  # fmt: skip
    policies: dict[str, dict[int, dict]] = {stage: {} for stage in stages}
    for (stage, seed), ckpt in finals.items():
        name = f"{stage}_s{seed}"
        make = lambda ckpt=ckpt: policy_controller(policy_from_checkpoint(ckpt, args.drones))  # noqa: E731
        policies[stage][seed] = _row(evaluate_entry(args, name, make, gap=False),
                                     evaluate_entry(args, f"gap_{name}", make, gap=True))  # fmt: skip
    md, data = table(args, baselines, policies, runs, command)
    (args.out / "table.md").write_text(md)
    _write_json(args.out / "table.json", data)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

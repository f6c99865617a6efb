"""Sample-efficiency sweep: variants x seeds, evaluated every K iterations, censored steps to a success level.

    python scripts/sample_efficiency.py --task arm_push --variants dense,sparse,keypoint_oracle,keypoint_noisy \
        --seeds 0,1,2 --chunks 6 --chunk-iterations 10 --out runs/sweeps/arm_push

Each (variant, seed) is one run directory under --out, trained in chunks of --chunk-iterations
PPO iterations (`robot-rl train`, then `resume=`), with an evaluation on --episodes episodes after
every chunk appended to its curve.json. Interrupt it at any time and run the same command again:
finished runs are skipped and an interrupted run resumes from its last checkpoint and curve point.
With --demos N (off-policy learners) each variant but `*_no_demos` first gets N episodes of the plan
controller's demonstrations labelled with its own reward (robot-rl collect policy=plan; --demo-plan-reads
perceived: the controller reads the noisy state the learner observes), pretrains on them offline and fine-tunes
online with them as prior data (--demo-overrides); its curve starts at 0 online steps:

    python scripts/sample_efficiency.py --task arm_pick_place --variants keypoint_oracle,dense,sparse,\
        keypoint_oracle_no_demos --demos 128 --worlds 128 --chunks 5 --out runs/sweeps/arm_pick_place_td3bc \
        algo=td3 task.action_mode=ee_position

The table (markdown and JSON) gives, per variant, the env steps to reach --level success as median
and IQR over seeds, '> cap' where a seed never reached it, and the final success of every seed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from robot_rl import commands
from robot_rl.training.checkpoint import latest_checkpoint
from robot_rl.training.run_dir import write_json_atomic

# The same learner, PPO hyper-parameters, layouts and randomization for every variant; only the
# reward or the guidance differs. Plan guidance drives the TCP, so it and its baseline use ee_position.
VARIANTS = {
    "dense": ["task.params.reward=dense"],
    "sparse": ["task.params.reward=sparse"],
    "keypoint_oracle": ["guidance=keypoint", "guidance.backend=oracle"],
    "keypoint_noisy": ["guidance=keypoint", "guidance.backend=noisy_oracle", "guidance.noise_p=0.2"],
    "keypoint_vlm": ["guidance=keypoint", "guidance.backend=vlm"],
    "dense_ee_position": ["task.params.reward=dense", "task.action_mode=ee_position"],
    "plan": ["guidance=plan", "task.action_mode=ee_position"],
    "plan_wrong_option": ["guidance=plan", "task.action_mode=ee_position", "guidance.inject_wrong_option=true"],
    # N distinct wrong push targets ahead of the right one; plan-only (fresh bandit, 256 episodes) with the
    # push controller of the eleventh session: 0.461 (one wrong option), 0.281 (two), 0.207 (three)
    "plan_two_wrong_options": [
        "guidance=plan",
        "task.action_mode=ee_position",
        "guidance.inject_wrong_option=true",
        "guidance.wrong_options=2",
    ],
    "plan_three_wrong_options": [
        "guidance=plan",
        "task.action_mode=ee_position",
        "guidance.inject_wrong_option=true",
        "guidance.wrong_options=3",
    ],
    # the plan controller sees the pushed / grasped object 2 cm off (per axis, per episode); the policy sees it right
    "plan_pose_noise": ["guidance=plan", "task.action_mode=ee_position", "guidance.object_pose_noise_m=0.02"],
    # the same, and the policy may shift the plan's estimate of the object (up to 4 cm per axis)
    "plan_pose_noise_corrected": [
        "guidance=plan",
        "task.action_mode=ee_position",
        "guidance.object_pose_noise_m=0.02",
        "guidance.pose_correction_m=0.04",
    ],
}
# Demonstration runs (--demos N) leave these without them: KAGI's "keypoint reward without demonstrations"
NO_DEMOS = {"keypoint_oracle_no_demos": VARIANTS["keypoint_oracle"]}
VARIANTS.update(NO_DEMOS)


def make_demos(out: Path, task: str, variant: str, args) -> Path:
    """<out>/demos/<variant>.npz: --demos episodes of the plan controller (robot-rl collect policy=plan) on the
    variant's task, labelled with the variant's reward; a one-iteration run of the variant gives collect its
    config. Every variant's demonstrations are the same episodes (collect's fixed seed) and only the rewards differ.
    (Until attaching the keypoint reward stopped resetting the worlds, with --demo-plan-reads perceived they were
    not: 123 against 119 of 128 successful for the keypoint variants against dense and sparse.)
    A plan-guided variant's are its own env's with a zero residual (policy=zero): the plan's features observed,
    the residual as the action, and with injected wrong options the bandit's first tries among them."""
    path = out / "demos" / f"{variant}.npz"
    if path.exists():
        return path
    source = out / "demos" / variant
    if source.exists():
        shutil.rmtree(source)
    common = [f"task={task}", f"task.num_worlds={args.worlds}", f"task.params.layouts={args.layouts}"]
    commands.cmd_train([*common, *VARIANTS[variant], *args.extra, "train.iterations=1", "train.progress=false",
                        f"runs_root={out / 'demos'}", f"run_name={variant}"])  # fmt: skip
    # a plan-guided variant's own env holds the controller: its demonstrations are the zero residual on the plan
    policy = "zero" if "guidance=plan" in VARIANTS[variant] else "plan"
    reads = [f"plan_reads={args.demo_plan_reads}"] if policy == "plan" else []
    commands.cmd_collect([f"run={source}", f"policy={policy}", f"episodes={args.demos}", f"noise={args.demo_noise}",
                          *reads, f"out={path}"])  # fmt: skip
    return path


def demo_overrides(out: Path, task: str, variant: str, args) -> list[str]:
    if not args.demos or variant in NO_DEMOS:
        return []
    return [f"algo.prior_data={make_demos(out, task, variant, args).resolve()}", *args.demo_overrides.split()]


def evaluate_point(run: Path, iterations: int, args) -> dict:
    checkpoint = run / "checkpoints" / f"model_{iterations}.pt"
    result = commands.evaluate_run(run, [f"eval.episodes={args.episodes}"], checkpoint=str(checkpoint),
                                   name=f"curve_{iterations:05d}")  # fmt: skip
    meta = json.loads((run / "meta.json").read_text())
    steps = iterations * int(meta["total_steps"]) // int(meta["iterations"])
    m = result["metrics"]
    return {"iterations": iterations, "env_steps": steps, "success": m["success_rate"], "ci95": m["success_ci95"]}


def run_one(out: Path, task: str, variant: str, seed: int, args) -> list[dict]:
    run = out / f"{variant}_s{seed}"
    curve_path = run / "curve.json"
    curve = json.loads(curve_path.read_text()) if curve_path.exists() else []
    common = [
        f"task={task}",
        f"task.num_worlds={args.worlds}",
        f"task.params.layouts={args.layouts}",
        f"eval.episodes={args.episodes}",
        "train.progress=false",
        f"train.save_every={args.chunk_iterations}",
    ]
    if not curve and (run / "config.yaml").exists() and not list(run.glob("checkpoints/model_*.pt")):
        # a run that failed before its first checkpoint (e.g. a bad override) holds nothing to resume
        print(f"[{variant} seed {seed}] {run} has no checkpoint: starting it again", flush=True)
        shutil.rmtree(run)
    done = [c for c in curve if c["iterations"] > 0]
    for chunk in range(len(done), args.chunks):
        iterations = (chunk + 1) * args.chunk_iterations
        checkpoint = run / "checkpoints" / f"model_{iterations}.pt"
        if not (run / "config.yaml").exists():
            overrides = [*common, *VARIANTS[variant], *args.extra, *demo_overrides(out, task, variant, args),
                         f"seed={seed}", f"runs_root={out}", f"run_name={run.name}",
                         f"train.iterations={iterations}"]  # fmt: skip
            commands.cmd_train(overrides)
        elif not checkpoint.exists():  # the next chunk (the run finished the last one), or interrupted: resume
            latest_checkpoint(run)  # a clear error if there is none
            commands.cmd_train([f"resume={run}", f"train.iterations={iterations}", "resume_finished=true"])
        # else: interrupted after training this chunk but before its evaluation was recorded
        if not curve and (run / "checkpoints" / "model_0.pt").exists():  # pretrained offline: 0 online steps
            curve.append(evaluate_point(run, 0, args))
        curve.append(evaluate_point(run, iterations, args))
        write_json_atomic(curve_path, curve)
        print(f"[{variant} seed {seed}] {iterations} iterations, {curve[-1]['env_steps']:,} steps: "
              f"success {curve[-1]['success']:.3f}", flush=True)  # fmt: skip
    return curve


def add_corrected_plan(out: Path, variant: str, seed: int, args) -> list[dict]:
    """Give every curve point of a plan run the success of its corrected plan: zero residual, the option
    probabilities that online correction had learned by that checkpoint (evaluated once, kept in curve.json)."""
    run = out / f"{variant}_s{seed}"
    curve_path = run / "curve.json"
    curve = json.loads(curve_path.read_text()) if curve_path.exists() else []
    for point in curve:
        if "corrected_plan" in point:
            continue
        checkpoint = run / "checkpoints" / f"model_{point['iterations']}.pt"
        result = commands.evaluate_run(run, [f"eval.episodes={args.episodes}"], checkpoint=str(checkpoint),
                                       name=f"corrected_plan_{point['iterations']:05d}",
                                       policy="corrected_plan")  # fmt: skip
        point["corrected_plan"] = result["metrics"]["success_rate"]
        write_json_atomic(curve_path, curve)
        print(f"[{variant} seed {seed}] {point['env_steps']:,} steps: corrected plan {point['corrected_plan']:.3f}",
              flush=True)  # fmt: skip
    return curve


def steps_to(curve: list[dict], level: float) -> int | None:
    return next((c["env_steps"] for c in curve if c["success"] >= level), None)


def table(curves: dict[str, dict[int, list[dict]]], levels: list[float]) -> tuple[str, dict]:
    """Markdown and JSON: per variant and level, censored steps to the level (median, IQR) and final successes."""
    rows, data = [], {}
    for variant, seeds in curves.items():
        cap = max((c[-1]["env_steps"] for c in seeds.values() if c), default=0)
        fmt = lambda v, cap=cap: f"> {cap:,}" if np.isinf(v) else f"{int(v):,}"  # noqa: E731
        cells, entry = [], {"cap": cap, "seeds": list(seeds)}
        for level in levels:
            reached = [steps_to(c, level) for c in seeds.values()]
            # Censored runs count as 'beyond the cap' (inf) for the median and quartiles.
            vals = np.array([np.inf if r is None else r for r in reached], dtype=float)
            q1, med, q3 = (np.percentile(vals, q, method="lower") for q in (25, 50, 75))
            cells += [fmt(med), f"{fmt(q1)} - {fmt(q3)}"]
            entry["steps_to_level" if level == levels[0] else f"steps_to_{level:g}"] = reached
        entry["final_success"] = [round(c[-1]["success"], 3) for c in seeds.values() if c]
        rows.append(f"| {variant} | {' | '.join(cells)} | {len(seeds)} | {entry['final_success']} |")
        data[variant] = entry
    level_cols = "".join(f" steps to {lv:.0%} (median) | IQR |" for lv in levels)
    head = f"| variant |{level_cols} seeds | final success per seed |\n|---|{'---|---|' * len(levels)}---|---|"
    return "\n".join([head, *rows]), data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="arm_push")
    p.add_argument("--variants", default="dense,sparse,keypoint_oracle,keypoint_noisy")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--chunks", type=int, default=6, help="evaluations per run (the step cap is chunks x chunk size)")
    p.add_argument("--chunk-iterations", type=int, default=10)
    p.add_argument("--worlds", type=int, default=512)
    p.add_argument("--layouts", type=int, default=16)
    p.add_argument("--episodes", type=int, default=256)
    p.add_argument("--level", default="0.8", help="success level(s), comma-separated; the first is the headline")
    p.add_argument("--table-only", action="store_true", help="tabulate the runs' curves as they are; train nothing")
    p.add_argument(
        "--corrected-plan",
        action="store_true",
        help="plan variants: also evaluate every checkpoint with a zero residual and the options its online "
        "correction had learned (also with --table-only); tabulated as <variant>:corrected_plan",
    )
    p.add_argument(
        "--demos",
        type=int,
        default=0,
        help="episodes of plan-controller demonstrations per variant "
        "(robot-rl collect policy=plan) given to the off-policy learner as algo.prior_data (0: none)",
    )
    p.add_argument(
        "--demo-noise",
        type=float,
        default=0.0,
        help="collect's noise= for the demonstrations: the plan controller's residual (x its residual_scale), "
        "which widens the states the demonstrations visit (the recorded action is the one applied)",
    )
    p.add_argument(
        "--demo-plan-reads",
        choices=("simulator", "perceived"),
        default="simulator",
        help="collect's plan_reads=: the demonstrating controller reads the simulator's state or the noisy state "
        "the learner observes",
    )
    p.add_argument(
        "--demo-overrides",
        default="algo.pretrain_updates=4000 algo.bc_weight=10",
        help="overrides for runs with demonstrations (offline pretraining, the BC term)",
    )
    p.add_argument("--out", type=Path, default=Path("runs/sweeps/sample_efficiency"))
    p.add_argument("extra", nargs="*", help="more config overrides for every run")
    args = p.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown} (known: {', '.join(VARIANTS)})")
    args.out.mkdir(parents=True, exist_ok=True)
    curves: dict[str, dict[int, list[dict]]] = {v: {} for v in variants}
    for seed in (int(s) for s in args.seeds.split(",")):
        for variant in variants:
            if args.table_only:
                path = args.out / f"{variant}_s{seed}" / "curve.json"
                if path.exists():  # a run never started is left out, not counted as censored
                    curves[variant][seed] = json.loads(path.read_text())
            else:
                curves[variant][seed] = run_one(args.out, args.task, variant, seed, args)
            if args.corrected_plan and "guidance=plan" in VARIANTS[variant] and seed in curves[variant]:
                curve = add_corrected_plan(args.out, variant, seed, args)
                corrected = [{**c, "success": c["corrected_plan"]} for c in curve]
                curves.setdefault(f"{variant}:corrected_plan", {})[seed] = corrected
    levels = [float(x) for x in args.level.split(",")]
    md, data = table(curves, levels)
    (args.out / "table.md").write_text(md + "\n")
    summary = {"task": args.task, "level": levels[0], "levels": levels, **data}
    (args.out / "table.json").write_text(json.dumps(summary, indent=1))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

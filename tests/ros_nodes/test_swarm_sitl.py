"""A trained swarm policy through the ROS 2 nodes (issue 8, build item 7): per-drone bundle export, the team's
observation rebuilt from what one drone measures and hears, and lock-step SITL of a 3-drone team over DDS
(one swarm sim bridge, a policy and a motors-mode safety node per namespace).

The policy is a DAgger warm start trained here with a tiny budget (about 10 s); it already flies the team
toward its goals for a few seconds, which is what the flight checks need.
"""

from __future__ import annotations

import signal
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from sitl_report import sitl_report

PKG = Path(__file__).resolve().parents[2] / "ros_nodes"
N = 3
SCENE = 0


@pytest.fixture(scope="module")
def swarm_run(tmp_path_factory) -> tuple[Path, Path]:
    from robot_rl import commands
    from robot_rl.config import load_config
    from robot_rl.training.imitation import DaggerConfig

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("swarm_runs")
    cfg = load_config(["task=crazyflie_swarm", "algo=ppo_swarm", "task.num_worlds=8", f"task.params.num_drones={N}",
                       "train.progress=false", f"runs_root={root}", "run_name=dagger", "seed=0"])  # fmt: skip
    run = commands.imitate_one(cfg, DaggerConfig(rounds=3, steps_per_round=200, updates_per_round=400,
                                                 critic_iterations=0))  # fmt: skip
    return run, commands.export_run(run)  # the CLI's export path (robot-rl export run=...)


def _torch_policy(run: Path):
    from robot_rl.policies.swarm_actor import policy_from_checkpoint
    from robot_rl.training.checkpoint import latest_checkpoint

    return policy_from_checkpoint(latest_checkpoint(run))


def test_export_is_one_drone_of_the_team_actor(swarm_run):
    from robot_rl.config import load_config
    from robot_rl.deploy import PolicyRuntime, load_bundle
    from robot_rl.envs import make_env
    from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint
    from robot_rl.training.ppo_trainer import PPOTrainer

    run, bundle_dir = swarm_run
    bundle = load_bundle(bundle_dir)
    doc = yaml.safe_load((bundle_dir / "policy.yaml").read_text())
    sw = doc["extra"]["swarm"]
    assert (sw["num_drones"], sw["k_neighbours"], sw["num_beams"]) == (N, 2, 32)
    assert [b["name"] for b in sw["blocks"]] == ["self", "neighbours", "tof"]
    assert sum(b["size"] for b in sw["blocks"]) == bundle.obs_dim == 18 + 12 + 32
    assert bundle.action.mode == "motors" and bundle.action.names == ["m1", "m2", "m3", "m4"]
    assert (bundle_dir / "robot_rl_policy.h").is_file() and (bundle_dir / "robot_rl_policy.c").is_file()

    # the team actor as the trainer rebuilds it from the checkpoint, on observations of 4 worlds
    cfg = load_config([f"runs_root={run.parent}", "task=crazyflie_swarm", "algo=ppo_swarm",
                       f"task.params.num_drones={N}"])  # fmt: skip
    env = make_env(cfg, num_worlds=4)
    trainer = PPOTrainer(env, dict(load_checkpoint(latest_checkpoint(run))["algo"]))
    trainer.load(latest_checkpoint(run))
    actor = trainer.inference_policy()
    obs = env.get_observations()
    obs["policy"] = obs["policy"] + 0.5 * torch.randn(obs["policy"].shape)  # off the training distribution too
    with torch.no_grad():
        want = actor(obs).reshape(4, N, 4).numpy()
    runtime = PolicyRuntime(bundle)
    got = runtime.policy(obs["policy"].reshape(4 * N, -1).numpy()).reshape(4, N, 4)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    env.close()


def test_eval_with_the_bundle_flies_every_drone_through_the_deploy_runtime(swarm_run):
    """robot-rl eval bundle=true on a swarm run: each drone's raw state (odometry, setpoint, ToF, the others'
    broadcasts) through the bundle's observation terms and ONNX gives the trainer's actions for the team."""
    from robot_rl import commands
    from robot_rl.deploy import PolicyRuntime
    from robot_rl.envs import make_env
    from robot_rl.evaluation.evaluate import swarm_deploy_policy, torch_policy

    run, bundle_dir = swarm_run
    cfg = commands.common.run_config(run, [])
    env = make_env(cfg, num_worlds=4, obs_noise=False)
    actor, one_world = commands.common.load_actor(cfg, run, None)
    one_world.close()
    env.reset()
    for _ in range(30):  # into the flight: drones apart, neighbours heard, walls in view
        env.step(torch_policy(actor)(env))
    want = torch_policy(actor)(env)
    got = swarm_deploy_policy(PolicyRuntime(bundle_dir))(env)
    assert got.shape == want.shape == (4, 4 * N)
    np.testing.assert_allclose(got.numpy(), want.double().clamp(-1, 1).numpy(), rtol=0, atol=1e-4)
    env.close()
    common = ["eval.episodes=8", "eval.obs_noise=false"]
    by_ckpt = commands.evaluate_run(run, common, name="ckpt")["metrics"]
    by_bundle = commands.evaluate_run(run, common, use_bundle=True, name="bundle")["metrics"]
    print(f"\nswarm eval checkpoint {by_ckpt}\nbundle {by_bundle}")
    # this 3-round policy crashes its drones at different moments in either run (returns differ); the team's
    # metrics are all there and its speed agrees
    assert by_bundle.keys() == by_ckpt.keys() and "mean_obstacle_collision" in by_bundle
    assert by_bundle["mean_mean_speed"] == pytest.approx(by_ckpt["mean_mean_speed"], rel=0.1)
    assert (run / "eval" / "bundle.json").is_file()


# 2 drones: one neighbour for k = 2 tokens, so the second is padded as training pads it
@pytest.mark.parametrize("team", [N, 2])
def test_runtime_rebuilds_the_task_observation_from_odometry(swarm_run, team):
    """What a drone's policy node does (own state, setpoint, ToF, the others' odometry turned into broadcasts)
    gives the task's own observation, step for step, while the bundle flies the team in process."""
    from robot_rl_ros.neighbours import NeighbourBroadcasts

    from robot_rl.deploy import PolicyRuntime
    from robot_rl.deploy.observation import FAR_NEIGHBOUR_M
    from robot_rl.deploy.units import quat_wxyz_to_xyzw
    from sim.crazyflie_swarm_sitl import CrazyflieSwarmSitl
    from sim.tasks.crazyflie.swarm_config import FAR

    _, bundle_dir = swarm_run
    assert FAR_NEIGHBOUR_M == FAR
    sim = CrazyflieSwarmSitl(team, SCENE)
    sim.reset()
    runtimes = [PolicyRuntime(bundle_dir) for _ in range(team)]
    heard = [NeighbourBroadcasts(10.0, 0.03, 0.5, origin_s=0.0) for _ in range(team)]
    worst = 0.0
    for _ in range(60):
        states = [sim.state(i) for i in range(team)]
        for i in range(team):
            for j in range(team):
                if j != i:
                    heard[i].on_state(f"cf{j + 1}", sim.time, sim.time, states[j]["position"], states[j]["velocity"])
        want = sim.observation()
        motors = []
        for i, s in enumerate(states):
            sp, sv = sim.setpoint(i)
            raw = {"position": s["position"], "velocity": s["velocity"], "angular_velocity": s["angular_velocity"],
                   "quaternion": quat_wxyz_to_xyzw(s["quaternion_wxyz"]), "setpoint_position": sp,
                   "setpoint_velocity": sv, "tof": sim.tof(i),
                   "neighbour_states": heard[i].received(sim.time)[0]}  # fmt: skip
            motors.append(runtimes[i].act(raw))
            worst = max(worst, float(np.abs(runtimes[i].last_observation - want[i]).max()))
        sim.step(np.array(motors))
    assert worst < 1e-5, worst


def test_motor_fallback_is_the_planner_controller():
    from robot_rl_ros.motor_fallback import MotorFallbackGains, accel_to_motors

    from sim.robots.goto_planner import TrackingGains
    from sim.robots.goto_planner import accel_to_motors as torch_accel_to_motors
    from sim.sensors.tof import quat_wxyz_to_rotmat

    gen = np.random.default_rng(0)
    g, tg = MotorFallbackGains(), TrackingGains()
    for _ in range(50):
        acc, omega = gen.normal(0, 3, 3), gen.normal(0, 2, 3)
        q = gen.normal(size=4)
        q = q / np.linalg.norm(q) * np.sign(q[0])
        rot = quat_wxyz_to_rotmat(torch.tensor(q)[None, None])[0, 0]
        want = torch_accel_to_motors(torch.tensor(acc)[None, None], rot[None, None], torch.tensor(omega)[None, None],
                                     g.mass_kg, tg)[0, 0].numpy()  # fmt: skip
        np.testing.assert_allclose(accel_to_motors(acc, rot.numpy(), omega, g), want, atol=1e-12)


def test_swarm_launch_file_starts_namespaced_groups():
    root = ET.parse(PKG / "launch" / "swarm_sitl.launch.xml").getroot()
    args = {a.get("name"): a.get("default") for a in root.findall("arg")}
    assert "policy" in args and args["num_drones"] == "6"
    bridges = [n for n in root.findall("node") if n.get("exec") == "swarm_sim_bridge"]
    assert len(bridges) == 1
    groups = root.findall("group")
    assert [g.find("push-ros-namespace").get("namespace") for g in groups] == [f"cf{i}" for i in range(1, 7)]
    for i, g in enumerate(groups, start=1):
        nodes = {n.get("exec"): {p.get("name"): p.get("value") for p in n.findall("param")} for n in g.iter("node")}
        assert set(nodes) == {"policy_node", "safety_node"}
        pol, safe = nodes["policy_node"], nodes["safety_node"]
        assert pol["bundle"] == safe["bundle"] == "$(var policy)"
        assert safe["action_mode"] == "motors" and pol["act_on"] == "all_inputs"
        others = yaml.safe_load(pol["neighbours"])
        assert (
            sorted(others)
            == sorted(f"cf{j}" for j in range(1, 7) if j != i)
            == sorted(yaml.safe_load(safe["neighbours"]))
        )
        # groups beyond the smallest team start only when num_drones asks for them
        assert (g.get("if") is None) == (i <= 2), g.get("if")


def _in_process_rollout(run: Path, seconds: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sim's own rollout of the same scene: the task's observation, the torch policy, motors as training."""
    from sim.crazyflie_swarm_sitl import CrazyflieSwarmSitl

    policy = _torch_policy(run)
    sim = CrazyflieSwarmSitl(N, SCENE)
    sim.reset()
    start = np.stack([sim.state(i)["position"] for i in range(N)])
    goal = np.stack([sim.goal(i) for i in range(N)])
    for _ in range(int(round(seconds / sim.dt))):
        with torch.no_grad():
            a = policy(torch.tensor(sim.observation().reshape(1, -1))).reshape(N, 4).numpy()
        sim.step(np.clip(0.5 + 0.5 * np.clip(a, -1.0, 1.0), 0.0, 1.0))
    return start, goal, np.stack([sim.state(i)["position"] for i in range(N)])


@pytest.mark.slow
def test_team_flies_toward_goals_in_lockstep_sitl(swarm_run):
    from robot_rl_ros.sitl import fly_swarm

    from robot_rl.deploy import PolicyRuntime

    run, bundle_dir = swarm_run
    seconds = 3.0
    r = fly_swarm(str(bundle_dir), N, SCENE, seconds=seconds)
    obs = r.pop("observer")
    assert r["finished"], sitl_report(r)
    start, goal, ref_final = _in_process_rollout(run, r["sim_seconds"])
    runtime = PolicyRuntime(bundle_dir)
    for i, (name, d) in enumerate(r["drones"].items()):
        assert d["modes"][-1].startswith("ACTIVE"), (name, d["modes"])
        np.testing.assert_allclose(d["start"], start[i], atol=1e-6)
        # the policy of this namespace acted once per 10 ms step, and its commands are what the safety node sent
        assert d["pairs"] >= 0.9 * r["sim_seconds"] * 100, (name, d["pairs"], r["sim_seconds"])
        # >= 20 Hz on simulated time (a straggler step on a loaded machine skips one; the watchdog allows 0.1 s)
        assert d["max_command_gap_s"] <= 0.05, (name, d)
        pairs = np.array([p for _, p in obs.pairs[name]])
        sent = np.array([c for _, c in obs.commands[name]])
        own = np.abs(sent[:, None, :] - pairs[None, :, -4:]).max(-1).min(-1) < 1e-6
        assert own.mean() > 0.9, (name, own.mean())  # (the rest: the safety node's watchdog re-sends)
        for other in r["drones"]:
            if other != name:  # a neighbour's commands are not this drone's
                theirs = np.array([p for _, p in obs.pairs[other]])[:, -4:]
                assert np.abs(pairs[:50, None, -4:] - theirs[None, :50]).max(-1).min() > 1e-6
        # replay: the recorded observation through the in-process runtime gives the command sent
        # (not the very last pairs: the observer may stop before their motor commands reach it)
        for k in (5, len(pairs) // 2, len(pairs) - 10):
            o, cmd = pairs[k, :-4], pairs[k, -4:].astype(np.float64)
            mine = runtime.bundle.action.to_raw(np.clip(runtime.policy(o).astype(np.float64), -1, 1))
            np.testing.assert_allclose(mine, cmd, atol=1e-4)
            assert np.abs(sent - mine).max(-1).min() < 1e-4
        # toward the goal, as the sim's own rollout of the same scene goes
        progress = np.linalg.norm(start[i] - goal[i]) - np.linalg.norm(np.array(d["final"]) - goal[i])
        ref_progress = np.linalg.norm(start[i] - goal[i]) - np.linalg.norm(ref_final[i] - goal[i])
        print(f"\n{name}: progress {progress:.3f} m (in process {ref_progress:.3f} m), final vs in-process "
              f"{np.linalg.norm(np.array(d['final']) - ref_final[i]):.3f} m")  # fmt: skip
        assert progress > 0.2 and progress > 0.7 * ref_progress, (name, progress, ref_progress)
        assert np.linalg.norm(np.array(d["final"]) - ref_final[i]) < 0.15, (name, d["final"], ref_final[i])


def test_swarm_bridge_odometry_noise_and_latency(swarm_run):
    """sim:={position_noise_m, latency_steps}: each drone's odometry jitters by the noise, and its inputs arrive
    latency_steps control periods after the time they are stamped with; the team still flies."""
    from robot_rl_ros.sitl import fly_swarm

    _, bundle_dir = swarm_run
    r = fly_swarm(str(bundle_dir), 2, SCENE, seconds=1.5, sim={"position_noise_m": 0.01, "latency_steps": 3})
    obs = r.pop("observer")
    assert r["finished"], sitl_report(r)
    for name in obs.names:
        p = np.array([x[:3] for _, x in obs.states[name]])
        stamps = np.array([t for t, _ in obs.states[name]])
        assert len(p) > 100 and np.all(np.diff(stamps) > 0)
        # second differences: about 2e-4 m of flight per 10 ms step squared, sqrt(6) x 1 cm of noise
        jitter = np.diff(p, n=2, axis=0).std()
        assert 0.015 < jitter < 0.035, (name, jitter)
        lag = obs.arrival_times(obs.state_received_ns[name]) - stamps
        assert np.median(lag) == pytest.approx(0.03, abs=0.006), (name, np.median(lag))
        assert r["drones"][name]["commands"] > 100


@pytest.mark.slow
def test_stale_policy_command_falls_back_to_hover_and_estop_stops_the_team(swarm_run):
    from robot_rl_ros import qos
    from robot_rl_ros.sitl import SitlGraph, SwarmObserver
    from std_msgs.msg import Bool

    _, bundle_dir = swarm_run
    names = [f"cf{i + 1}" for i in range(N)]
    with SitlGraph("swarm", lockstep=True) as graph:
        obs = SwarmObserver(names, graph.domain_id, use_sim_time=True)
        try:
            # a killed policy leaves its drone's commands to the safety node's 50 Hz watchdog: every other
            # step waits for the straggler timeout, so keep it short here
            graph.start_swarm(str(bundle_dir), N, SCENE, sim={"straggler_timeout_s": 0.1})
            assert obs.spin_until(lambda: obs.sim_seconds() >= 1.0, 60.0), graph.log("sim_bridge")[-2000:]
            graph.stop("cf2_policy", sig=signal.SIGKILL)
            t_kill, z_kill = obs.now(), obs.states["cf2"][-1][1][2]
            hover = lambda: any(m.startswith("HOVER") for _, m in obs.modes["cf2"])  # noqa: E731
            assert obs.spin_until(hover, 40.0), f"{obs.modes}\n{graph.log('cf2_safety')[-2000:]}"
            t_hover = next(t for t, m in obs.modes["cf2"] if m.startswith("HOVER"))
            obs.spin_until(lambda: obs.states["cf2"][-1][0] - t_hover > 0.5, 40.0)
            modes_before_estop = {n: obs.modes[n][-1][1] for n in names}
            obs.node.create_publisher(Bool, "/estop", qos.LATCHED).publish(Bool(data=True))
            estopped = lambda: all(obs.modes[n][-1][1].startswith("ESTOP") for n in names)  # noqa: E731
            assert obs.spin_until(estopped, 30.0), obs.modes
            n_cmd = {n: len(obs.commands[n]) for n in names}
            obs.spin_until(lambda: all(len(obs.commands[n]) > n_cmd[n] + 2 for n in names), 30.0)
        finally:
            obs.close()
            graph.close()
    reason = next(m for _, m in obs.modes["cf2"] if m.startswith("HOVER"))
    print(f"\nHOVER {1e3 * (t_hover - t_kill):.0f} ms (sim) after cf2's policy was killed: {reason}")
    assert "policy command stale" in reason
    assert t_hover - t_kill <= 0.3, (t_hover - t_kill, obs.modes["cf2"])
    after = np.array([s[1] for s in obs.states["cf2"] if s[0] >= t_hover])
    assert len(after) > 20 and np.all(np.abs(after[:, 2] - z_kill) < 0.3), after[:, 2]  # the hover holds height
    for other in ("cf1", "cf3"):  # the rest of the team flew on
        assert modes_before_estop[other].startswith("ACTIVE"), (other, obs.modes[other])
    for n in names:  # the e-stop topic reaches every drone's safety node: motors off
        assert np.all(obs.commands[n][-1][1] == 0.0), (n, obs.commands[n][-1])


def test_swarm_policy_node_refuses_bad_or_missing_input(swarm_run, tmp_path):
    """One drone's policy node over DDS with the test playing its sensors and its neighbours: no action without
    enough neighbours heard, none from non-finite ranges, none once a neighbour goes silent; each says why."""
    import threading
    import time

    import rclpy
    from conftest import DOMAIN_ID
    from diagnostic_msgs.msg import DiagnosticArray
    from harness import wait_for
    from nav_msgs.msg import Odometry
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from robot_rl_ros import qos
    from robot_rl_ros.msgs import range_zones, raw_to_odometry, s_to_stamp, setpoint_odometry
    from robot_rl_ros.sitl import SitlGraph
    from sensor_msgs.msg import LaserScan
    from std_msgs.msg import Float64MultiArray

    _, bundle_dir = swarm_run
    domain = 1 + (DOMAIN_ID + 53) % 101
    graph = SitlGraph("cf1", domain_id=domain, lockstep=False, log_dir=str(tmp_path))
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = rclpy.create_node("player", context=ctx)
    pubs = {n: node.create_publisher(Odometry, f"/{n}/odom", qos.SENSOR) for n in ("cf1", "cf2", "cf3")}
    sp_pub = node.create_publisher(Odometry, "/cf1/setpoint", qos.SENSOR)
    tof_pub = node.create_publisher(LaserScan, "/cf1/tof", qos.SENSOR)
    actions: list[float] = []
    diag: dict[str, str] = {}
    node.create_subscription(Float64MultiArray, "/cf1/policy/action", lambda m: actions.append(time.monotonic()),
                             qos.COMMAND)  # fmt: skip

    def on_diag(m):
        for st in m.status:
            if st.name == "/cf1/policy":
                diag.update({kv.key: kv.value for kv in st.values})

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, qos.DIAGNOSTICS)
    play = {"neighbours": set(), "tof": 1.5}
    level = np.array([0.0, 0.0, 0.0, 1.0])

    def tick():
        stamp = s_to_stamp(node.get_clock().now().nanoseconds * 1e-9)
        for k, n in enumerate(("cf1", "cf2", "cf3")):
            if n == "cf1" or n in play["neighbours"]:
                raw = {"position": np.array([0.5 * k, 0.0, 1.0]), "velocity": np.zeros(3), "quaternion": level,
                       "angular_velocity": np.zeros(3)}  # fmt: skip
                pubs[n].publish(raw_to_odometry(raw, stamp))
        sp_pub.publish(setpoint_odometry([0.0, 0.1, 1.0], [0.0, 0.2, 0.0], stamp))
        tof_pub.publish(range_zones(np.full(32, play["tof"]), stamp, 2.0))

    node.create_timer(0.01, tick)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: [ex.spin_once(timeout_sec=0.01) for _ in iter(stop.is_set, True)])
    spinner.start()

    try:
        graph.start("policy", "policy_node", {"bundle": str(bundle_dir), "act_on": "all_inputs",
                                              "inputs": ["odom:odometry", "setpoint:setpoint", "tof:ranges"],
                                              "neighbours": ["cf2", "cf3"]})  # fmt: skip
        assert wait_for(lambda: "neighbours heard: 0 of 2, need 2" in diag.get("last_skip", ""), 30.0), (
            f"{diag}\n{graph.log('policy')[-2000:]}")  # fmt: skip
        assert not actions
        play["neighbours"] = {"cf2", "cf3"}
        assert wait_for(lambda: len(actions) > 50, 20.0), f"{diag}\n{graph.log('policy')[-2000:]}"
        play["tof"] = float("nan")  # a broken sensor: its ranges are refused, so no step completes its inputs
        assert wait_for(lambda: "non-finite" in diag.get("last_skip", ""), 10.0), diag
        n = len(actions)
        time.sleep(0.3)
        assert len(actions) == n, "actions went on from non-finite ranges"
        play["tof"] = 1.5
        assert wait_for(lambda: len(actions) > n + 20, 10.0), diag
        play["neighbours"] = {"cf2"}  # cf3 falls silent: after neighbour_max_age_s it is not heard
        assert wait_for(lambda: "neighbours heard: 1 of 2, need 2" in diag.get("last_skip", ""), 10.0), diag
        n = len(actions)
        time.sleep(0.3)
        assert len(actions) == n, "actions went on with a neighbour missing"
    finally:
        graph.close()
        stop.set()
        spinner.join(5.0)
        ex.shutdown()
        node.destroy_node()
        ctx.try_shutdown()

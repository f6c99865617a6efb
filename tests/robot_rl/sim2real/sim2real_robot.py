"""What the sim-to-real tests share: the hidden parameters of the "real" Crazyflie (conftest.perturbed_flight),
another robot's log, and the replay of a log under the nominal model and a fit."""

# mass +15% (the weighed mass sysid is given), thrust coefficient -10%, motor time constant x2, 20 ms latency
HIDDEN = {"mass_kg": 0.027 * 1.15, "thrust_scale": 0.9, "motor_tau_s": 0.08, "latency_s": 0.02}
# mocap-like sensing: the bridge's odometry noise, no sensing delay (the fitted latency is the command's)
SENSING = {"latency_steps": 0, "position_noise_m": 0.002, "velocity_noise_mps": 0.01}
FLIGHT_S = 10.0

JOINT_STATE_DEF = (
    "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n"
    "================================================================================\n"
    "MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
    "================================================================================\n"
    "MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
)


def write_joint_state_log(path) -> None:
    """Another robot's log: 20 sensor_msgs/JointState messages on /joint_states, written by mcap_ros2's writer."""
    from mcap_ros2.writer import Writer

    with open(path, "wb") as f:
        w = Writer(f)
        schema = w.register_msgdef("sensor_msgs/msg/JointState", JOINT_STATE_DEF)
        for k in range(20):
            msg = {
                "header": {"stamp": {"sec": 1, "nanosec": k * 10_000_000}, "frame_id": ""},
                "name": ["panda_joint1"],
                "position": [0.1 * k],
                "velocity": [0.0],
                "effort": [0.0],
            }
            w.write_message("/joint_states", schema, msg, log_time=k * 10_000_000, publish_time=k * 10_000_000)
        w.finish()


def replay_nominal_and_fit(log, params, runs_root, capsys, bundle=None):
    """Run `robot-rl replay` of a log under the nominal model and a fit (closed loop too with a bundle); return what
    it printed, the folder it wrote, the nominal and the fitted open-loop median errors (one row per horizon),
    checking the page reads them."""
    import json

    import numpy as np

    from robot_rl.cli import main
    from robot_rl.dashboard.sim2real import read_entry

    capsys.readouterr()
    extra = [f"bundle={bundle}"] if bundle is not None else []
    assert main(["replay", f"log={log}", f"params={params}", f"runs_root={runs_root}", *extra]) == 0
    printed = capsys.readouterr().out
    folder = runs_root / "sim2real" / log.stem
    doc = json.loads((folder / "replay.json").read_text())
    nominal, fitted = (np.array(r["median_m"]) for r in doc["logs"][0]["open_loop"])
    page = read_entry(runs_root, log.stem)
    assert "invalid" not in page and all("invalid" not in entry for entry in page["logs"]), page
    return printed, folder, nominal, fitted


def copy_mcap(src, dst, keep=lambda channel: True, payload=None) -> None:
    """Rewrite an MCAP with the mcap library: channels for which keep() is false left out; payload(i, channel,
    message) may replace a message's bytes."""
    from mcap.reader import make_reader
    from mcap.writer import Writer

    with open(src, "rb") as f, open(dst, "wb") as g:
        reader = make_reader(f)
        summary = reader.get_summary()
        w = Writer(g)
        w.start(profile="ros2", library="test")
        schemas = {sid: w.register_schema(s.name, s.encoding, s.data) for sid, s in summary.schemas.items()}
        channels = {
            cid: w.register_channel(c.topic, c.message_encoding, schemas[c.schema_id], c.metadata)
            for cid, c in summary.channels.items()
            if keep(c)
        }
        for i, (_, channel, message) in enumerate(reader.iter_messages()):
            if channel.id not in channels:
                continue
            data = payload(i, channel, message) if payload else message.data
            w.add_message(channels[channel.id], message.log_time, data, message.publish_time, message.sequence)
        w.finish()

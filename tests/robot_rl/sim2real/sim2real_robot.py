"""The hidden parameters of the "real" Crazyflie the sim-to-real tests fly (conftest.perturbed_flight)."""

# mass +15% (the weighed mass sysid is given), thrust coefficient -10%, motor time constant x2, 20 ms latency
HIDDEN = {"mass_kg": 0.027 * 1.15, "thrust_scale": 0.9, "motor_tau_s": 0.08, "latency_s": 0.02}
# mocap-like sensing: the bridge's odometry noise, no sensing delay (the fitted latency is the command's)
SENSING = {"latency_steps": 0, "position_noise_m": 0.002, "velocity_noise_mps": 0.01}
FLIGHT_S = 10.0

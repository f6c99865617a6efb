/*
 * The Crazyflie firmware tick of sim/robots/crazyflie_firmware.py, as a MuJoCo control callback.
 *
 * Installed as mjcb_control around one mujoco.batch step call (sim/robots/crazyflie_firmware_native.py),
 * it runs at every physics substep inside the batch's threads, without the GIL: the command that has
 * arrived at this substep (latency), the attitude PID (rpyt), the rate PID and the legacy mixer, or the
 * plain motor mapping (motors), written to d->ctrl just before MuJoCo computes actuation.
 *
 * All per-world state and parameters live in d->userdata (layout below): a batch saves userdata with
 * each world's state row, so values written here persist from substep to substep and from call to call.
 * A world whose userdata does not start with CF_MAGIC is left alone: mjcb_control is process-global, and
 * any other model stepped while it is installed must not be touched.
 *
 * The arithmetic follows the torch code operation by operation, in float64, in the same order, so the
 * two agree to rounding (atan2/asin of libm and of torch may differ in the last bit). Build without
 * -ffast-math and with -ffp-contract=off: a fused multiply-add would round differently from torch.
 */

#include <math.h>

#include <mujoco/mujoco.h>

/* userdata layout, one world (Python checks it against cf_layout at load) */
#define CF_MARKER 0         /* CF_MAGIC: this world runs the firmware */
#define CF_MODE 1           /* 0 rpyt, 1 ctbr, 2 motors */
#define CF_SUBSTEP 2        /* substep within the control period; Python writes 0 before each period */
#define CF_SUBSTEPS 3       /* substeps per control period */
#define CF_LATENCY 4        /* command latency in substeps */
#define CF_GAINS 5          /* 10 PidGains, in field order */
#define CF_GAIN_SCALE 15    /* 3: attitude, rate roll/pitch, rate yaw (domain randomization) */
#define CF_KF_SCALE 18      /* motor constant multiplier (domain randomization) */
#define CF_ATT_INT 19       /* 2: attitude integrators, roll and pitch */
#define CF_RATE_INT 21      /* 3: rate integrators */
#define CF_RATE_PREV_ERR 24 /* 3: last rate errors (derivative term) */
#define CF_CMD_HIST 27      /* CF_HISTORY x 4: command issued j control periods ago at 4 j */
#define CF_NUSERDATA 43
#define CF_HISTORY 4
#define CF_MAGIC 4242.0625 /* exact in binary; any other value means "not a firmware world" */

/* constants of crazyflie_firmware.py */
#define PWM_MAX 65535.0
#define PWM_TO_RPM_A 0.2685
#define PWM_TO_RPM_B 4070.3
#define KF_N_PER_RPM2 3.16e-10
#define RAD2DEG 57.295779513082320876798154814105170332405472466564
#define MOTOR_MAX_FRACTION 0.15 /* motors mode: newtons per unit command (CrazyflieHover._motor_thrust) */

/* layout and constants, exported so that Python can refuse a library that disagrees with it */
const int cf_layout[] = {CF_MARKER,   CF_MODE,      CF_SUBSTEP,  CF_SUBSTEPS, CF_LATENCY,
                         CF_GAINS,    CF_GAIN_SCALE, CF_KF_SCALE, CF_ATT_INT,  CF_RATE_INT,
                         CF_RATE_PREV_ERR, CF_CMD_HIST, CF_NUSERDATA, CF_HISTORY};
const double cf_magic = CF_MAGIC;

/* per motor: multipliers of (roll, pitch, yaw) outputs, roll and pitch halved (legacy power distribution:
   thrust + roll/2 + pitch/2 + yaw); the halving by exact 0.5 is the torch code's mix_half */
static const double MIX_ROLL_HALF[4] = {-0.5, -0.5, 0.5, 0.5};
static const double MIX_PITCH_HALF[4] = {-0.5, 0.5, 0.5, -0.5};
static const double MIX_YAW[4] = {-1.0, 1.0, -1.0, 1.0};

/* torch.clamp(x, lo, hi) for lo <= hi: min(max(x, lo), hi), and NaN stays NaN */
static double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* rate PID and mixer: _rate_loop_and_mix; err: desired minus measured body rates, deg/s */
static void rate_loop_and_mix(double* u, const double err[3], double thrust, int idle, double dt, double* f) {
  const double* g = u + CF_GAINS;
  const double kp[3] = {g[3], g[3], g[7]};
  const double ki[3] = {g[4], g[4], g[8]};
  const double kd[3] = {g[5], g[5], 0.0}; /* the yaw rate loop has no D term; 0 * deriv as in torch */
  const double ilimit[3] = {g[6], g[6], g[9]};
  const double scale[3] = {u[CF_GAIN_SCALE + 1], u[CF_GAIN_SCALE + 1], u[CF_GAIN_SCALE + 2]};
  double* rate_int = u + CF_RATE_INT;
  double* prev = u + CF_RATE_PREV_ERR;
  double out[3];
  for (int i = 0; i < 3; i++) {
    rate_int[i] = clampd(rate_int[i] + err[i] * dt, -ilimit[i], ilimit[i]);
    double deriv = (err[i] - prev[i]) / dt;
    prev[i] = err[i];
    if (idle) { /* stopped motors: integrators and derivative memory reset, as in the firmware */
      rate_int[i] = 0.0;
      prev[i] = 0.0;
    }
    out[i] = clampd(scale[i] * (kp[i] * err[i] + ki[i] * rate_int[i] + kd[i] * deriv), -32767.0, 32767.0);
  }
  double kf = u[CF_KF_SCALE] * KF_N_PER_RPM2;
  for (int m = 0; m < 4; m++) {
    double pwm = clampd(thrust + ((out[0] * MIX_ROLL_HALF[m] + out[1] * MIX_PITCH_HALF[m]) + out[2] * MIX_YAW[m]),
                        0.0, PWM_MAX);
    if (idle) pwm = 0.0;
    double rpm = PWM_TO_RPM_A * pwm + PWM_TO_RPM_B;
    f[m] = pwm <= 0.5 ? 0.0 : kf * rpm * rpm; /* a motor at PWM 0 is stopped */
  }
}

/* one 500 Hz tick of one world: quat w x y z, gyro rad/s (body), u its userdata; writes 4 motor thrusts
   (N) to f and advances the substep counter */
void cf_tick(const double* quat, const double* gyro, double* u, double dt, double* f) {
  /* the newest command that has arrived: issued ceil((latency - k) / substeps) periods ago, as in
     CrazyflieHover._arrival_rows (floor((latency - k + substeps - 1) / substeps), clamped to the history) */
  long k = (long)u[CF_SUBSTEP], substeps = (long)u[CF_SUBSTEPS], latency = (long)u[CF_LATENCY];
  long num = latency - k + substeps - 1;
  long age = num >= 0 ? num / substeps : -((-num + substeps - 1) / substeps); /* floor division */
  age = age < 0 ? 0 : (age > CF_HISTORY - 1 ? CF_HISTORY - 1 : age);
  const double* cmd = u + CF_CMD_HIST + 4 * age;
  u[CF_SUBSTEP] = (double)(k + 1);

  int mode = (int)u[CF_MODE];
  if (mode == 2) { /* motors: fraction of the nominal max thrust per motor, times the DR motor constant */
    for (int m = 0; m < 4; m++) f[m] = cmd[m] * MOTOR_MAX_FRACTION * u[CF_KF_SCALE];
    return;
  }
  double err[3];
  if (mode == 1) { /* ctbr: collective thrust (N) -> PWM on the nominal curve, rates through the rate loop */
    double per_motor = cmd[0] / 4.0;
    per_motor = per_motor < 0.0 ? 0.0 : per_motor;
    double rpm = sqrt(per_motor / KF_N_PER_RPM2);
    double thrust = per_motor > 0.0 ? clampd((rpm - PWM_TO_RPM_B) / PWM_TO_RPM_A, 0.0, PWM_MAX) : 0.0;
    for (int i = 0; i < 3; i++) err[i] = cmd[1 + i] - gyro[i] * RAD2DEG;
    rate_loop_and_mix(u, err, thrust, thrust <= 0.5, dt, f);
    return;
  }
  /* rpyt: roll and pitch of the quaternion (_roll_pitch_deg: 2w, 2x, 2y, -2z times the components) */
  double w = quat[0], x = quat[1], y = quat[2], z = quat[3];
  double w2 = w * 2.0, x2 = x * 2.0, y2 = y * 2.0, zm2 = z * -2.0;
  double roll = atan2(w2 * x + y2 * z, 1 - (x2 * x + y2 * y));
  double pitch = asin(clampd(y2 * w + zm2 * x, -1.0, 1.0));
  double att[2] = {roll * RAD2DEG, pitch * RAD2DEG};
  const double* g = u + CF_GAINS; /* att_kp, att_ki, att_ilimit first */
  double thrust = clampd(cmd[3], 0.0, PWM_MAX);
  int idle = thrust <= 0.5; /* not armed: the firmware stops the motors and resets the integrators */
  double* att_int = u + CF_ATT_INT;
  for (int j = 0; j < 2; j++) { /* angle -> desired rate; yaw is commanded as a rate directly */
    double att_err = cmd[j] - att[j];
    att_int[j] = clampd(att_int[j] + att_err * dt, -g[2], g[2]);
    if (idle) att_int[j] = 0.0;
    err[j] = u[CF_GAIN_SCALE] * (g[0] * att_err + g[1] * att_int[j]) - gyro[j] * RAD2DEG;
  }
  err[2] = cmd[2] - gyro[2] * RAD2DEG;
  rate_loop_and_mix(u, err, thrust, idle, dt, f);
}

/* the control callback: firmware worlds only (marker), the crazyflie model's layout only (4 motors
   after a free joint) */
void cf_control(const mjModel* m, mjData* d) {
  if (m->nuserdata < CF_NUSERDATA || d->userdata[CF_MARKER] != CF_MAGIC || m->nu != 4 || m->nq < 7 || m->nv < 6) {
    return;
  }
  cf_tick(d->qpos + 3, d->qvel + 3, d->userdata, m->opt.timestep, d->ctrl);
}

/* cf_tick over n worlds of contiguous arrays (quat n x 4, gyro n x 3, userdata n x CF_NUSERDATA, f n x 4):
   the tests compare it with the torch firmware without a MuJoCo model */
void cf_tick_many(int n, const double* quat, const double* gyro, double* u, double dt, double* f) {
  for (int i = 0; i < n; i++) cf_tick(quat + 4 * i, gyro + 3 * i, u + CF_NUSERDATA * i, dt, f + 4 * i);
}

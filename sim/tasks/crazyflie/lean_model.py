"""The hover tasks' physics model: assets/crazyflie/crazyflie.xml with work skipped that does not change a step.

Profiled (docs/crazyflie_model.md), the step is MuJoCo's own work on one free body: kinematics, the
inertia-box fluid drag and its derivatives in the implicitfast integrator, and the floor contact. Two
options cost time without computing anything different for one drone above a plane:
- broadphase over all geoms (the visual ones too) for the one pair that can touch: here the floor and the
  collision box collide as an explicit <pair> with the values MuJoCo would mix from the two geoms, and no
  geom takes part in broadphase;
- island discovery (one body, one island at most): disabled.
Trajectories are bit-identical to the plain file's (tests/sim/test_crazyflie_lean_model.py). The visual
geoms, cameras and light stay: rendering uses this model.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from sim.backends.mujoco_batch import load_model
from sim.scene_files import write_scene

FLOOR, BOX = "floor", "collision"


def lean_spec(xml_path: str | Path) -> mujoco.MjSpec:
    """The model at xml_path with the floor contact as an explicit pair and island discovery off."""
    spec = mujoco.MjSpec.from_file(str(xml_path))
    floor, box = spec.geom(FLOOR), spec.geom(BOX)
    # a pair takes its values from itself, not its geoms: give it what MuJoCo mixes for equal priorities
    # (max friction and condim, solmix-weighted solref/solimp, which are equal here, max margin and gap)
    for attr in ("solref", "solimp", "priority", "solmix"):
        if not np.array_equal(np.asarray(getattr(floor, attr)), np.asarray(getattr(box, attr))):
            raise ValueError(f"{FLOOR} and {BOX} differ in {attr}: the pair's mixing rule is not written here")
    slide, spin, roll = np.maximum(floor.friction, box.friction)
    spec.add_pair(
        geomname1=FLOOR,
        geomname2=BOX,
        condim=max(floor.condim, box.condim),
        friction=[slide, slide, spin, roll, roll],
        solref=box.solref,
        solimp=box.solimp,
        margin=max(floor.margin, box.margin),
        gap=max(floor.gap, box.gap),
    )
    for g in spec.geoms:  # nothing left for broadphase: the pair is the only contact
        g.contype = 0
        g.conaffinity = 0
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ISLAND)
    return spec


def lean_model_path(xml_path: str | Path) -> Path:
    """lean_spec(xml_path) written once to the temp dir (BatchedEnv loads task.model_path from disk); a model
    without the floor and the collision box is returned as it is. MjSpec writes the XML with 6-7 significant
    digits: only values used for rendering alone (camera and visual-geom poses) move, by < 1e-6."""
    load_model(xml_path)  # a broken model is reported under its own name, not the copy's
    spec = mujoco.MjSpec.from_file(str(xml_path))
    if spec.geom(FLOOR) is None or spec.geom(BOX) is None or len(spec.pairs):  # not ours, or lean already
        return Path(xml_path)
    return write_scene(lean_spec(xml_path).to_xml(), f"{Path(xml_path).stem}_lean")

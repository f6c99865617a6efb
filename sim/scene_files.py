"""Generated MJCF written once to the temp dir, named by its content (BatchedEnv loads task.model_path from disk)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

SCENE_DIR = Path(tempfile.gettempdir()) / "robot_rl_scenes"


def write_scene(xml: str, stem: str) -> Path:
    """<SCENE_DIR>/<stem>_<content hash>.xml holding xml; written atomically, since parallel runs (a sweep, the
    test workers) may write the same scene at once. The copy lives elsewhere than its source, so the model
    must not name asset files by relative path."""
    path = SCENE_DIR / f"{stem}_{hashlib.sha256(xml.encode()).hexdigest()[:12]}.xml"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(xml)
        os.replace(tmp, path)
    return path

"""Published measurements the model must reproduce: read from ../shared/validation when present (so new cases
are picked up), else from the copy packaged with fabricsim (a user's clone has no ../shared)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from fabricsim.errors import SpecError

ENV_DIR = "FABRICSIM_VALIDATION_DIR"


def shared_validation_dir() -> Path | None:
    """`$FABRICSIM_VALIDATION_DIR`, or the `shared/validation` folder beside this checkout, if it exists."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    repo_root = Path(__file__).resolve().parents[3]
    candidate = repo_root.parent / "shared" / "validation"
    return candidate if candidate.is_dir() else None


def load_cases(name: str) -> tuple[list[dict[str, Any]], str]:
    """The cases of one validation file (e.g. 'nccl_tests.yaml') and where they were read from."""
    shared = shared_validation_dir()
    if shared is not None and (shared / name).is_file():
        path = shared / name
        text, origin = path.read_text(encoding="utf-8"), str(path)
    else:
        text = resources.files("fabricsim.validation.data").joinpath(name).read_text(encoding="utf-8")
        origin = f"fabricsim/validation/data/{name} (packaged copy)"
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise SpecError("expected a mapping with a 'cases' list", source=origin)
    return list(data["cases"]), origin

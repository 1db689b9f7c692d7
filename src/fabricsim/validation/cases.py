"""Published measurements the model must reproduce: every *.yaml of ../shared/validation (so new cases are picked
up) and of the copy packaged with fabricsim (a user's clone has no ../shared), the shared file winning by name."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fabricsim.errors import SpecError
from fabricsim.inputs import load_packaged_yaml, load_yaml

ENV_DIR = "FABRICSIM_VALIDATION_DIR"
DATA_PACKAGE = "fabricsim.validation.data"
# Packaged files that configure the validator rather than hold cases.
CONFIG_FILES = frozenset({"settings.yaml", "ledger.yaml"})
# The layouts a case file may have: its top-level list keys and the kind of case each holds.
LAYOUT_KEYS = ("cases", "collective_cases", "training_cases")
PACKAGED = " (packaged copy)"  # the origin suffix of a case file shipped with fabricsim
# Case files gathered for the families the model misses (issue 45 item 6), every case entered in the blind ledger
# before anything changed because of it. The must-holds written for the earlier, tuned set do not cover them; they
# are held to their own recorded figures (tests/test_blind_families.py).
BLIND_CAMPAIGN_FILES = frozenset({"nccl_multinode_cases.yaml", "long_context_cases.yaml", "moe_inference_cases.yaml",
                                  "fsdp_scale_cases.yaml", "moe_training_cases.yaml", "vllm_moe_cases.yaml"})


class NotExpressibleCase(SpecError):
    """A case the model has no input for; the message is the reason."""


@dataclass(frozen=True)
class Case:
    """One published case: its fields, the kind ('collective', 'training' or 'inference') and the file it is from."""

    data: dict[str, Any]
    kind: str
    origin: str

    @property
    def id(self) -> str:
        return str(self.data.get("id", "?"))


def shared_validation_dir() -> Path | None:
    """`$FABRICSIM_VALIDATION_DIR`, or the `shared/validation` folder beside this checkout, if it exists."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    repo_root = Path(__file__).resolve().parents[3]
    candidate = repo_root.parent / "shared" / "validation"
    return candidate if candidate.is_dir() else None


def packaged_text(name: str) -> str:
    """The text of one file packaged in fabricsim/validation/data."""
    return resources.files(DATA_PACKAGE).joinpath(name).read_text(encoding="utf-8")


def validation_sources() -> dict[str, tuple[str, str]]:
    """File name -> (text, origin) for every case file: packaged copies, replaced by ../shared ones of the same name."""
    out: dict[str, tuple[str, str]] = {}
    for item in resources.files(DATA_PACKAGE).iterdir():
        if item.name.endswith(".yaml") and item.name not in CONFIG_FILES:
            out[item.name] = (item.read_text(encoding="utf-8"), f"fabricsim/validation/data/{item.name}{PACKAGED}")
    shared = shared_validation_dir()
    if shared is not None and shared.is_dir():
        for path in shared.glob("*.yaml"):
            if path.name not in CONFIG_FILES:
                out[path.name] = (path.read_text(encoding="utf-8"), str(path))
    return dict(sorted(out.items()))


def parse_document(text: str, origin: str) -> dict[str, Any]:
    """A validation file as a mapping; bad YAML or a non-mapping is a SpecError naming the file. The packaged copies
    are fabricsim's own data, read with libyaml's parser (``load_packaged_yaml``: tests read every packaged file
    with the checked loader too); a file from ../shared or $FABRICSIM_VALIDATION_DIR takes the checked loader."""
    data = load_packaged_yaml(text, origin) if origin.endswith(PACKAGED) else load_yaml(text, origin)
    if not isinstance(data, dict):
        raise SpecError("expected a mapping", source=origin)
    return data


def is_inference_file(name: str, data: dict[str, Any]) -> bool:
    """Inference cases: the file says so in its name or description, or its cases carry a `category`."""
    cases = data.get("cases")
    categorised = isinstance(cases, list) and any(isinstance(c, dict) and "category" in c for c in cases)
    return "inference" in name.lower() or "inference" in str(data.get("description", "")).lower() or categorised


def cases_of(name: str, data: dict[str, Any], origin: str) -> list[Case]:
    """The cases of one parsed file, each tagged with its kind from the file's layout."""
    if not any(key in data for key in LAYOUT_KEYS):
        raise SpecError(f"no case list; expected one of: {', '.join(LAYOUT_KEYS)}", source=origin)
    out: list[Case] = []
    for key in LAYOUT_KEYS:
        items = data.get(key)
        if items is None:
            continue
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SpecError("expected a list of mappings", field=key, source=origin)
        for item in items:
            out.append(Case(data=item, kind=case_kind(name, key, data, item), origin=origin))
    return out


def case_kind(name: str, key: str, data: dict[str, Any], item: dict[str, Any]) -> str:
    """Which model a case checks: by list key in the new layout; by fields in a plain `cases:` list."""
    if key == "collective_cases":
        return "collective"
    if key == "training_cases":
        return "training"
    if is_inference_file(name, data):
        return "inference"
    if "tokens_per_s" in item or "run" in item:
        return "training"
    return "collective"


def case_file(case: Case) -> str:
    """The name of the file a case was read from ('.../data/x.yaml (packaged copy)' -> x.yaml)."""
    return Path(case.origin.split(" (", 1)[0]).name


def blind_campaign_ids() -> frozenset[str]:
    """Ids of the cases of ``BLIND_CAMPAIGN_FILES``."""
    return frozenset(c.id for c in all_cases() if case_file(c) in BLIND_CAMPAIGN_FILES)


def all_cases() -> list[Case]:
    """Every case of every validation file, in file-name order."""
    out: list[Case] = []
    for name, (text, origin) in validation_sources().items():
        out.extend(cases_of(name, parse_document(text, origin), origin))
    return out


def load_cases(name: str) -> tuple[list[dict[str, Any]], str]:
    """The `cases` list of one validation file (e.g. 'nccl_tests.yaml') and where it was read from."""
    sources = validation_sources()
    if name not in sources:
        raise SpecError(f"no validation file {name!r}; have: {', '.join(sources)}")
    text, origin = sources[name]
    data = parse_document(text, origin)
    if not isinstance(data.get("cases"), list):
        raise SpecError("expected a mapping with a 'cases' list", source=origin)
    return list(data["cases"]), origin

"""Where a Hugging Face config is: a folder holding ``config.json``, a local hub cache entry (``models--org--name``
or ``hf:org/name`` looked up in ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``;
never the network), and the small configs shipped with fabricsim (``model/data/hf``) with their published
parameter counts (``cards.yaml``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricsim.catalog import read_packaged_yaml
from fabricsim.errors import SpecError, spec_error
from fabricsim.inputs import read_text

HF_PREFIX = "hf:"
CACHE_PREFIX = "models--"
DATA_PACKAGE = "fabricsim.model.data"
SHIPPED_FOLDER = "hf"
CARDS_FILE = "cards.yaml"


@dataclass(frozen=True)
class ConfigRef:
    """A located ``config.json`` and the model name it stands for (``org/name`` for a cache entry)."""

    path: Path
    name: str


def hub_cache() -> Path:
    """The local hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def snapshot(entry: Path) -> Path:
    """The snapshot of a cache entry that ``refs/main`` names, else the newest one."""
    snapshots = entry / "snapshots"
    ref = entry / "refs" / "main"
    if ref.is_file():
        named = snapshots / read_text(ref, "refs/main", max_bytes=256).strip()
        if named.is_dir():
            return named
    found = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime) \
        if snapshots.is_dir() else []
    if not found:
        raise SpecError("Hugging Face cache entry has no snapshot (download the config first; fabricsim never "
                        "fetches)", source=str(entry))
    return found[-1]


def entry_name(entry: Path) -> str:
    """``models--org--name`` -> ``org/name``."""
    return entry.name.removeprefix(CACHE_PREFIX).replace("--", "/")


def config_in(folder: Path) -> ConfigRef:
    """The ``config.json`` of a model folder or of a cache entry's snapshot."""
    name = folder.resolve().name
    if name.startswith(CACHE_PREFIX):
        name, folder = entry_name(folder.resolve()), snapshot(folder)
    path = folder / "config.json"
    if not path.is_file():
        raise SpecError("folder has no config.json (a model folder, a models--org--name cache entry or a "
                        "snapshot of one)", source=str(folder))
    return ConfigRef(path, name)


def from_cache(repo: str) -> ConfigRef:
    """``org/name`` looked up in the local hub cache (never downloaded)."""
    if not repo or repo.count("/") != 1 or any(not part for part in repo.split("/")):
        raise SpecError(f"expected hf:org/name, got hf:{repo}", field="model")
    entry = hub_cache() / f"{CACHE_PREFIX}{repo.replace('/', '--')}"
    if not entry.is_dir():
        raise SpecError(f"{repo} is not in the local Hugging Face cache {hub_cache()} (set HF_HUB_CACHE or "
                        "HF_HOME; fabricsim never downloads)", field="model")
    return config_in(entry)


def locate(text: str) -> ConfigRef | None:
    """A Hugging Face config reference (``hf:org/name`` or a folder), or None for anything else (a preset name
    or a file, which the caller handles)."""
    if text.startswith(HF_PREFIX):
        return from_cache(text.removeprefix(HF_PREFIX).strip())
    if text and Path(text).is_dir():
        return config_in(Path(text))
    return None


class ShippedConfig(BaseModel):
    """A config shipped in ``model/data/hf`` with the published parameter count it should reproduce."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(min_length=1, description="file name in model/data/hf")
    repo: str = Field(min_length=1, description="the Hugging Face repository the config comes from")
    card: str = Field(min_length=1, description="model card URL")
    params: int = Field(ge=1, description="published total parameters (the figure fabricsim models)")
    source: str = Field(min_length=1, description="where the published count is stated")
    notes: str = ""

    @property
    def id(self) -> str:
        """The file name without ``.json``."""
        return self.file.removesuffix(".json")

    @property
    def path(self) -> Path:
        """Where the shipped file is."""
        return Path(str(resources.files(DATA_PACKAGE).joinpath(SHIPPED_FOLDER, self.file)))


@lru_cache(maxsize=1)
def shipped_configs() -> tuple[ShippedConfig, ...]:
    """The configs shipped with fabricsim and their published counts, in ``cards.yaml`` order."""
    doc = read_packaged_yaml(DATA_PACKAGE, f"{SHIPPED_FOLDER}/{CARDS_FILE}")
    out = []
    for index, item in enumerate(doc["configs"]):
        try:
            out.append(ShippedConfig.model_validate(item))
        except ValidationError as exc:
            raise spec_error(exc, ShippedConfig, f"{CARDS_FILE} configs[{index}]") from None
    return tuple(out)

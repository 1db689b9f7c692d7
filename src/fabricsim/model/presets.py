"""Model presets (packaged YAML, each with its source) and ``load_model``: a preset name, a YAML/JSON model spec
file, or a Hugging Face config (a ``config.json``, a folder holding one, a ``models--org--name`` cache entry or
``hf:org/name`` from the local cache)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricsim.catalog import read_packaged_yaml, read_spec_file
from fabricsim.errors import SpecError, spec_error, unknown_name_error
from fabricsim.model.hf.config import HFImport, default_name, import_hf_config, import_hf_data, is_hf_config
from fabricsim.model.hf.files import locate
from fabricsim.model.spec import ModelSpec

DATA_PACKAGE = "fabricsim.model.data"
PRESETS_FILE = "models.yaml"
_FILE_SUFFIXES = (".yaml", ".yml", ".json")


class Preset(BaseModel):
    """A packaged model: the spec plus where its dimensions come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    source: str = Field(min_length=1)
    verified: bool = True
    notes: str = ""
    max_context: int | None = Field(None, ge=1, description="context window in tokens (inference checks against it)")
    model: ModelSpec


@lru_cache(maxsize=1)
def _presets() -> dict[str, Preset]:
    doc = read_packaged_yaml(DATA_PACKAGE, PRESETS_FILE)
    out: dict[str, Preset] = {}
    for index, item in enumerate(doc["presets"]):
        try:
            preset = Preset.model_validate(item)
        except ValidationError as exc:
            raise spec_error(exc, Preset, f"{PRESETS_FILE} presets[{index}]") from None
        if preset.id in out:
            raise SpecError(f"duplicate preset id {preset.id!r}", source=PRESETS_FILE)
        out[preset.id] = preset
    return out


def list_presets() -> list[str]:
    """Preset names in file order (GPT family by size, then GPT-3, Llama 3, Mixtral, DeepSeek-V3)."""
    return list(_presets())


def preset(name: str) -> Preset:
    """A preset with its source; unknown names raise a SpecError suggesting close matches."""
    table = _presets()
    key = name.strip().lower()
    if key in table:
        return table[key]
    raise unknown_name_error("model", name, table)


def _looks_like_path(text: str) -> bool:
    return text.lower().endswith(_FILE_SUFFIXES) or "/" in text or "\\" in text


def _read_file(path: str | Path) -> tuple[ModelSpec, HFImport | None]:
    """A model spec file, or a ``.json`` Hugging Face config (``architectures``/``model_type``, no ``layers``)."""
    data = read_spec_file(path, "model file")
    if str(path).lower().endswith(".json") and is_hf_config(data):
        imported = import_hf_data(data, str(path), default_name(path))
        return imported.spec, imported
    return ModelSpec.from_data(data, source=str(path)), None


def load_model_file(path: str | Path) -> ModelSpec:
    """A model spec from a YAML or JSON file (or a Hugging Face config.json); errors name the file and field."""
    return _read_file(path)[0]


def resolve_model(name_or_path: str | Path) -> tuple[ModelSpec, HFImport | None]:
    """The spec for ``--model`` and, for a Hugging Face config, its import (with the ignored line); None else."""
    text = str(name_or_path)
    ref = locate(text)
    if ref is not None:
        imported = import_hf_config(ref.path, ref.name)
        return imported.spec, imported
    if isinstance(name_or_path, Path) or Path(text).is_file() or _looks_like_path(text):
        return _read_file(name_or_path)
    return preset(text).model, None


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A preset by name (``llama3-70b``), a model spec file (``my-model.yaml``), or a Hugging Face config:
    ``config.json``, a folder holding one, a ``models--org--name`` cache entry or ``hf:org/name``."""
    return resolve_model(name_or_path)[0]


def load_model_import(name_or_path: str | Path) -> HFImport | None:
    """The Hugging Face import behind ``--model`` (its ``note`` is the one-line ignored list), or None for a
    preset or a fabricsim spec file."""
    return resolve_model(name_or_path)[1]

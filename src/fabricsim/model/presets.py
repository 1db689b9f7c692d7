"""Model presets (packaged YAML, each with its source) and ``load_model``: a preset name or a YAML/JSON file."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricsim.catalog import read_packaged_yaml, read_spec_file
from fabricsim.errors import SpecError, spec_error, unknown_name_error
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


def load_model_file(path: str | Path) -> ModelSpec:
    """A model spec from a YAML or JSON file; errors name the file and the field."""
    return ModelSpec.from_data(read_spec_file(path, "model file"), source=str(path))


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A preset by name (``llama3-70b``) or a model spec file (``my-model.yaml``, ``model.json``)."""
    if isinstance(name_or_path, Path) or Path(name_or_path).is_file() or _looks_like_path(name_or_path):
        return load_model_file(name_or_path)
    return preset(name_or_path).model

"""Hugging Face ``config.json`` import: a transformers model config turned into a ModelSpec.

``import_hf_config(path)`` reads the file through the bounded reader and returns an :class:`HFImport`: the spec,
the architecture it was read as, and what was ignored. Every field that would change a step's cost but has no
place in the spec (sliding windows, biases, soft-capping, MTP modules, a vision tower, quantization, an unknown
field) is named in one ``ignored:`` line; metadata and numerics pass silently (``hf.reader.HARMLESS``). An unknown
architecture, a missing field or a malformed one is a SpecError naming the field and the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricsim.catalog import read_spec_file
from fabricsim.errors import SpecError
from fabricsim.model.hf.families import ARCHITECTURES, MODEL_TYPES, Family
from fabricsim.model.hf.reader import ConfigReader
from fabricsim.model.spec import ModelSpec


@dataclass(frozen=True)
class HFImport:
    """A ModelSpec read from a Hugging Face config, with the architecture and what the spec could not hold."""

    spec: ModelSpec
    architecture: str
    ignored: tuple[str, ...]
    source: str
    max_context: int | None = None  # max_position_embeddings: the context window inference checks against

    @property
    def note(self) -> str | None:
        """One line for the user (``ignored: rope_scaling, sliding_window=4096 (attention priced as full)``), or
        None when nothing was ignored."""
        return f"ignored: {', '.join(self.ignored)}" if self.ignored else None


def known_architectures() -> list[str]:
    """The ``architectures[0]`` values that import, sorted."""
    return sorted(ARCHITECTURES)


def is_hf_config(data: Any) -> bool:
    """Whether parsed JSON is a Hugging Face config (``architectures`` or ``model_type``) rather than a fabricsim
    model spec (which has ``layers``)."""
    return isinstance(data, dict) and "layers" not in data and ("architectures" in data or "model_type" in data)


def _architecture(data: dict[str, Any], source: str) -> tuple[str, Family]:
    """The family by ``architectures[0]``, else by ``model_type``; unknown: one line listing the known ones."""
    archs = data.get("architectures")
    if archs is not None and (not isinstance(archs, list) or not archs or not isinstance(archs[0], str)):
        raise SpecError("must be a list of architecture names", field="architectures", source=source)
    name = archs[0] if archs else MODEL_TYPES.get(str(data.get("model_type")), "")
    if name in ARCHITECTURES:
        return name, ARCHITECTURES[name]
    what = f"architecture {name!r}" if archs else f"model_type {data.get('model_type')!r}"
    raise SpecError(f"unknown Hugging Face {what}; known: {', '.join(known_architectures())}",
                    field="architectures" if archs else "model_type", source=source)


def import_hf_data(data: Any, source: str, name: str | None = None) -> HFImport:
    """A parsed ``config.json`` as an HFImport; ``name`` (default: the file's folder or stem) names the spec."""
    if not isinstance(data, dict):
        raise SpecError("expected a mapping of config fields (a Hugging Face config.json)", source=source)
    arch, family = _architecture(data, source)
    top = ConfigReader(data, source, defaults=family.defaults)
    reader = top
    if family.nested:
        section = top.section("text_config")
        if section is None:
            raise top.error("text_config", "required field is missing")
        reader = section
        if "tie_word_embeddings" not in reader.data and "tie_word_embeddings" in data:
            reader.defaults["tie_word_embeddings"] = top.raw("tie_word_embeddings")
    fields = family.convert(reader, family)
    spec = ModelSpec.from_data({"name": name or default_name(source), **fields}, source=source)
    notes = [*family.implicit, *reader.notes, *reader.leftovers()]
    if reader is not top:
        notes += top.notes + top.leftovers()
    window = reader.data.get("max_position_embeddings")
    max_context = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    return HFImport(spec=spec, architecture=arch, ignored=tuple(dict.fromkeys(notes)), source=source,
                    max_context=max_context)


def import_hf_config(path: str | Path, name: str | None = None) -> HFImport:
    """A Hugging Face ``config.json`` file as an HFImport (read through the bounded reader, never the network)."""
    return import_hf_data(read_spec_file(path, "Hugging Face config"), str(path), name)


def default_name(source: str | Path) -> str:
    """A spec name for a config file: its folder for ``config.json`` (``Llama-3.1-70B``; ``org/name`` inside a hub
    cache snapshot), else its stem."""
    path = Path(source)
    if path.name != "config.json":
        return path.stem or str(source)
    parts = path.parts
    if len(parts) >= 4 and parts[-3] == "snapshots" and parts[-4].startswith("models--"):
        return parts[-4].removeprefix("models--").replace("--", "/")  # a hub cache snapshot: org/name
    return path.parent.name or path.stem

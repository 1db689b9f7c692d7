"""The input boundary: every user-supplied file is read, decoded and parsed here, and every output path and number
from the command line is checked here, so that bad input is one SpecError (one ``error:`` line, exit code 2).

- :func:`read_text`: a file's text with a size cap (never reads more than cap + 1 bytes, so ``/dev/zero`` is
  refused at once), UTF-8 errors naming the byte offset, directories and unreadable files in one line.
- :func:`load_yaml`, :func:`load_json`, :func:`load_spec_file`: a safe YAML loader that refuses duplicate keys,
  nesting deeper than :data:`MAX_DEPTH` and non-finite numbers, and a JSON loader that refuses the same; syntax
  errors are one line naming the file, line and column.
- :func:`check_output_path`: an output file option (``--plot``, ``--out``) checked before any work is done.
- :func:`finite`: a number option checked to be finite and inside its range.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

from fabricsim.errors import SpecError

MAX_BYTES = 64 * 2**20  # the largest input file read (spec, overlay, log)
MAX_DEPTH = 64  # nesting of mappings and lists in a YAML or JSON file
MAX_ALIASES = 1000  # YAML aliases (*name) per document: repeated aliases can expand exponentially


def read_text(path: str | Path, what: str = "file", *, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of a user's file; a missing, special, huge, unreadable or non-UTF-8 file is a SpecError."""
    p = Path(path)
    source = str(path) or "''"
    if str(path) == "":
        raise SpecError(f"empty {what} name", source=source)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise SpecError(f"{what} not found", source=source) from None
    except OSError as exc:
        raise SpecError(f"cannot read {what}: {exc.strerror or exc}", source=source) from None
    if stat.S_ISDIR(info.st_mode):
        raise SpecError(f"{what} is a directory, not a file", source=source)
    if not stat.S_ISREG(info.st_mode):
        # a device or pipe (/dev/zero, /dev/stdin): read a bounded prefix, never the whole stream
        pass
    elif info.st_size > max_bytes:
        raise SpecError(f"{what} is too large ({info.st_size:,} bytes; at most {max_bytes:,})", source=source)
    try:
        with open(p, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise SpecError(f"cannot read {what}: {exc.strerror or exc}", source=source) from None
    if len(data) > max_bytes:
        raise SpecError(f"{what} is too large (more than {max_bytes:,} bytes)", source=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(f"not UTF-8 text (byte {exc.start}, line {line}: {exc.reason})", source=source) from None
    if "\x00" in text:
        offset = data.index(b"\x00")
        raise SpecError(f"binary data, not text (NUL byte at offset {offset})", source=source)
    return text.removeprefix("\ufeff")


# ---- YAML -----------------------------------------------------------------------------------------------------
class _SafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys, deep nesting and alias bombs."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.constructor.ConstructorError(None, None, f"more than {MAX_ALIASES} aliases", mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r} (first at line {seen[key].line + 1})",
                            key_node.start_mark)
                    seen[key] = key_node.start_mark
                except TypeError:
                    pass  # an unhashable key: the base class reports it
        return super().construct_mapping(node, deep=deep)


def _yaml_message(exc: yaml.YAMLError) -> str:
    """One line: the problem and its line and column (never PyYAML's multi-line '<unicode string>' dump)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "syntax error"
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not valid YAML: {problem}{where}"
    return f"not valid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML text safely (see the module docstring); errors are one SpecError line naming ``source``."""
    try:
        data = yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as exc:
        raise SpecError(_yaml_message(exc), source=source) from None
    except RecursionError:
        raise SpecError(f"nested more than {MAX_DEPTH} levels deep", source=source) from None
    check_tree(data, source)
    return data


def load_packaged_yaml(text: str, source: str) -> Any:
    """Parse a YAML file shipped with fabricsim (its own data) with libyaml's C parser where PyYAML has it, about
    ten times faster than the checked loader; tests parse every packaged file with ``load_yaml`` too, so duplicate
    keys and the like cannot slip in. The parse is kept in the cache folder under the text's hash
    (`fabricsim.diskcache`): the next process reads it back in a fraction of the parse."""
    import hashlib

    from fabricsim.diskcache import cached_data

    return cached_data("yaml", hashlib.sha256(text.encode()).hexdigest()[:32], lambda: _parse_packaged(text, source))


def _parse_packaged(text: str, source: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        return load_yaml(text, source)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise SpecError(_yaml_message(exc), source=source) from None


# ---- JSON -----------------------------------------------------------------------------------------------------
def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def load_json(text: str, source: str) -> Any:
    """Parse JSON text: no NaN/Infinity, no out-of-range numbers, no deep nesting; errors are one line."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise SpecError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", source=source) from None
    except ValueError as exc:
        raise SpecError(f"not valid JSON: {exc}", source=source) from None
    except RecursionError:
        raise SpecError(f"nested more than {MAX_DEPTH} levels deep", source=source) from None
    check_tree(data, source)
    return data


def check_tree(data: Any, source: str) -> None:
    """Nesting at most MAX_DEPTH, every float finite, every int below 10**30 (checked without recursion)."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    seen: set[int] = set()
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise SpecError(f"nested more than {MAX_DEPTH} levels deep", source=source)
        if isinstance(item, dict | list):
            if id(item) in seen:  # a YAML alias: checked once
                continue
            seen.add(id(item))
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, value in pairs:
                stack.append((value, depth + 1, f"{where}.{key}" if where else str(key)))
        elif isinstance(item, float) and not math.isfinite(item):
            raise SpecError(f"{item} is not a finite number", field=where or None, source=source)
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 10**30:
            raise SpecError("number out of range", field=where or None, source=source)


def load_spec_file(path: str | Path, what: str = "file") -> Any:
    """A user's YAML or JSON file (JSON by the ``.json`` suffix), parsed safely."""
    text = read_text(path, what)
    if str(path).lower().endswith(".json"):
        return load_json(text, str(path))
    return load_yaml(text, str(path))


# ---- output paths and numbers ---------------------------------------------------------------------------------
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


def check_output_path(path: str | Path | None, field: str,
                      suffixes: tuple[str, ...] | None = None) -> Path | None:
    """An output file option checked before any work: not empty, not a directory, its folder exists and is
    writable, the file (if there) writable; with ``suffixes`` the name must end with one (never appended)."""
    if path is None:
        return None
    text = str(path)
    if not text.strip():
        raise SpecError("empty file name", field=field)
    p = Path(text)
    if text.endswith(("/", os.sep)) or p.is_dir():
        raise SpecError(f"{text} is a directory; give a file name", field=field)
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise SpecError(f"{text}: the file name must end with {' or '.join(suffixes[:3])}", field=field)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise SpecError(f"folder {parent} does not exist", field=field)
    if p.exists():
        if not p.is_file():
            raise SpecError(f"{text} exists and is not a regular file", field=field)
        if not os.access(p, os.W_OK):
            raise SpecError(f"{text} is not writable", field=field)
    elif not _can_create_in(parent):
        raise SpecError(f"cannot create a file in {parent}", field=field)
    return p


def _can_create_in(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried: access() says yes to root on /proc and read-only
    mounts); the probe file is removed at once."""
    try:
        fd, name = tempfile.mkstemp(prefix=".fabricsim-", dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def finite(value: float, field: str, *, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> float:
    """A finite number in [low, high] (or (low, high] with ``low_open``); otherwise a SpecError naming the field."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"must be a finite number, got {value!r}", field=field)
    too_low = low is not None and (value <= low if low_open else value < low)
    if too_low or (high is not None and value > high):
        lo = "" if low is None else (f"> {low:g}" if low_open else f">= {low:g}")
        hi = "" if high is None else f"<= {high:g}"
        raise SpecError(f"must be {' and '.join(x for x in (lo, hi) if x)}, got {value:g}", field=field)
    return float(value)


MAX_BUFFER_BYTES = 2**40  # 1 TiB: the largest buffer per rank a sweep or benchmark takes
MAX_OVERSUBSCRIPTION = 64.0


def parse_buffer_size(text: str | int | float, field: str, *, element_bytes: int = 1,
                      max_bytes: int = MAX_BUFFER_BYTES) -> int:
    """A buffer size per rank: at least one element, at most ``max_bytes`` (1 TiB), a whole number of bytes."""
    from fabricsim import units

    size = units.parse_size(text, field=field)
    if size < element_bytes:
        unit = "1 byte" if element_bytes == 1 else f"{element_bytes} bytes (one element)"
        raise SpecError(f"must be at least {unit}, got {size}", field=field)
    if size > max_bytes:
        raise SpecError(f"{text!r} is more than {units.format_size(max_bytes)}iB per rank", field=field)
    return size


def oversubscription(value: float, field: str = "--oversubscription") -> float:
    """A fat tree's leaf oversubscription: finite, in [1, 64]."""
    return finite(value, field, low=1.0, high=MAX_OVERSUBSCRIPTION)

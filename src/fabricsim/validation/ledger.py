"""The blind ledger: every validation case's prediction as first made, by the model before anything the case
motivated (its arrival commit's parent), kept append-only in ``data/ledger.yaml``. Its residual is the honest
one: `validate` prints the blind median beside the in-sample and leave-one-document-out ones, and the error bands
are built from blind residuals where they exist.

Each entry carries ``chain``, the SHA-256 of the previous entry's chain and the entry's own fields, so an entry
cannot be rewritten without rewriting every later one (tests/test_ledger.py pins the backfilled head). A new case
enters the ledger, predicted by the model as it is, before anything is changed because of it:
``python -m fabricsim.validation.ledger enter`` (tests/test_ledger.py fails while a case has no entry)."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from fabricsim.inputs import load_packaged_yaml

LEDGER_FILE = "ledger.yaml"
FIELDS = ("id", "group", "kind", "file", "arrived", "parent", "measured", "unit", "blind_predicted", "blind_error",
          "blind_note", "blind_method")
"""An entry's fields, in order (``chain`` follows them)."""
GENESIS = "0" * 64


def ledger_path() -> Path:
    """The packaged ledger file (a source checkout's, where `enter` appends)."""
    return Path(str(resources.files("fabricsim.validation.data").joinpath(LEDGER_FILE)))


def load_ledger(path: Path | None = None) -> list[dict[str, Any]]:
    """Every entry, in order."""
    text = (path or ledger_path()).read_text(encoding="utf-8")
    data = load_packaged_yaml(text, str(path or LEDGER_FILE)) or {}  # libyaml: fabricsim's own data
    entries = data.get("entries", []) if isinstance(data, dict) else []
    return [dict(e) for e in entries]


def entry_chain(entry: Mapping[str, Any], previous: str) -> str:
    """The chain value of ``entry`` after ``previous``: SHA-256 of the previous chain and the entry's fields as
    canonical JSON (sorted keys, shortest float repr)."""
    body = json.dumps({k: entry.get(k) for k in FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{previous}\n{body}".encode()).hexdigest()


def broken_links(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids whose chain does not follow from the entries before them (an entry rewritten, removed or moved)."""
    previous, bad = GENESIS, []
    for e in entries:
        expected = entry_chain(e, previous)
        if e.get("chain") != expected:
            bad.append(str(e.get("id")))
        previous = str(e.get("chain"))
    return bad


def blind_errors(entries: Sequence[Mapping[str, Any]] | None = None) -> dict[str, float]:
    """Case id -> its blind error (predicted / measured - 1 as first predicted), where the ledger has one."""
    rows = load_ledger() if entries is None else entries
    return {str(e["id"]): float(e["blind_error"]) for e in rows
            if e.get("blind_error") is not None and math.isfinite(float(e["blind_error"]))}


def median_abs(errors: Sequence[float]) -> float | None:
    """The median of the absolute errors (None for none)."""
    return statistics.median(abs(e) for e in errors) if errors else None


def head_commit() -> str | None:
    """The checkout's HEAD commit: the model a new entry's prediction is made with (None outside git)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def new_entries(results: Sequence[Any], known: set[str], parent: str | None,
                files: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Entries for the validated cases the ledger lacks, predicted as the model stands (``parent``: its commit;
    ``files``: case id -> the case file's name): a counted case with its prediction and error, a case the model
    cannot express with a null and the reason."""
    from fabricsim.validation.runner import NotExpressible

    out: list[dict[str, Any]] = []
    for r in sorted(results, key=lambda r: str(r.id)):
        if r.id in known:
            continue
        entry: dict[str, Any] = {"id": r.id, "group": r.group, "kind": getattr(r, "kind", None),
                                 "file": (files or {}).get(r.id), "arrived": None, "parent": parent}
        if isinstance(r, NotExpressible):
            entry |= {"measured": None, "unit": None, "blind_predicted": None, "blind_error": None,
                      "blind_note": f"not expressible when entered: {r.reason}", "blind_method": None}
        else:
            entry |= {"measured": r.measured, "unit": r.unit, "blind_predicted": r.predicted, "blind_error": r.error,
                      "blind_note": None, "blind_method": "entered before any change it motivated"}
        out.append(entry)
    return out


def append(entries: list[dict[str, Any]], added: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` with ``added`` chained on after them."""
    out = list(entries)
    previous = str(out[-1]["chain"]) if out else GENESIS
    for e in added:
        row = {k: e.get(k) for k in FIELDS}
        row["chain"] = previous = entry_chain(row, previous)
        out.append(row)
    return out


def dump(entries: Sequence[Mapping[str, Any]], head: str) -> str:
    """The ledger file's text: a header comment and the entries."""
    return head + yaml.safe_dump({"entries": [dict(e) for e in entries]}, sort_keys=False, width=1000,
                                 allow_unicode=True)


HEADER = ("# The blind ledger (fabricsim.validation.ledger): each validation case's prediction as first made, by the\n"
          "# model at `parent` (the parent of the commit the case `arrived` in), append-only; `chain` links every\n"
          "# entry to the ones before it. Add entries with `python -m fabricsim.validation.ledger enter`, never by\n"
          "# hand, and before changing anything because of a new case.\n")


def enter(path: Path | None = None, only_files: Sequence[str] = ()) -> list[str]:
    """Append an entry for every validated case the ledger lacks (the model as it stands), or only for those of
    the case files named in ``only_files`` (others still being written wait for their own entry); the ids added."""
    from fabricsim.validation.cases import all_cases, case_file
    from fabricsim.validation.runner import run_cases

    target = path or ledger_path()
    entries = load_ledger(target)
    cases = [c for c in all_cases() if not only_files or case_file(c) in only_files]
    files = {c.id: case_file(c) for c in cases}
    added = new_entries(run_cases(cases), {str(e["id"]) for e in entries}, head_commit(), files)
    if added:
        target.write_text(dump(append(entries, added), HEADER), encoding="utf-8")
    return [str(e["id"]) for e in added]


def main(argv: Sequence[str]) -> int:
    """``enter [FILE ...]``: append the new cases (of those case files only, when named); ``check``: report broken
    links."""
    if list(argv[:1]) == ["enter"]:
        ids = enter(only_files=list(argv[1:]))
        sys.stdout.write(f"entered {len(ids)} case(s): {', '.join(ids) or '-'}\n")
        return 0
    if list(argv[:1]) == ["check"]:
        bad = broken_links(load_ledger())
        sys.stdout.write("ledger intact\n" if not bad else f"rewritten or moved: {', '.join(bad)}\n")
        return 1 if bad else 0
    sys.stderr.write("usage: python -m fabricsim.validation.ledger enter [CASE_FILE.yaml ...] | check\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

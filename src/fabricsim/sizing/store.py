"""Results on disk: each finished chunk of the search streams to its own Parquet part (with a JSON sidecar of its
counts) next to ``--out``, so ``--resume`` skips finished chunks; the full table is written to ``--out`` at the end."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricsim.errors import SpecError
from fabricsim.sizing.evaluate import ChunkResult

if TYPE_CHECKING:
    import pandas as pd

MANIFEST = "manifest.json"
MARK = b"fabricsim"  # Parquet key-value metadata of every file `size` writes (value: the search kind)
LEGACY_COLUMNS = {"system", "fabric", "gpus"}  # what results written before MARK all have


def _ours(path: Path) -> bool:
    """Whether ``path`` is a Parquet file `size` wrote: MARK in its metadata, or (older files) its columns."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    try:
        schema = pq.read_schema(path)
    except Exception:
        return False
    return MARK in (schema.metadata or {}) or set(schema.names) >= LEGACY_COLUMNS


def check_out_file(out: Path, field: str = "--out") -> None:
    """Refuse (one line) to overwrite a file the tool did not write; it is left untouched."""
    if out.exists() and not _ours(out):
        raise SpecError(f"{out} exists and is not a Parquet result of `fabricsim size`; refusing to overwrite it "
                        "(give another file name, or remove it first)", field=field)


def write_parquet(frame: pd.DataFrame, out: Path, kind: str) -> None:
    """``frame`` as Parquet at ``out``, marked as written by `size` (atomically: a partial file never shows)."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), MARK: kind.encode()})
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out)


def _name(chunk: str) -> str:
    return hashlib.sha256(chunk.encode()).hexdigest()[:20]


class ResultStore:
    """Parquet parts of one search under ``<out>.parts``; resuming checks the search is the same one."""

    def __init__(self, out: Path, digest: str, resume: bool) -> None:
        self.out = out
        self.parts = out.with_name(out.name + ".parts")
        check_out_file(out, "--resume" if resume else "--out")
        if self.parts.is_dir() and any(self.parts.iterdir()) and not (self.parts / MANIFEST).exists():
            raise SpecError(f"{self.parts} exists and was not written by `fabricsim size`; refusing to replace it",
                            field="--out")
        if resume and (self.parts / MANIFEST).exists():
            found = json.loads((self.parts / MANIFEST).read_text()).get("digest")
            if found != digest:
                raise SpecError(f"{self.parts} holds a different search (its options differ); run without "
                                "--resume to start over", field="--resume")
        else:
            if self.parts.exists():
                shutil.rmtree(self.parts)
            self.parts.mkdir(parents=True)
            (self.parts / MANIFEST).write_text(json.dumps({"digest": digest}))

    def done(self) -> dict[str, dict[str, Any]]:
        """Finished chunks (those whose sidecar exists) and their counts."""
        out = {}
        for path in sorted(self.parts.glob("*.json")):
            if path.name == MANIFEST:
                continue
            meta = json.loads(path.read_text())
            out[meta["chunk"]] = meta
        return out

    def write(self, result: ChunkResult) -> None:
        """The chunk's rows, then its sidecar (written last, atomically: a chunk counts as done only whole)."""
        import pandas as pd

        name = _name(result.chunk)
        if result.rows:
            tmp = self.parts / f"{name}.parquet.tmp"
            pd.DataFrame(result.columns).to_parquet(tmp, index=False)
            os.replace(tmp, self.parts / f"{name}.parquet")
        meta = result.meta()
        tmp = self.parts / f"{name}.json.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, self.parts / f"{name}.json")

    def load(self, chunks: list[str]) -> pd.DataFrame:
        """Rows of the finished chunks, in the given chunk order."""
        import pandas as pd

        frames = [pd.read_parquet(p) for c in chunks if (p := self.parts / f"{_name(c)}.parquet").exists()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def finish(self, frame: pd.DataFrame) -> None:
        """Every row of the search in one Parquet file at ``out``."""
        write_parquet(frame, self.out, "size")

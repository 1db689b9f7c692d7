"""Turn benchmark results (nccl-tests logs or fabricsim's own JSON) into measurements the model can fit."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from fabricsim.calibration.fit import Measurement
from fabricsim.errors import SpecError, spec_error
from fabricsim.inputs import load_json, read_text
from fabricsim.nccltests import BenchResult, parse_nccl_tests_file


def load_results(paths: Sequence[str | Path], op: str | None = None) -> list[BenchResult]:
    """Results tables from each file: `.json` (fabricsim bench/parse --json output) or an nccl-tests log."""
    out: list[BenchResult] = []
    for path in paths:
        p = Path(path)
        if p.suffix.lower() == ".json":
            data = load_json(read_text(p), str(p))
            if isinstance(data, dict) and "results" in data:
                data = data["results"]  # `bench collective/parse --json`: {"inputs": ..., "results": [...]}
            items = data if isinstance(data, list) else [data]
            items = [_from_si(item) for item in items]
            try:
                out += [BenchResult.model_validate(item) for item in items]
            except ValidationError as exc:
                first = spec_error(exc, BenchResult)
                raise SpecError(f"not a fabricsim benchmark result: {first}", source=str(p)) from None
        else:
            out += parse_nccl_tests_file(p, op=op)
    if not out:
        raise SpecError("no results tables found", field="LOG")
    return out


def _from_si(item: object) -> object:
    """A result written in the CLI's SI schema (`*_bytes_per_s`, `ranks`) back in the model's field names."""
    from fabricsim.nccltests import BenchRow
    from fabricsim.si_json import from_si

    if not isinstance(item, dict):
        return item
    names = {*BenchResult.model_fields, *BenchRow.model_fields}
    return from_si(item, names)


def ranks_and_nodes(result: BenchResult) -> tuple[int, int]:
    """World size and node count of a result (hosts listed in its header; one node when none are)."""
    nranks = result.world_size or len(result.devices)
    if nranks < 2:
        raise SpecError(f"{result.source or 'result'}: cannot tell how many ranks ran (no device lines or world "
                        "size)", field="LOG")
    return nranks, max(1, len(result.hosts))


def to_measurements(results: Sequence[BenchResult], *, in_place: bool = False) -> list[Measurement]:
    """One measurement per row of the chosen column group (out-of-place by default, as nccl-tests' first group);
    a table that only has the other group contributes that one."""
    out = []
    for result in results:
        nranks, nnodes = ranks_and_nodes(result)
        rows = [r for r in result.rows if r.in_place == in_place and r.time_s and r.time_s > 0]
        if not rows:
            rows = [r for r in result.rows if r.time_s and r.time_s > 0]
        out += [Measurement(result.op, nranks, nnodes, r.size_bytes, float(r.time_s)) for r in rows if r.size_bytes]
    if not out:
        raise SpecError("no timed rows in the results", field="LOG")
    return out

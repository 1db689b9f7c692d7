"""`size`, issue 21: no candidate dropped silently (whole-unit GPU counts, a best plan or reasons for every system x
fabric, sizes and unpriced parts said), --out never overwrites a file the tool did not write, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fabricsim.catalog import default_catalog
from fabricsim.sizing import Knobs, SizingSpec, size
from fabricsim.sizing.space import node_counts, unit_gpus

README_ARGS = ("--model", "llama3-70b", "--tokens", "2T", "--deadline", "60d", "--gpus", "1024..4096",
               "--systems", "dgx-h100,gb200-nvl72", "--fabrics", "ndr,xdr", "--fabric-kinds", "fat-tree",
               "--oversubscription", "1", "--tp", "8",
               "--pp", "4", "--mbs", "1,2", "--recompute", "none", "--zero", "1", "--executor", "serial")
SMALL_ARGS = ("--model", "llama3-8b", "--gpus", "64", "--systems", "dgx-h100", "--fabrics", "ndr",
              "--oversubscription", "1", "--pp", "1,2", "--mbs", "1", "--executor", "serial", "--gbs", "256")

INFERENCE_ARGS = ("--inference", "--model", "llama3-8b", "--rate", "1", "--slo-ttft", "2s", "--slo-tpot", "50ms",
                  "--systems", "dgx-h100")


def _cli(*args: str, width: int = 200) -> subprocess.CompletedProcess[str]:
    code = ("import sys; from rich.console import Console; import fabricsim.cli.output as o; "
            f"o.console = Console(width={width}); import fabricsim.cli.size_cmd as s; s.console = o.console; "
            "from fabricsim.cli import main; sys.argv = ['fabricsim', 'size', *sys.argv[1:]]; main()")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)


def _spec(**kw: Any) -> SizingSpec:
    base: dict[str, Any] = {"model": "llama3-70b", "tokens": 2e12, "gbs": (1152,), "gpus": (1024, 2048, 4096),
                            "gpus_range": (1024, 4096), "systems": ("dgx-h100", "gb200-nvl72"), "fabrics": ("ndr",),
                            "oversubscription": (1.0,), "deadline_s": 60 * 86400.0,
                            "knobs": Knobs(tp=(8,), pp=(4,), mbs=(1, 2), recompute=("none",), zero=(1,))}
    return SizingSpec(**{**base, **kw})


# ---- 1a: GPU counts in whole natural units -------------------------------------------------------------------------

def test_whole_rack_counts_inside_the_asked_range() -> None:
    catalog = default_catalog()
    gb200, h100 = catalog.system("gb200-nvl72"), catalog.system("dgx-h100")
    spec = _spec()
    racks = node_counts(spec, gb200)
    gpus = [n * gb200.gpus_per_node for n in racks]
    assert unit_gpus(gb200) == 72
    assert all(1024 <= g <= 4096 and g % 72 == 0 for g in gpus)
    assert {1080, 1152, 4032} <= set(gpus)  # 15 racks (first inside), 16 (a power of two), 56 (last inside)
    assert len(gpus) <= 10  # bounded: the ends, rounded targets and power-of-two rack counts
    assert node_counts(spec, h100) == (128, 256, 512)  # 8-GPU nodes: as before


def test_no_whole_unit_inside_takes_the_nearest_each_side() -> None:
    spec = _spec(gpus=(100, 120), gpus_range=(100, 120))
    assert node_counts(spec, default_catalog().system("gb200-nvl72")) == (1, 2)


def test_gpus_and_nodes_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):  # pydantic's ValidationError wraps the SpecError
        _spec(nodes=(16,))


# ---- 1b: every candidate has a best plan or reasons (must hold) ---------------------------------------------------

def test_gb200_found_at_whole_racks_and_every_candidate_answered() -> None:
    result = size(_spec(fabrics=("ndr", "xdr")), executor="serial")
    gb = result.ranked[result.ranked["system"] == "gb200-nvl72"]
    assert len(gb) > 0
    assert ((gb["gpus"] % 72 == 0) & (gb["gpus"] >= 1024) & (gb["gpus"] <= 4096)).all()
    data = result.to_json()
    pairs = {(c["system"], c["fabric"]) for c in data["candidates"]}
    assert pairs == {(s, f) for s in ("dgx-h100", "gb200-nvl72", "gb200-nvl72/64") for f in ("ndr", "xdr")}
    for c in data["candidates"]:
        assert c["best"] is not None or c["reasons"], c


def test_readme_case_lists_gb200_with_its_reasons() -> None:
    """--gbs 1024 on 72-GPU racks: GB200 has no plan, and the JSON and the table say why."""
    proc = _cli(*README_ARGS, "--gbs", "1024", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    by_pair = {(c["system"], c["fabric"]): c for c in data["candidates"]}
    assert set(by_pair) == {(s, f) for s in ("dgx-h100", "gb200-nvl72", "gb200-nvl72/64") for f in ("ndr", "xdr")}
    gb = by_pair["gb200-nvl72", "ndr"]
    assert gb["best"] is None and all(g % 72 == 0 and 1024 <= g <= 4096 for g in gb["gpus_searched"])
    text = " ".join(gb["reasons"])
    assert "1,080" in text and "4,032" in text and "--gbs 1024" in text and "memory" not in text
    assert by_pair["dgx-h100", "ndr"]["best"] is not None
    table = _cli(*README_ARGS, "--gbs", "1024")
    assert table.returncode == 0, table.stderr
    assert "no plan on gb200-nvl72 ndr" in table.stdout and "no plan on gb200-nvl72 xdr" in table.stdout


@pytest.mark.parametrize(("args", "needle", "absent"), [
    (("--tp", "3"), "no tp in 3 divides", "GPU memory"),
    (("--model", "llama3-70b", "--gpus", "8", "--tp", "1", "--pp", "1"), "no plan fits in GPU memory", "divide"),
])
def test_no_plan_error_names_the_cause(args: tuple[str, ...], needle: str, absent: str) -> None:
    proc = _cli(*SMALL_ARGS, *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert needle in lines[0] and absent not in lines[0]


# ---- 1c/1d: sizes compared and unpriced parts named ---------------------------------------------------------------

def test_best_table_shows_gpus_and_says_when_sizes_differ() -> None:
    proc = _cli(*README_ARGS, "--gbs", "1152")
    assert proc.returncode == 0, proc.stderr
    assert "GPUs" in proc.stdout and "GPU counts differ between rows" in proc.stdout


def test_unpriced_part_is_named() -> None:
    """A system the catalog has no price for (hgx-h800: no sourced price or power) is named, never costed."""
    result = size(_spec(fabrics=("ndr",), systems=("hgx-h800",), deadline_s=None), executor="serial")
    data = result.to_json()
    cand = data["candidates"][0]
    assert cand["best"]["cost_usd"] is None and "hgx-h800 price" in cand["unpriced"]
    assert "hgx-h800 price" in data["results"][0]["unpriced"]
    proc = _cli("--model", "llama3-8b", "--gpus", "64", "--systems", "hgx-h800", "--fabrics", "ndr",
                "--oversubscription", "1", "--executor", "serial", "--gbs", "256")
    assert proc.returncode == 0, proc.stderr
    assert "hgx-h800 has no power or price" in proc.stdout


# ---- 2: --out never overwrites a file the tool did not write ------------------------------------------------------

@pytest.mark.parametrize("resume", [True, False])
@pytest.mark.parametrize("content", [b"my notes, not parquet\n", b"PAR1 but not really PAR1"])
def test_out_refuses_a_foreign_file_and_leaves_it_untouched(tmp_path: Path, resume: bool, content: bytes) -> None:
    out = tmp_path / "r.parquet"
    out.write_bytes(content)
    proc = _cli(*SMALL_ARGS, "--json", "--out", str(out), *(["--resume"] if resume else []))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "refusing to overwrite" in lines[0], proc.stderr
    assert out.read_bytes() == content
    assert not (tmp_path / "r.parquet.parts").exists()


def test_out_refuses_a_parquet_file_it_did_not_write(tmp_path: Path) -> None:
    import pandas as pd

    out = tmp_path / "data.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(out)
    before = out.read_bytes()
    proc = _cli(*SMALL_ARGS, "--json", "--out", str(out))
    assert proc.returncode == 2 and "refusing to overwrite" in proc.stderr
    assert out.read_bytes() == before


def test_out_rewrites_its_own_result(tmp_path: Path) -> None:
    import pandas as pd

    out = tmp_path / "r.parquet"
    first = _cli(*SMALL_ARGS, "--json", "--out", str(out))
    assert first.returncode == 0, first.stderr
    again = _cli(*SMALL_ARGS, "--json", "--out", str(out), "--resume")
    assert again.returncode == 0, again.stderr
    assert len(pd.read_parquet(out)) > 0


# ---- 3: one-line errors, not tracebacks ---------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "needle"), [
    (("--tp", "0"), "--tp: must be greater than or equal to 1"),
    (("--pp", "0"), "--pp: must be greater than or equal to 1"),
    (("--mbs", "0"), "--mbs: must be greater than or equal to 1"),
    (("--zero", "5"), "--zero: must be less than or equal to 3"),
    (("--tp", ""), "--tp: no value given"),
    (("--nodes", "8"), "give --gpus or --nodes, not both"),
    (("--fabrics", ""), "--fabrics: no value given"),
    (("--systems", ""), "--systems: no value given"),

    (("--gpu-hour", "0"), "--gpu-hour: must be > 0"),
    ((*INFERENCE_ARGS, "--tokens", "2T"), "--tokens: size training only"),
    ((*INFERENCE_ARGS, "--gpus", "64", "--deadline", "9d"), "--deadline, --gpus: size training only"),
    ((*INFERENCE_ARGS, "--fabrics", ""), "--fabrics: no value given"),
    ((*INFERENCE_ARGS, "--gpu-hour", "0"), "--gpu-hour: must be > 0"),
])
def test_bad_input_is_one_error_line(args: tuple[str, ...], needle: str) -> None:
    proc = _cli(*(args if args[0] == "--inference" else (*SMALL_ARGS, *args)))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr

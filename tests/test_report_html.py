"""The self-contained HTML design-review report (``--report review.html``): for train, whatif, size, infer and topo,
a real ``--json`` document renders to one file that opens offline in headless Chromium with no request, no
console error, every declared chart drawn and a non-blank screen; user text is escaped; the same document gives
the same bytes; missing or odd keys never crash it; nothing in it points outside the file."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from browser import launched_browser, open_offline, png_stats
from fabricsim.catalog import Catalog
from fabricsim.cli import app
from fabricsim.report import REPORT_COMMANDS, render_report, topology_svg, write_report
from fabricsim.topology import ClusterSpec, build_topology

# Small, fast cases (seconds in all): each command's real JSON document.
ARGS: dict[str, list[str]] = {
    "train": ["train", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--tp", "1", "--pp", "1",
              "--gbs", "64", "--seq", "2048"],
    "whatif": ["whatif", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "64", "--tp", "8", "--gbs", "64",
               "--seq", "2048", "--swap", "ib=xdr", "--swap", "ib=hdr"],
    "size": ["size", "--model", "llama3-8b", "--tokens", "1T", "--deadline", "30d", "--gpus", "64,128", "--systems",
             "dgx-h100", "--fabrics", "ndr,xdr", "--oversubscription", "1", "--executor", "serial"],
    "infer": ["infer", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "1", "--tp", "1", "--batch", "8",
              "--prompt", "512", "--output", "64", "--rate", "2", "--duration", "20s"],
    "topo": ["topo", "--system", "dgx-h100", "--nodes", "8"],
    "collective": ["collective", "--system", "dgx-h100", "--nodes", "2", "--min", "1M", "--max", "256M"],
}
# A section title each report must show (its data is in the document).
EXPECTED = {"train": ["Breakdown by layer", "Memory", "Goodput"], "whatif": ["What-if and swaps"],
            "size": ["Sizing search", "Pareto front", "Tie set"], "infer": ["Breakdown by layer", "Serving simulation"],
            "topo": ["Topology", "Bill of materials"], "collective": ["Size sweep"]}
EXTERNAL = re.compile(r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)|<link\b|@import|"""
                      r"""url\(\s*["']?(?:https?:)?//""", re.IGNORECASE)


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    runner = CliRunner()
    docs = {}
    for command, args in ARGS.items():
        out = runner.invoke(app, [*args, "--json"])
        assert out.exit_code == 0, out.output
        docs[command] = json.loads(out.stdout)
    return docs


@pytest.fixture(scope="module")
def svg(catalog: Catalog) -> str | None:
    return topology_svg(build_topology(ClusterSpec(system="dgx-h100", nodes=8), catalog))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser()


def markup(text: str) -> str:
    """The page without its inline scripts (plotly.js's source holds URLs and dates it never fetches or prints)."""
    return re.sub(r"<script>.*?</script>", "<script></script>", text, flags=re.DOTALL)


def render(command: str, doc: dict[str, Any], svg: str | None) -> str:
    return render_report(command, doc, topology_svg=svg if command == "topo" else None)


def test_the_five_commands_are_the_report_s() -> None:
    assert set(REPORT_COMMANDS) == set(ARGS)


@pytest.mark.parametrize("command", list(ARGS))
def test_report_opens_offline_in_a_browser_with_every_chart_drawn(command: str, documents: dict[str, Any],
                                                                   svg: str | None, browser: Any,
                                                                   tmp_path: Path) -> None:
    path = write_report(tmp_path / f"{command}.html", command, documents[command],
                        topology_svg=svg if command == "topo" else None)
    run = open_offline(browser, path)
    shots = os.environ.get("FABRICSIM_REPORT_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        (Path(shots) / f"{command}.png").write_bytes(run.screenshot)
    assert run.network == [], f"the page tried the network: {run.network}"
    assert run.errors == [], run.errors
    assert run.charts_declared >= 1
    assert run.charts_drawn == run.charts_declared
    width, height, colours, spread = png_stats(run.screenshot)
    assert (width, height) == (1280, 1000)
    assert colours > 40 and spread > 0.05, (colours, spread)


@pytest.mark.parametrize("command", list(ARGS))
def test_report_has_its_sections_and_declares_its_charts(command: str, documents: dict[str, Any],
                                                         svg: str | None) -> None:
    text = render(command, documents[command], svg)
    for title in ["Answer", "Inputs", "Assumptions and sources", "All results", *EXPECTED[command]]:
        assert f">{title}" in text, title
    declared = int(re.search(r'name="fabricsim-charts" content="(\d+)"', text)[1])  # type: ignore[index]
    assert declared == text.count('class="plotly-graph-div"') >= 1
    ids = re.findall(r'<div id="(fabricsim-chart-\d+)"', text)
    assert ids == [f"fabricsim-chart-{i}" for i in range(1, declared + 1)]
    assert text.count("plotly.js v") == 1  # inlined once
    page = markup(text)
    assert "<script src" not in page and not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "Content-Security-Policy" in text and "default-src 'none'" in text.replace("&#x27;", "'")


def test_same_document_same_bytes_and_no_timestamp(documents: dict[str, Any], svg: str | None) -> None:
    for command, doc in documents.items():
        first = render(command, doc, svg)
        assert render(command, copy.deepcopy(doc), svg) == first
        assert not re.search(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d", markup(first))
    stamped = render_report("topo", documents["topo"], generated_at="2025-01-02 03:04 UTC")
    assert "generated 2025-01-02 03:04 UTC" in stamped


def test_topology_svg_is_deterministic_and_embedded(catalog: Catalog, svg: str | None,
                                                     documents: dict[str, Any]) -> None:
    assert svg is not None and svg.startswith("<svg")
    assert topology_svg(build_topology(ClusterSpec(system="dgx-h100", nodes=8), catalog)) == svg
    text = render("topo", documents["topo"], svg)
    assert 'src="data:image/svg+xml;base64,' in text
    assert 'src="data:image/svg+xml' not in render("topo", documents["topo"], None)


def test_user_text_is_escaped(documents: dict[str, Any]) -> None:
    evil = "<script>alert('x')</script>"
    doc = copy.deepcopy(documents["train"])
    doc["inputs"]["model"] = evil
    doc["bottleneck"] = evil
    doc["warnings"] = [evil]
    doc[evil] = evil  # an unknown key: the generic table
    text = render_report("train", doc)
    assert evil not in text and "alert('x')" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text


@pytest.mark.parametrize("doc", [
    {},
    {"inputs": {"model": "m"}},
    {"inputs": None, "step_time_s": 1.5},
    {"inputs": {}, "breakdown_s": {"compute": 1.0}, "memory": [1, 2], "goodput": None, "plan": "x",
     "layers": "oops", "swaps": [1, None], "results": 5, "pareto": [{}], "ties": {"recommended": 3},
     "items": [{"count": None}], "step_time_s_band": {"low": "a"}, "launch": {"serve": None}},
], ids=["empty", "inputs-only", "inputs-null", "odd-types"])
@pytest.mark.parametrize("command", [*ARGS, "traffic"])
def test_missing_or_odd_sections_render(command: str, doc: dict[str, Any]) -> None:
    text = render_report(command, doc)
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert ">Answer<" in text


def test_unknown_keys_land_in_all_results_and_absent_sections_are_skipped(documents: dict[str, Any]) -> None:
    doc = copy.deepcopy(documents["train"])
    for key in ("breakdown_s", "exposed_s", "overlapped_s", "memory", "goodput"):
        doc.pop(key)
    doc["mystery_latency_s"] = 0.25
    text = render_report("train", doc)
    assert "Breakdown by layer" not in text and 'id="memory"' not in text and "Goodput" not in text
    all_results = text[text.index('id="all-results"'):]
    assert "mystery_latency_s" in all_results and "250 ms" in all_results


def test_write_report_writes_the_rendered_page(documents: dict[str, Any], tmp_path: Path) -> None:
    path = write_report(tmp_path / "r.html", "infer", documents["infer"])
    assert path == tmp_path / "r.html"
    assert path.read_text(encoding="utf-8") == render_report("infer", documents["infer"])


def test_importing_the_report_package_does_not_load_plotly() -> None:
    code = "import sys, fabricsim.report; print('PLOTLY', 'plotly' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert "PLOTLY False" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("command", list(ARGS))
def test_the_cli_report_option_writes_its_json_s_report_and_it_opens(command: str, browser: Any,
                                                                     tmp_path: Path) -> None:
    """`--report` beside `--json`: the file is the report of the very document printed, and it opens offline."""
    path = tmp_path / f"{command}.html"
    out = CliRunner().invoke(app, [*ARGS[command], "--json", "--report", str(path)])
    assert out.exit_code == 0, out.output
    assert f"report: {path}" in out.stderr
    text = path.read_text(encoding="utf-8")
    if command == "topo":
        assert "data:image/svg+xml" in text
    else:
        assert text == render_report(command, json.loads(out.stdout))
    run = open_offline(browser, path)
    assert run.network == [] and run.errors == [], (run.network, run.errors)
    assert run.charts_drawn == run.charts_declared >= 1


def test_the_report_option_wants_an_html_file(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, [*ARGS["topo"], "--report", str(tmp_path / "review.pdf")])
    assert out.exit_code == 2
    assert out.stderr.startswith("error: --report") and len(out.stderr.strip().splitlines()) == 1

"""The self-contained design-review report (``--report review.html``): one HTML file per command result with the
inputs, the answer and its error band, the breakdown by layer, what-if and swaps, the sizing search's Pareto front
and ties, the topology drawing and its bill of materials, and the assumptions and sources, as interactive plotly
charts. plotly.js is inlined once; the page fetches nothing at view time. The same document gives the same bytes.

The input is the JSON document the command prints with ``--json`` (SI units); keys a section needs and does not
find are skipped, keys no section knows land in a collapsed 'All results' table."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fabricsim.report.html.commands as cmd
from fabricsim.report.html.page import Charts, Section, fmt, page
from fabricsim.report.html.sections import (
    Card,
    Doc,
    all_results_section,
    answer_section,
    assumptions_section,
    band_of,
    breakdown_section,
    figure_card,
    inputs_section,
    is_num,
    memory_section,
    plan_section,
    top_bands,
)

if TYPE_CHECKING:
    from fabricsim.topology import Topology

COMMANDS = ("train", "whatif", "size", "infer", "topo", "collective")
NAMES = {"step_time_s": "step time", "tokens_per_s": "tokens per second", "mfu": "MFU",
         "model_flops_per_s_per_gpu": "model FLOP/s per GPU", "base_step_s": "step time (base)",
         "ttft_s": "time to first token", "tpot_s": "time per output token", "e2e_s": "request end to end",
         "output_tokens_per_s": "output tokens per second", "output_tokens_per_s_per_gpu": "output tokens/s per GPU",
         "time_to_train_s": "time to train", "cost_usd": "cost to train", "energy_mwh": "energy",
         "usd_per_million_output_tokens": "$ per million output tokens", "served_output_tokens_per_s":
         "served output tokens/s", "ttft_s_p90": "TTFT p90", "tpot_s_p90": "TPOT p90", "e2e_s_p90": "end to end p90",
         "memory_per_gpu_bytes": "memory per GPU", "base_capex_usd": "capital cost (base)",
         "base_goodput": "goodput (base)", "slo_attainment": "SLO attainment", "capex_usd": "capital cost",
         "power_w": "power", "cost_usd_per_hour": "cost per hour"}


def _cards(source: Mapping[str, Any], keys: tuple[str, ...], main: tuple[str, ...] = (),
           doc: Doc | None = None) -> list[Card | None]:
    """Cards of ``keys`` of ``source`` (those present); marked as shown in ``doc`` when given."""
    if doc is not None:
        doc.used.update(k for k in keys if k in doc.data)
    return [figure_card(source, k, NAMES.get(k, k.replace("_", " ")), main=k in main) for k in keys]


def _gpus_card(doc: Doc) -> Card | None:
    gpus = doc.data.get("gpus")
    if not is_num(gpus):
        return None
    nodes = doc.data.get("nodes")
    return Card("cluster", f"{gpus:,} GPU{'s' if gpus != 1 else ''}",
                f"{nodes} node{'s' if nodes != 1 else ''}" if nodes is not None else "")


def _train_answer(doc: Doc, charts: Charts) -> Section:
    good = doc.data.get("goodput")
    good = good if isinstance(good, Mapping) else {}
    cards = _cards(doc.data, ("step_time_s", "tokens_per_s", "mfu", "model_flops_per_s_per_gpu",
                              "memory_per_gpu_bytes"), main=("step_time_s",), doc=doc)
    cards += [figure_card(good, "goodput", "goodput (wall clock)"),
              figure_card(good, "effective_tokens_per_s", "tokens per second kept")]
    cards.append(_gpus_card(doc))
    chosen = doc.data.get("chosen")
    memory = doc.data.get("memory")
    return answer_section(
        cards, bottleneck=doc.get("bottleneck"), fits=doc.get("fits"),
        verdicts=[str(chosen.get("note") or "")] if isinstance(chosen, Mapping) else [],
        notes=[f"memory: {memory['summary']}"] if isinstance(memory, Mapping) and memory.get("summary") else [],
        bands=top_bands(doc.data, NAMES), charts=charts)


def _whatif_answer(doc: Doc, charts: Charts) -> Section:
    cards = _cards(doc.data, ("base_step_s", "base_capex_usd", "base_goodput"), main=("base_step_s",), doc=doc)
    if doc.data.get("factor") is not None:
        cards.append(Card("speed-up asked", f"{doc.get('factor')}x", "one layer at a time"))
    verdict = doc.map("verdict")
    return answer_section(cards, bottleneck=doc.get("base_bottleneck"),
                          verdicts=[str(verdict.get("sentence") or "")], bands=top_bands(doc.data, NAMES),
                          charts=charts)


def _infer_answer(doc: Doc, charts: Charts) -> Section:
    keys = ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_s_p90",
            "tpot_s_p90", "served_output_tokens_per_s", "slo_attainment", "memory_per_gpu_bytes")
    cards = _cards(doc.data, keys, main=("ttft_s", "tpot_s"), doc=doc)
    cards.append(_gpus_card(doc))
    notes = [str(w) for w in doc.data.get("warnings") or []]
    if doc.data.get("overloaded"):
        notes.append(f"overloaded: {doc.data.get('overload_reason') or 'the stream outruns the replicas'}")
    bands = [b for b in top_bands(doc.data, NAMES) if not b[1].endswith(("_p50", "_p99"))]
    return answer_section(cards, bottleneck=doc.get("bottleneck"), fits=doc.get("fits"), notes=notes,
                          bands=bands, charts=charts)


def _size_answer(doc: Doc, charts: Charts) -> Section:
    rec = cmd.recommended_row(doc)
    if rec is None:
        note = doc.text("note") or "No cluster in the search meets the constraints."
        return answer_section([], verdicts=[note])
    if "usd_per_million_output_tokens" in rec:
        cards = _cards(rec, ("usd_per_million_output_tokens", "cost_usd_per_hour", "ttft_s_p90", "tpot_s_p90",
                             "capex_usd"), main=("usd_per_million_output_tokens",))
        where = f"{rec.get('replicas', '?')} x {rec.get('gpus_per_replica', '?')}-GPU replica(s)"
    else:
        main = "time_to_train_s" if doc.data.get("objective") == "time" else "cost_usd"
        order = (main, *(k for k in ("time_to_train_s", "cost_usd") if k != main))
        cards = _cards(rec, (*order, "tokens_per_s", "energy_mwh", "capex_usd", "power_w"), main=(main,))
        where = f"{rec.get('nodes', '?')} nodes"
    cards.insert(1, Card("cluster", f"{rec.get('gpus', '?')} x {rec.get('system', '?')}",
                         f"{where}, fabric {rec.get('fabric', '?')}"))
    ties = doc.map("ties")
    verdicts = [f"Recommended: {rec.get('gpus', '?')} GPUs of {rec.get('system', '?')} on {rec.get('fabric', '?')}, "
                f"{cmd.plan_text(rec)}"]
    if is_num(ties.get("count")):
        verdicts.append(f"{ties['count']} plan(s) are within the model's error of the best; the pick among them: "
                        f"{ties.get('secondary') or 'the secondary objective'}.")
    return answer_section(cards, bottleneck=rec.get("bottleneck"), verdicts=verdicts,
                          notes=[n for n in [doc.text("note")] if n], bands=top_bands(rec, NAMES), charts=charts)


def _topo_answer(doc: Doc, charts: Charts) -> Section:
    capex = "total_price_usd" if "total_price_usd" in doc.data else "capex_usd"
    power = "total_power_w" if "total_power_w" in doc.data else "power_w"
    cards = [figure_card(doc.data, capex, "capital cost", main=True), figure_card(doc.data, power, "power"),
             figure_card(doc.data, "bisection_bytes_per_s", "bisection bandwidth"),
             figure_card(doc.data, "switches_total", "switches"), figure_card(doc.data, "cables_total", "cables")]
    if doc.data.get("gpus") is not None:
        cards.insert(1, Card("cluster", f"{doc.data.get('nodes', '?')} x {doc.data.get('system', '?')}",
                             f"{doc.data.get('gpus')} GPUs"))
    fabric = doc.data.get("fabric")
    return answer_section(cards, verdicts=[f"Fabric: {fabric}"] if fabric else [], bands=top_bands(doc.data, NAMES),
                          charts=charts)


def _collective_answer(doc: Doc, charts: Charts) -> Section:
    """The largest size's bus bandwidth (nccl-tests' headline figure) with its band, and the regime line."""
    rows = [r for r in doc.rows("rows") if is_num(r.get("busbw_bytes_per_s"))]
    last = rows[-1] if rows else {}
    cards: list[Card | None] = [
        figure_card(last, "busbw_bytes_per_s", f"bus bandwidth at {fmt('size_bytes', last['size_bytes'])}",
                    main=True) if is_num(last.get("size_bytes")) else None,
        figure_card(last, "time_s", "time at that size"),
        Card("group", f"{doc.get('ranks')} GPUs", f"{doc.get('nodes')} node(s), {doc.get('op')}")]
    if last.get("algorithm"):
        cards.append(Card("algorithm", f"{last['algorithm']} / {last.get('protocol', '?')}", "at the largest size"))
    regime = doc.text("regime")
    return answer_section(cards, bottleneck=last.get("bound"), verdicts=[regime] if regime else [], charts=charts)


def _generic_answer(doc: Doc, charts: Charts) -> Section:
    keys = tuple(k for k, v in doc.data.items() if is_num(v) and band_of(doc.data, k) is not None)[:8]
    return answer_section(_cards(doc.data, keys, main=keys[:1]), bottleneck=doc.data.get("bottleneck"),
                          bands=top_bands(doc.data, NAMES), charts=charts)


ANSWERS: dict[str, Callable[[Doc, Charts], Section]] = {
    "train": _train_answer, "whatif": _whatif_answer, "infer": _infer_answer, "size": _size_answer,
    "topo": _topo_answer, "collective": _collective_answer}


def _title(command: str, inputs: Mapping[str, Any], doc: Mapping[str, Any]) -> tuple[str, str]:
    model = inputs.get("model") or doc.get("model")
    system = inputs.get("system") or doc.get("system")
    gpus = inputs.get("gpus") or doc.get("gpus")
    what = {"train": "training step", "whatif": "what-if", "size": "cluster sizing", "infer": "inference",
            "topo": "cluster topology", "collective": "collective"}.get(command, command)
    subject = " · ".join(str(x) for x in (model, f"{gpus} GPUs" if gpus else None, system) if x)
    title = f"fabricsim {what} report" + (f": {subject}" if subject else "")
    shown = [f"{k}={v}" for k, v in inputs.items() if isinstance(v, str | int | float) and not isinstance(v, bool)]
    return title, f"fabricsim {command} " + " ".join(shown[:14]) + (" …" if len(shown) > 14 else "")


def render_report(command: str, document: Mapping[str, Any], *, topology_svg: str | None = None,
                  generated_at: str | None = None) -> str:
    """The report of one command's JSON document as a self-contained HTML page. Deterministic: no timestamp
    unless ``generated_at`` is given, fixed chart ids."""
    from fabricsim import __version__

    doc, charts = Doc(document), Charts()
    inputs = document.get("inputs")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    sections: list[Section | None] = [ANSWERS.get(command, _generic_answer)(doc, charts), inputs_section(doc)]
    if command == "whatif":
        sections.append(cmd.whatif_section(doc, charts))
    if command == "size":
        sections.append(cmd.size_section(doc, charts))
    if command == "collective":
        sections.append(cmd.collective_section(doc, charts))
    if command == "topo" or topology_svg:
        sections.append(cmd.topology_section(doc, topology_svg))
    sections += [breakdown_section(doc, charts, command), memory_section(doc, charts), plan_section(doc)]
    if command == "infer":
        sections += [cmd.serving_section(doc, charts), cmd.launch_section(doc)]
    sections += [cmd.goodput_section(doc, charts), cmd.topo_bom_section(doc, charts) if command == "topo" else None]
    rec = cmd.recommended_row(doc) if command == "size" else None
    sections += [assumptions_section(doc, band_sources=[("recommended.", rec)] if rec else []),
                 all_results_section(doc)]
    title, subtitle = _title(command, inputs, document)
    generated = f"fabricsim {__version__} · {command} report" + (f" · generated {generated_at}" if generated_at
                                                                  else "")
    return page(title=title, subtitle=subtitle, generated=generated, sections=[s for s in sections if s],
                charts=charts, command=command)


def write_report(path: Path, command: str, document: Mapping[str, Any], *, topology_svg: str | None = None,
                 generated_at: str | None = None) -> Path:
    """Write :func:`render_report` to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(render_report(command, document, topology_svg=topology_svg, generated_at=generated_at),
                   encoding="utf-8")
    return out


def topology_svg(topology: Topology) -> str | None:
    """The cluster sketch of ``topo --plot`` as an SVG string, made in memory and deterministic (no date, fixed
    ids, text as paths so no font is needed); None when the cluster is too large to draw."""
    import matplotlib

    from fabricsim.errors import SpecError
    from fabricsim.topology import sketch_figure

    try:
        figure = sketch_figure(topology)
    except SpecError:
        return None
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "fabricsim", "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):] if "<svg" in text else text


__all__ = ["COMMANDS", "render_report", "topology_svg", "write_report"]

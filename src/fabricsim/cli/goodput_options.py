"""The goodput lines `train`, `size` and `whatif` print (their options: `fabricsim.api.specs.GoodputOptions`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabricsim import units

if TYPE_CHECKING:
    from fabricsim.training import Goodput

def goodput_lines(g: Goodput) -> list[str]:
    """What failures and checkpoints leave: goodput, interruptions, checkpoint interval and cost, restart."""
    where = "peers' host memory" if g.mode == "memory" else g.storage
    interval = "none needed" if g.checkpoint_interval_s == float("inf") else \
        f"every {units.format_duration(g.checkpoint_interval_s, digits=3)}" + \
        (" (optimal)" if g.optimal_interval else "")
    return [
        f"goodput {g.goodput:.1%}: {g.effective_tokens_per_s:,.0f} effective tokens/s; "
        f"{g.interruptions_per_day:.2f} interruptions/day (catalog failure rates x this job's parts"
        + ("; fabric cables estimated: no fat tree of these switches holds it)" if g.cables_estimated else ")"),
        f"checkpoint {units.format_bytes(g.checkpoint_bytes)} to {where} ({g.mode}): written in "
        f"{units.format_duration(g.checkpoint_write_s, digits=3)}, training stopped "
        f"{units.format_duration(g.checkpoint_blocking_s, digits=3)} each, {interval}, "
        f"overhead {g.checkpoint_overhead:.2%}; restart {units.format_duration(g.restart_s, digits=3)}",
        _storage_line(g),
    ]


def _storage_line(g: Goodput) -> str:
    """The storage bought and the spares kept: what they cost and what waiting for repairs still costs."""
    b = g.storage_bill
    wait = (f"{units.format_duration(g.spare_wait_s, digits=3)} mean wait for a repaired node per interruption"
            if g.spare_wait_s >= 1.0 else "a spare is free for nearly every node lost")
    spares = f"{g.spare_units} hot spare{'s' if g.spare_units != 1 else ''} of {g.spare_unit_gpus} GPUs ({wait})"
    if b is None:
        return f"storage: the {g.storage} tier's rates (not billed); {spares}"
    price = sum(i.price_usd or 0.0 for i in b.items)
    return (f"storage: {b.servers} x {b.server} on a {b.network} network, {units.format_rate(b.write_bytes_per_s)} "
            f"write, {units.format_rate(b.read_bytes_per_s)} read, {units.format_usd(price)}; {spares}")


def storage_fallback_notes(data: object) -> None:
    """One ``note:`` line on stderr per storage network that is not the one asked for (a system without storage
    ports converged), and for a goodput add-on that failed (``goodput: not computed: ...``); the JSON carries the
    same text as ``storage_bill.fallback`` and ``goodput_note``."""
    import sys

    seen: list[str] = []

    from collections.abc import Mapping

    def walk(value: object) -> None:
        if isinstance(value, Mapping):  # a result's payload is a Mapping (train's is built on first read)
            found = value.get("storage_fallbacks") or []
            note = value.get("fallback") if "servers_write_bytes_per_s" in value else None
            for text in [*found, note, value.get("goodput_note")]:
                if isinstance(text, str) and text not in seen:
                    seen.append(text)
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif hasattr(value, "model_dump"):
            walk(value.model_dump())

    walk(data)
    for note in seen:
        sys.stderr.write(f"note: {note}\n")

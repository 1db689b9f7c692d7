"""The goodput options `train`, `size` and `whatif` share (storage, checkpoints, failure rates, restart), and the
lines and JSON `train` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from fabricsim import units

if TYPE_CHECKING:
    from fabricsim.training import Goodput

STORAGE_HELP = ("storage tier (fabricsim catalog storage; superpod-better when not given): the checkpoints go to "
                "it and the storage servers are sized to it (topo: with --storage-network separate or converged)")
"""--storage's one help text (`topo` declares it optional, to tell a tier given from the default)."""
Storage = Annotated[str, typer.Option("--storage", help=STORAGE_HELP)]
StorageBw = Annotated[str | None, typer.Option("--storage-bw", help="aggregate storage write rate instead of the "
                                               "tier's (reads scale with it), e.g. 2TB/s")]
CheckpointMode = Annotated[str, typer.Option("--checkpoint-mode", help="sync (training waits for the write; "
                                             "Megatron-LM's default), async (only the copy to host memory stops "
                                             "it) or memory (copies in peers' host memory, restored from there)")]
CheckpointInterval = Annotated[str | None, typer.Option("--checkpoint-interval", help="time between checkpoints, "
                                                        "e.g. 30m [default: the goodput-optimal interval]")]
MtbfScale = Annotated[float, typer.Option("--mtbf-scale", help="multiply every component's mean time between "
                                          "failures (2: half as many failures)")]
Restart = Annotated[str | None, typer.Option("--restart", help="stall of one failure before the checkpoint is "
                                             "read back, e.g. 10m [default: 10m, sourced]")]
StorageNetwork = Annotated[str | None, typer.Option("--storage-network", help="separate (its own switches, the "
                                                    "nodes' storage NICs), converged (servers on the compute "
                                                    "fabric) or none (the tier's rates, storage not billed) "
                                                    "[default: separate; converged, with a note, on a system "
                                                    "without storage ports]")]
StorageServer = Annotated[str | None, typer.Option("--storage-server", help="storage server model (fabricsim "
                                                   "catalog storage-servers) [default: clusterstor-e1000]")]
StorageServers = Annotated[int | None, typer.Option("--storage-servers", help="storage servers to buy [default: "
                                                    "the fewest that meet the tier]")]
Spares = Annotated[str | None, typer.Option("--spares", help="hot spares beside the job: a count of units (servers, "
                                            "or a rack's compute trays; 4) or a share of them (2%) [default: 5%, "
                                            "sourced]")]
GoodputOpt = Annotated[bool, typer.Option("--goodput/--no-goodput", help="time to train on the wall clock: failures, "
                                          "checkpoints and restarts included (--no-goodput: a healthy "
                                          "cluster)")]

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

    def walk(value: object) -> None:
        if isinstance(value, dict):
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

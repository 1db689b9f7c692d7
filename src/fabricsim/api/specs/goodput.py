"""The goodput options `train` and `whatif` share (storage, checkpoints, failure rates, restart, spares), and the
switch that skips the add-on."""

from __future__ import annotations

from typing import Annotated

from fabricsim.api.specs.fields import OptionGroup, opt
from fabricsim.catalog import DEFAULT_STORAGE_TIER

STORAGE_HELP = (f"storage tier (fabricsim catalog storage; {DEFAULT_STORAGE_TIER} when not given): the "
                "checkpoints go to it and the storage servers are sized to it (topo: with --storage-network separate "
                "or converged)")
"""--storage's one help text (`topo` declares it optional, to tell a tier given from the default)."""


StorageBw = Annotated[str | None, opt(None, "aggregate storage write rate instead of the tier's (reads scale with "
                                      "it), e.g. 2TB/s", unit="bytes/s")]
StorageServer = Annotated[str | None, opt(None, "storage server model (fabricsim catalog storage-servers) [default: "
                                          "clusterstor-e1000]")]
StorageServers = Annotated[int | None, opt(None, "storage servers to buy [default: the fewest that meet the tier]")]


STORAGE_NETWORK_HELP = (
    "separate (its own switches, the nodes' storage NICs), converged (servers on the compute fabric) or none (the "
    "tier's rates, storage not billed) [default: separate; converged, with a note, on a system without storage "
    "ports; topo: none, a storage network billed only when asked]")
"""--storage-network's one help text (`topo` bills storage only when asked: its default is none)."""
StorageNetwork = Annotated[str | None, opt(None, STORAGE_NETWORK_HELP)]
CheckpointMode = Annotated[str, opt("sync", "sync (training waits for the write; Megatron-LM's default), async (only "
                                    "the copy to host memory stops it) or memory (copies in peers' host memory, "
                                    "restored from there)")]
CheckpointInterval = Annotated[str | None, opt(None, "time between checkpoints, e.g. 30m [default: the "
                                                     "goodput-optimal interval]", unit="s")]
MtbfScale = Annotated[float, opt(1.0, "multiply every component's mean time between failures (2: half as many "
                                      "failures)")]
Restart = Annotated[str | None, opt(None, "stall of one failure before the checkpoint is read back, e.g. 10m "
                                          "[default: 10m, sourced]", unit="s")]
GoodputOption = Annotated[bool, opt(True, "time to train on the wall clock: failures, checkpoints and restarts "
                                          "included (--no-goodput: a healthy cluster)")]


class GoodputOptions(OptionGroup):
    """What failures, checkpoints and restarts leave of the step: the storage the checkpoints go to and the
    network it is reached over, the spares, the checkpoint mode and interval, the failure rates and the restart."""

    storage: str = opt(DEFAULT_STORAGE_TIER, STORAGE_HELP)
    storage_bw: StorageBw
    storage_network: StorageNetwork
    storage_server: StorageServer
    storage_servers: StorageServers
    spares: str | None = opt(None, "hot spares beside the job: a count of units (servers, or a rack's compute trays; "
                             "4) or a share of them (2%) [default: 5%, sourced]")
    checkpoint_mode: CheckpointMode
    checkpoint_interval: CheckpointInterval
    mtbf_scale: MtbfScale
    restart: Restart


class GoodputSwitch(OptionGroup):
    """Whether the goodput add-on runs at all."""

    goodput: GoodputOption

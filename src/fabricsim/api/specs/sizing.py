"""The options of a sizing search (`size`): the model and its token budget, the constraints, the clusters and plans
searched (lists and ranges as text: ``gpus="1024..4096"``, ``tp="4,8"``), the cost model, where the search runs,
and with --inference the serving search; the goodput options are searched as lists where they say so."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from fabricsim.api.specs.fields import ApiFunction, OptionGroup, opt
from fabricsim.api.specs.goodput import (
    CheckpointInterval,
    CheckpointMode,
    GoodputOption,
    GoodputSwitch,
    MtbfScale,
    Restart,
    StorageNetwork,
    StorageServer,
    StorageServers,
)
from fabricsim.api.specs.runs import CalibrationOptions
from fabricsim.api.specs.serving import (
    CheckpointOption,
    LengthsOption,
    OutputOption,
    PromptOption,
    SloTpotOption,
    SloTtftOption,
)
from fabricsim.api.specs.shared import (
    FRAMEWORK_HELP,
    Calibration,
    CapacityFactorOption,
    FlashAttnOption,
    GpuPowerOption,
    KvServerOption,
    KvServersOption,
    KvTierOption,
    ModelOption,
    PrefixNetworkOption,
    RailOptimizedOption,
    WorkersOption,
)
from fabricsim.catalog import DEFAULT_STORAGE_TIER


class PlanSpaceOptions(OptionGroup):
    """The space a training search covers and how it is priced: the model and tokens, the clusters (systems,
    networks, designs, sizes) and plans, the cost model, and where the evaluation runs (`size` and `sweep`)."""

    model: ModelOption
    tokens: str | None = opt(None, "training tokens, e.g. 2T [default: 15T]", unit="tokens")
    gpus: str | None = opt(None, "GPU counts: a range lo..hi (its powers of two and the whole units inside), a list "
                           "or one [default: 1024..65536]")
    nodes: str | None = opt(None, "node counts instead of --gpus")
    systems: str | None = opt(None, "candidate systems (default: every priced one)")
    gpu_power: GpuPowerOption
    gpu_power_points: str | None = opt(
        None, "GPU board power operating points to search, comma-separated: rated, fractions of each GPU's rating "
        "(0.85, 85%) or watts (500W); every candidate system runs at each (more GPUs at lower power against fewer "
        "at full), a GPU without a power curve at its rating only [default: rated]")
    fabrics: str | None = opt(None, "candidate networks [default: hdr,ndr,xdr,eth-400g]")
    fabric_kinds: str | None = opt(None, "scale-out designs to search: fat-tree, rail-only (a network per rail), "
                                   "2-plane (a fat tree of 2 planes): the same step, each its own bill [default: "
                                   "all three]")
    oversubscription: str = opt("1,2", "fat-tree oversubscriptions")
    rail_optimized: RailOptimizedOption
    seq: int = opt(8192, "sequence length", unit="tokens")
    gbs: str = opt("1024", "global batch: fixed, list or range (512..4096)", unit="sequences")
    tp: str | None = opt(None, "tensor parallel sizes to try")
    pp: str | None = opt(None, "pipeline sizes to try")
    cp: str | None = opt(None, "context parallel sizes to try")
    ep: str | None = opt(None, "expert parallel sizes to try")
    etp: str | None = opt(None, "expert tensor-parallel sizes to try (default tp and 1)")
    vpp: str | None = opt(None, "virtual stages to try")
    mbs: str | None = opt(None, "micro-batch sizes to try")
    recompute: str | None = opt(None, "recompute modes to try")
    zero: str | None = opt(None, "ZeRO stages to try")
    precision: str | None = opt(None, "precisions to try (bf16,fp8)")
    flash_attn: FlashAttnOption
    overlap: bool = opt(True, "overlap gradient reduce / param gather")
    dropout: bool | None = opt(None, "hidden dropout masks [default: on]")
    ep_comm_overlap: bool | None = opt(None, "overlap the MoE all-to-all with compute [default: off]")
    shared_expert_overlap: bool | None = opt(None, "run shared experts beside the all-to-all [default: off]")
    moe_balance: str | None = opt(None, "expert load: forced, random or skewed [default: random]")
    moe_dispatcher: str | None = opt(None, "token dispatch: alltoall or deepep [default: alltoall]")
    capacity_factor: CapacityFactorOption
    framework: str | None = opt(None, FRAMEWORK_HELP, shown="megatron")
    amortize: str | None = opt(None, "capex amortisation period [default: 4y]", unit="s")
    gpu_hour: str | None = opt(None, "rent at this USD per GPU-hour instead", unit="USD/GPU-hour")
    pue: float | None = opt(None, "power usage effectiveness [default: 1.3]")
    kwh: float | None = opt(None, "electricity USD per kWh [default: 0.08]", unit="USD/kWh")
    executor: str | None = opt(None, "where the training search runs: local (process pool), ray or serial "
                               "[default: local]")
    workers: WorkersOption
    ray_address: str | None = opt(None, "Ray cluster address [default: start a local one]")
    out: str | Path | None = opt(None, "stream results to this Parquet file")


class SizeSearchOptions(OptionGroup):
    """What a sizing search adds to the space: the constraints, the objective it ranks by, the table it prints
    and the Parquet file it streams to."""

    deadline: str | None = opt(None, "time to train at most, e.g. 60d", unit="s")
    budget: str | None = opt(None, "total cost at most (USD), e.g. 50M", unit="USD")
    facility: str | None = opt(None, "facility power limit (IT x PUE) at most, e.g. 20MW", unit="W",
                               old="--power-cap")
    cooling: str | None = opt(None, "the facility's cooling class (fabricsim catalog cooling): air or liquid; keeps "
                              "only systems it can host at their rack power, and its PUE applies unless --pue is "
                              "given [default: none: no rack check, --pue]")
    objective: str = opt("cost", "rank by time, cost or energy")
    congestion: str | None = opt(None, "fabric behaviours (catalog congestion) to re-time the best plan of each "
                                 "system x network with on the flow simulator, each on the networks of its kind, "
                                 "e.g. ib,roce-dcqcn,spectrum-x: the step, time and cost under each (JSON "
                                 "congestion); training only")
    top: int = opt(10, "rows in the ranked table")
    engine: str | None = opt(None, "with --inference, the serving engine NAME[@VERSION]: trtllm, vllm or sglang "
                             "[default: trtllm] (the training search's executor is --executor)")
    resume: bool = opt(False, "continue an interrupted --out search", cli="--resume")
    exhaustive: bool = opt(False, "time every plan that fits (for an --out file of all of them); by default each "
                           "cluster times only the plans that can change the answer (same results)")


class SizeServingOptions(OptionGroup):
    """With --inference: the serving search (rate, SLOs, formats, simulation); then the goodput options, searched
    as lists where they say so."""

    inference: bool = opt(False, "size serving instead of training (cheapest system, plan and replicas meeting "
                          "TTFT/TPOT SLOs at --rate)")
    rate: str | None = opt(None, "inference: requests per second, e.g. 20", unit="requests/s")
    slo_ttft: SloTtftOption
    slo_tpot: SloTpotOption
    prompt: PromptOption
    output: OutputOption
    weights: str | None = opt(None, "inference: weight formats [default: bf16,fp8,int4]")
    kv: str | None = opt(None, "inference: KV-cache formats [default: bf16,fp8]")
    duration: str | None = opt(None, "inference: simulated arrival window [default: 120s]", unit="s")
    seed: int = opt(0, "inference: seed of the simulated arrivals")
    lengths: LengthsOption
    max_gpus: int | None = opt(None, "inference: at most this many GPUs in all")
    slo_percentile: int | None = opt(None, "inference: SLO percentile 50, 90 or 99 [default: 90]")
    utilization: float | None = opt(None, "inference: target utilisation of a replica's capacity [default: 0.8]")
    confirm: int | None = opt(None, "inference: candidates confirmed by simulation [default: 5]")
    whole_nodes: bool = opt(False, "inference: bill whole nodes, not the GPUs used")
    disagg: bool = opt(False, "inference: also search disaggregated prefill and decode pools (each pool's plan and "
                       "the P:D ratio), simulated")
    checkpoint: CheckpointOption
    kv_tier: KvTierOption
    prefix_network: PrefixNetworkOption
    kv_server: KvServerOption
    kv_servers: KvServersOption
    goodput: GoodputOption
    storage: str = opt(DEFAULT_STORAGE_TIER, "storage tiers to search, comma-separated (fabricsim catalog storage); "
                       "each cluster takes the cheapest per hour of kept training")
    storage_bw: str | None = opt(None, "aggregate storage write rates to search, comma-separated (e.g. "
                                 "500GB/s,2TB/s), servers sized to each [default: the tier's]", unit="bytes/s")
    storage_network: StorageNetwork
    storage_server: StorageServer
    storage_servers: StorageServers
    spares: str | None = opt(None, "hot spares to search, comma-separated counts of units (servers, or a rack's "
                             "compute trays; 4) or shares of them (2%) [default: 5%, sourced]")
    checkpoint_mode: CheckpointMode
    checkpoint_interval: CheckpointInterval
    mtbf_scale: MtbfScale
    restart: Restart
    calibration: Calibration


class SizeRun(SizeServingOptions, SizeSearchOptions, PlanSpaceOptions):
    """A sizing search: `fabricsim size` and `fabricsim.size`."""

    api: ClassVar[ApiFunction] = ApiFunction(
        "size", "fabricsim.api.size:run_size", "fabricsim.api.size:SizeResult",
        "fabricsim.api.coerce:size_renames",
        "Search clusters x plans (the options and defaults of `fabricsim size`: lists and ranges as its text, e.g. "
        "``gpus=\"1024..4096\"``, ``tp=\"4,8\"``); ``progress(done, total, plans)`` is called as clusters finish.",
        extra=(("progress", "Callable[..., None] | None", "None"),))


class SweepRun(CalibrationOptions, GoodputSwitch, PlanSpaceOptions):
    """A sweep: every plan of a space that fits, timed and priced, as one table: `fabricsim sweep` and
    `fabricsim.sweep`."""

    api: ClassVar[ApiFunction] = ApiFunction(
        "sweep", "fabricsim.api.sweep:run_sweep", "fabricsim.api.sweep:SweepResult", None,
        "Time and price every plan of a space that fits (the space options of `fabricsim size`, the same text: "
        "``gpus=\"1024..4096\"``, ``tp=\"4,8\"``): ``to_frame()`` is the table, a row per plan, "
        "``to_arrow()`` the same as an Arrow table; ``progress(done, total, plans)`` is called as clusters finish.",
        extra=(("progress", "Callable[..., None] | None", "None"),))

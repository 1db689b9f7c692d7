"""Pydantic models of catalog entries: hardware facts in SI units, each with its source."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricsim.catalog.quantities import Bytes, BytesPerS, FlopPerS, Fraction, Seconds, Usd, Watts

LinkKind = Literal["nvlink", "ualink", "sue", "pcie", "infiniband", "ethernet", "cpu"]
"""cpu: socket-to-socket (UPI, xGMI); nvlink, ualink and sue (scale-up Ethernet): a GPU's scale-up ports"""
SwitchKind = Literal["nvswitch", "nvlink-switch", "ualink-switch", "sue-switch", "infiniband", "ethernet", "pcie"]
SCALE_UP_LINK_KINDS: tuple[str, ...] = ("nvlink", "ualink", "sue")
"""Link kinds a GPU's scale-up domain runs on: one mechanism (a switched domain priced by the same collective
model), different parameters (rate, latency, in-switch reduction)"""
SCALE_UP_SWITCH_KINDS: tuple[str, ...] = ("nvswitch", "nvlink-switch", "ualink-switch", "sue-switch")


class Entry(BaseModel):
    """Fields every catalog entry carries: a stable id, a display name and where the figures come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    source: str = Field(min_length=1, description="URL or document the figures come from")
    verified: bool = Field(True, description="false where a figure could not be confirmed in a primary source")
    notes: str = ""
    estimated: tuple[str, ...] = Field(
        (), description="fields whose value is an estimate (its method in notes), not a published figure; roadmap "
        "entries name them so a bill of materials and a decision can list what they rest on")

    @model_validator(mode="after")
    def _estimated_fields(self) -> Entry:
        unknown = [name for name in self.estimated if name not in type(self).model_fields]
        if unknown:
            raise ValueError(f"estimated names {', '.join(unknown)}, not fields of this entry")
        return self


class Priced(Entry):
    """An entry with an approximate, dated capital price and power draw."""

    price_usd: Usd | None = None
    price_date: str | None = None
    power_w: Watts | None = None


class SourcedFigure(BaseModel):
    """A figure with where it comes from: the shape every sourced catalog quantity shares."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    source: str = Field(min_length=1, description="measurement, datasheet, paper or derivation the figure comes from")
    verified: bool = Field(True, description="false where the figure is assumed, derived or from a secondary source")
    notes: str = ""


class Efficiency(SourcedFigure):
    """A free parameter in (0, 1]: an achievable fraction of a peak rate, with where the figure comes from."""

    value: Fraction


class Count(SourcedFigure):
    """A hardware count (streaming multiprocessors, ...) with where the figure comes from."""

    value: int = Field(ge=1)


class SourcedRate(SourcedFigure):
    """A hardware rate (operations per second) with where the figure comes from."""

    value: float = Field(gt=0)


class SourcedBytes(SourcedFigure):
    """A memory size in bytes with where the figure comes from."""

    value: float = Field(gt=0)


class PowerCurve(BaseModel):
    """Sustained compute clock against the board power limit, both relative to the rated TDP: GEMM-heavy work runs
    into the power limit, so a lower limit lowers the clock (memory and links keep their rates)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    points: list[tuple[float, float]] = Field(
        min_length=2, description="(board power / tdp_w, sustained compute clock / the clock at tdp_w), ascending in"
        " power, ending at (1, 1)")
    source: str = Field(min_length=1)
    verified: bool = True
    notes: str = ""

    @model_validator(mode="after")
    def _ascending_to_rated(self) -> PowerCurve:
        powers = [p for p, _ in self.points]
        clocks = [c for _, c in self.points]
        if powers != sorted(powers) or len(set(powers)) != len(powers) or clocks != sorted(clocks):
            raise ValueError("power curve points must rise in power and in clock")
        if self.points[-1] != (1.0, 1.0) or not all(0 < p <= 1 and 0 < c <= 1 for p, c in self.points):
            raise ValueError("power curve points are fractions of the rated power and clock, ending at (1, 1)")
        return self


class GPU(Priced):
    vendor: str
    architecture: Literal["ampere", "hopper", "blackwell", "rubin", "cdna3", "cdna5"] | None = Field(
        None, description="microarchitecture as the vendor names it; error bands compare like with like by it"
    )
    bf16_flops_per_s: FlopPerS = Field(description="dense BF16 tensor peak")
    fp8_flops_per_s: FlopPerS | None = Field(None, description="dense FP8 tensor peak, None if unsupported")
    fp4_flops_per_s: FlopPerS | None = Field(None, description="dense FP4 (NVFP4) tensor peak, None if unsupported")
    hbm_bytes: Bytes
    hbm_bytes_per_s: BytesPerS
    tdp_w: Watts
    nvlink: str | None = Field(None, description="link technology id of the GPU's scale-up ports: NVLink, or on "
                               "other GPUs UALink or scale-up Ethernet (the same switched-domain model)")
    nvlink_links: int = Field(0, ge=0)
    pcie: str = Field(description="link technology id of the host PCIe x16 interface")
    matmul_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of bf16_flops_per_s on large BF16 GEMMs; None: the model default"
    )
    fp8_matmul_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of fp8_flops_per_s on FP8 training GEMMs; None: the model default"
    )
    fp4_matmul_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of fp4_flops_per_s on best-shape NVFP4/MXFP4 GEMMs; None: the FP8 one"
    )
    attention_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of bf16_flops_per_s in fused attention's matmuls (fwd+bwd; the"
        " softmax exponentials priced apart at exp_per_s where the GPU has one); None: default"
    )
    hbm_efficiency: Efficiency | None = Field(
        None, description="achievable fraction of hbm_bytes_per_s for streaming kernels; None: the model default"
    )
    sm80_kernel_fraction: Efficiency | None = Field(
        None, description="fraction of the GPU's best BF16 GEMM rate that Ampere-generation (SM80: cp.async + "
        "mma.sync) kernels reach on it; None: 1 (they are its native kernels, or unmeasured)"
    )
    sms: Count | None = Field(
        None, description="streaming multiprocessors: GEMM output tiles run one per SM per wave; None: no wave model"
    )
    exp_per_s: SourcedRate | None = Field(
        None, description="exponentials per second on the special-function units (MUFU.EX2): fused attention pays"
        " one per score and pass beside its tensor-core work; None: folded into attention_efficiency"
    )

    status: Literal["shipping", "roadmap"] = Field("shipping", description="roadmap: announced, not shipping; "
                                                   "its figures are claims or estimates")
    power_curve: PowerCurve | None = Field(
        None, description="sustained compute clock against the board power limit (both relative to tdp_w), for"
        " --gpu-power; None: the GPU runs at its rated power only")

    device_memory: SourcedBytes | None = Field(
        None, description="memory CUDA reports as the device's total (torch's total_memory), a little under hbm_bytes:"
        " what a serving engine's memory fraction applies to; None: hbm_bytes"
    )

    @property
    def device_memory_bytes(self) -> float:
        """Bytes CUDA lets a process see on this GPU (``device_memory``, else ``hbm_bytes``)."""
        return self.device_memory.value if self.device_memory is not None else self.hbm_bytes

    def nvlink_bytes_per_s(self, link: LinkTech | None) -> float | None:
        """NVLink bandwidth of this GPU, both directions summed: links x ``link.bytes_per_s`` (per direction) x 2.

        ``link`` is the catalog entry named by ``self.nvlink``; None (no NVLink) gives None.
        """
        if self.nvlink is None or link is None:
            return None
        return 2 * self.nvlink_links * link.bytes_per_s


class LinkTech(Entry):
    """One link technology; ``bytes_per_s`` is per direction for one unit (NVLink link, PCIe x16, 4x port)."""

    kind: LinkKind
    generation: str
    unit: str = Field(description="what one unit is: 'link', 'x16', '4x port', 'port'")
    bytes_per_s: BytesPerS = Field(description="data rate per direction of one unit")
    signal_bytes_per_s: BytesPerS | None = Field(None, description="raw signalling rate before encoding")
    encoding: str | None = None
    latency_s: Seconds = Field(description="nominal one-hop latency (link + endpoint), for alpha-beta models")
    year: int | None = None
    status: Literal["shipping", "roadmap"] = "shipping"
    max_domain_gpus: int | None = Field(None, ge=1, description="largest NVLink domain (NVLink only)")
    efficiency: Fraction = Field(
        1.0, description="fraction of bytes_per_s that collectives achieve at the application level (calibratable)"
    )
    tuning_as: str | None = Field(None, description="link whose per-generation collective tuning figures (NCCL's "
                                  "tables keyed by NVLink generation: protocol caps, NVLS efficiency, tree channels) "
                                  "this one takes; None: its own id")


class SecondTier(BaseModel):
    """What joining racks of an NVLink switch's systems into one domain adds (`catalog.joined_racks`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    price_fraction: SourcedFigure = Field(description="second tier and its optics as a fraction of the racks' price")
    power_w_per_rack: SourcedFigure = Field(description="watts the second tier adds per rack")


class Switch(Priced):
    kind: SwitchKind
    link: str = Field(description="link technology id of its ports")
    radix: int = Field(ge=2, description="ports at the link technology's rate")
    port_bytes_per_s: BytesPerS
    latency_s: Seconds = Field(description="port-to-port latency")
    sharp: bool = Field(False, description="in-network reduction (SHARP / NVLink SHARP)")
    sharp_version: str | None = None
    sharp_jobs: Count | None = Field(None, description="jobs that can hold a SHARP streaming aggregation tree through "
                                     "one switch at once (None: no limit known)")
    sharp_subnet_trees: Count | None = Field(None, description="streaming aggregation trees one fabric (subnet) can "
                                             "hold at once (None: no limit known)")
    second_tier: SecondTier | None = Field(None, description="NVLink switches: figures for joining racks into one "
                                           "NVLink domain through a second switch tier")
    status: Literal["shipping", "roadmap"] = Field("shipping", description="a roadmap switch builds a fabric only "
                                                   "when named (never a network's default switch)")
    optics: Literal["pluggable", "co-packaged"] = Field(
        "pluggable", description="co-packaged: the optical engines sit in the switch package (its power includes "
        "them), so a cable ending on it needs no pluggable transceiver at that end")
    optics_failure_factor: SourcedFigure | None = Field(
        None, description="co-packaged optics: interruptions of a link end on this switch relative to a pluggable "
        "transceiver's (None: 1, as pluggable)")


class NIC(Priced):
    link: str = Field(description="link technology id of its network ports")
    ports: int = Field(ge=1)
    port_bytes_per_s: BytesPerS
    host_pcie: str = Field(description="link technology id of its host interface")


class Cable(Priced):
    """A cable class for the bill of materials; price includes both transceivers for optical cables."""

    medium: Literal["copper", "optical"]
    bytes_per_s: BytesPerS | None = Field(None, description="data rate per direction the cable class carries (its"
                                          " port speed); None (a schema 0.1 entry): never chosen by the bill of"
                                          " materials")
    max_length_m: float = Field(gt=0)
    transceivers: int = Field(0, ge=0, description="transceivers per cable (counted in the BOM)")


class System(Priced):
    """A node preset: what one server (or rack, for rack-scale systems) holds and how its GPUs connect."""

    gpu: str
    gpus_per_node: int = Field(ge=1)
    intra: Literal["nvswitch", "pcie"] = Field(description="how GPUs in a node talk: NVSwitch or PCIe only")
    nvlink_domain_gpus: int = Field(ge=1, description="GPUs in one NVLink domain (1 where there is none)")
    nvswitch: str | None = Field(None, description="switch id of the NVSwitch / NVLink Switch chips")
    nvswitch_chips: int = Field(0, ge=0)
    nic: str
    nics_per_node: int = Field(ge=1, description="compute-fabric NICs (one per GPU on rail designs)")
    pcie: str = Field(description="link technology id of the node's PCIe generation")
    pcie_switches: int = Field(0, ge=0)
    pcie_switch: str | None = Field(None, description="switch id of the PCIe switch chips (needed when any)")
    cpus_per_node: int = Field(2, ge=1)
    cpu_link: str | None = Field(None, description="link technology id between CPU sockets (UPI, xGMI)")
    cpu_links: int = Field(0, ge=0, description="socket-to-socket links between each pair of CPUs")
    cpu_gpu_link: str | None = Field(None, description="link technology id of a direct CPU-GPU link (NVLink-C2C)")
    rails: int | None = Field(None, ge=1, description="rails of a rail-optimized fabric (default: nics_per_node);"
                              " NIC i of a node sits on rail i % rails")
    nvlink_bridge_gpus: int | None = Field(
        None, ge=2,
        description="GPUs joined by NVLink bridges in groups of this size (2: H100 NVL pairs), GPU g in group"
                    " g // nvlink_bridge_gpus, each GPU's NVLink links all within its group; intra stays pcie"
                    " between groups and nvlink_domain_gpus stays 1 (a bridge is not a switched NVLink domain);"
                    " None: no bridges")
    nvlink_rack_gpus: int | None = Field(
        None, ge=2, description="GPUs per rack when the NVLink domain spans racks through a second NVLink switch "
        "tier (NVL576: 8 racks of 72); None: one tier")
    spare_unit_gpus: int | None = Field(
        None, ge=1, description="GPUs of the field-replaceable unit a hot spare stands in for (a rack's compute "
        "tray); None: the whole node")
    status: Literal["shipping", "roadmap"] = Field("shipping", description="roadmap systems are searched only "
                                                   "when named")
    storage_nic: str | None = Field(None, description="catalog NIC id of the node's storage / in-band NICs")
    storage_ports: int = Field(0, ge=0, description="ports per node on a separate storage network")
    rack_units: int | None = None
    cooling: Literal["air", "liquid"] = Field("air", description="what the system needs to be cooled by: air, or "
                                              "liquid (direct-to-chip); a liquid-cooled hall hosts both")
    rated_power_w: Watts | None = Field(None, description="the node's power with its GPUs at their rated board power, "
                                        "where a GPU power limit (--gpu-power) lowered power_w; None: power_w is "
                                        "the rating")


Protocol = Literal["LL", "LL128", "Simple"]
HopClass = Literal["nvlink", "pcie", "net"]


class ProtocolParams(BaseModel):
    """How a protocol uses the wire: payload fraction and an optional cap on the per-rank bus bandwidth."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bandwidth_efficiency: Fraction
    max_busbw_bytes_per_s: BytesPerS | None = None
    max_busbw_scale_by_link: dict[str, float] = Field(
        default_factory=dict, description="factor on max_busbw_bytes_per_s per intra-node link id (GPU generation)")


class Tuning(Entry):
    """Free parameters of the collective cost model (NCCL-style latencies and efficiencies), calibratable."""

    protocols: dict[Protocol, ProtocolParams]
    base_latency_s: dict[str, dict[Protocol, Seconds]] = Field(
        description="per algorithm and protocol: fixed cost of one collective call"
    )
    hop_latency_s: dict[HopClass, dict[str, dict[Protocol, Seconds]]] = Field(
        description="per hop class (nvlink, pcie, net), algorithm and protocol: cost of one pipeline step"
    )
    nvls_efficiency: Fraction = Field(description="NVLink SHARP throughput relative to the NVLink ring rate")
    tree_efficiency: Fraction = Field(description="tree/CollNet throughput relative to the link rate")
    p2p_efficiency: Fraction = Field(description="point-to-point (send/recv, all-to-all) throughput vs link rate")
    net_overhead_s: Seconds = Field(description="per-step network post overhead added to intra-node steps")
    launch_s: Seconds = Field(0.0, description="host time to launch one GPU's collective kernel (cudaLaunchKernel"
                              " through NCCL's enqueue); nccl-tests queues iterations, so it is a floor, not a sum")
    launch_scale_by_host_link: dict[str, float] = Field(
        default_factory=dict, description="factor on launch_s per host CPU, keyed by the system's cpu_link (or"
        " cpu_gpu_link) id; 1 where absent")
    single_node_gpus_per_thread: Literal["all", "one"] = Field(
        "all", description="how nccl-tests is run on one host (a server, or one compute tray of a rack-scale"
        " node): 'all' = one thread drives every GPU (-g N, so the host launches N kernels per iteration), 'one' ="
        " one process per GPU (mpirun -np N); a group over several hosts always runs one process per GPU")
    nvls_efficiency_by_nvlink: dict[str, Fraction] = Field(
        default_factory=dict, description="NVLS throughput relative to the NVLink rate per NVLink generation (link"
        " id); nvls_efficiency where absent")
    nvls_efficiency_switch_system_by_nvlink: dict[str, Fraction] = Field(
        default_factory=dict, description="NVLS throughput relative to the NVLink rate on a rack-scale NVLink Switch"
        " System (every NVLink link of a GPU on its own switch chip: NVL72), per NVLink generation;"
        " nvls_efficiency_by_nvlink where absent")
    nvls_fill_per_rank_s: Seconds = Field(
        0.0, description="NVLS pipeline fill per rank of the NVLink domain: the cap of the exposed second phase"
        " (multicast after reduce) of a pipeline that is not yet full")
    nccl_tree_algbw_ratio: Fraction = Field(
        0.5, description="NCCL tuner's tree busBw-to-algbw ratio (it prices 2S per direction); used to pick"
        " the algorithm as NCCL does, not for the time")
    net_reference_link_latency_s: Seconds = Field(
        0.0, description="latency of one NIC-switch link of the fabric the NET hop figures were measured on")
    net_reference_switch_latency_s: Seconds = Field(
        0.0, description="port-to-port latency of one switch of that reference fabric")
    scale_up_reference_path_latency_s: Seconds = Field(
        0.0, description="one-way GPU-switch-GPU path (two NVLink links and an NVSwitch, catalog latencies) that the "
        "nvlink hop figures include; another scale-up domain adds its path's difference (0: none added)")
    dispatch_kernel_sms: dict[str, int] = Field(
        default_factory=dict, description="SMs the MoE token dispatch/combine kernels occupy while they run beside"
        " compute (EP communication overlap), per dispatcher (alltoall, deepep); 0 where absent")
    collective_kernel_sms: int = Field(
        0, ge=0, description="SMs an NCCL collective kernel (one CTA per channel) holds while it runs beside compute"
        " (overlapped gradient reduction, parameter gathers, context-parallel exchanges): the compute beside it runs"
        " on the rest of the GPU's SMs; 0: no contention")
    tree_net_channels_by_nvlink: dict[str, int] = Field(
        default_factory=dict, description="NICs per node that the tree and NVLS-tree cross the network with (one"
        " head rank per channel, each on its own NIC), per NVLink generation (link id); every NIC of the group"
        " where absent")

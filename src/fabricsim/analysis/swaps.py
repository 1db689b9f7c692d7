"""Named cluster swaps for `whatif` (``system=gb200-nvl72``, ``scale-up=ualink``, ``ib=xdr``, ``oversubscription=1``,
``fabric=rail-only``,
``planes=2``: the same step, a different bill; and what changes
goodput and the storage and spares billed: ``storage=2x``, a tier id or a storage network (separate, converged,
none), ``spares=2%`` or a node count, ``checkpoint=async``, ``mtbf=2``): parsed from the command line and applied
to a scenario, keeping the GPU count."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fabricsim.analysis.scenario import Scenario
from fabricsim.collectives import fabric_nic, resolve_fabric_link
from fabricsim.errors import SpecError
from fabricsim.training import spare_fields

SWAP_KEYS = ("system", "ib", "oversubscription", "fabric", "planes", "storage", "checkpoint", "mtbf", "spares",
             "repair", "routing", "cc", "qos", "sharp", "gpu-power", "cooling", "scale-up")
FLOW_KEYS = ("routing", "cc", "qos")
"""swaps of how the fabric shares its links: only the flow simulator routes and shares them (--sim flow)"""
REPAIRS = ("gpu", "link", "all")
"""what `repair=` replaces of the parts --degrade slowed: the straggling GPU's node (by a spare node), the slow NIC
link (by a new cable and its transceivers), or both"""
SWAP_FABRICS = ("fat-tree", "rail-only")
"""scale-out designs a swap can price: NCCL keeps inter-node traffic on the destination's rail on both (PXN), so
the collective model times a step the same and the swap changes the bill; so do planes, which keep every NIC's
bandwidth (NCCL spreads its channels over a NIC's ports)"""
GOODPUT_KEYS = ("storage", "checkpoint", "mtbf", "spares")
STORAGE_NETWORK_VALUES = ("separate", "converged", "none")


@dataclass(frozen=True)
class Swap:
    """One change to the cluster: which part (``key``) becomes what (``value``)."""

    key: str
    value: str

    @property
    def label(self) -> str:
        return f"{self.key}={self.value}"

    @property
    def changes_goodput_only(self) -> bool:
        """True for a swap of the goodput options (storage, checkpoint, mtbf, spares), not of the cluster's parts."""
        return self.key in GOODPUT_KEYS


def parse_swap(text: str) -> Swap:
    """``'ib=xdr'`` -> Swap('ib', 'xdr'); anything else is a SpecError naming the allowed keys."""
    key, sep, value = text.partition("=")
    key, value = key.strip().lower(), value.strip()
    if not sep or not value:
        raise SpecError(f"{text!r} is not KEY=VALUE; keys: {', '.join(SWAP_KEYS)}", field="--swap")
    if key not in SWAP_KEYS:
        raise SpecError(f"unknown swap {key!r} in {text!r}; keys: {', '.join(SWAP_KEYS)}", field="--swap")
    return Swap(key, value.lower())


def apply_swap(base: Scenario, swap: Swap) -> Scenario:
    """The scenario with one part swapped; the GPU count stays, so a system swap recomputes the nodes."""
    if swap.key in GOODPUT_KEYS:
        return _goodput_swap(base, swap)
    if swap.key == "repair":
        return _repair(base, swap)
    if swap.key in ("gpu-power", "cooling"):
        return _facility_swap(base, swap)
    if swap.key in (*FLOW_KEYS, "sharp"):
        return _fabric_feature(base, swap)
    if swap.key == "fabric":
        if swap.value not in SWAP_FABRICS:
            raise SpecError(f"{swap.label}: fabric is {' or '.join(SWAP_FABRICS)}", field="--swap")
        return replace(base, fabric_kind=swap.value)
    if swap.key == "planes":
        try:
            planes = int(swap.value)
        except ValueError:
            planes = 0
        if planes not in (1, 2, 4, 8):
            raise SpecError(f"{swap.label}: planes is 1, 2, 4 or 8", field="--swap")
        return replace(base, planes=planes)
    if swap.key == "scale-up":
        return _scale_up(base, swap)
    if swap.key == "system":
        system = base.catalog.system(swap.value)
        if base.gpus % system.gpus_per_node and base.gpus > system.gpus_per_node:
            raise SpecError(f"{swap.label}: {base.gpus} GPUs do not fill whole {system.id} nodes of "
                            f"{system.gpus_per_node}", field="--swap")
        return replace(base, system_id=system.id, nic=None)
    if swap.key == "ib":
        try:
            link = resolve_fabric_link(base.catalog, base.system, swap.value)
        except SpecError as exc:
            raise SpecError(f"{swap.label}: {exc}", field="--swap") from None
        own = base.catalog.system(base.system_id)
        nic = fabric_nic(base.catalog, own, link)  # the NIC the collective model runs that fabric on
        return replace(base, fabric=link.id, nic=None if nic.id == own.nic else nic.id)
    try:
        ratio = float(swap.value)
    except ValueError:
        ratio = float("nan")
    if not 1.0 <= ratio < float("inf"):
        raise SpecError(f"{swap.label}: oversubscription must be a ratio >= 1 (1 = non-blocking)", field="--swap")
    return replace(base, oversubscription=ratio)


def _goodput_swap(base: Scenario, swap: Swap) -> Scenario:
    """Storage (``2x``: its rates doubled, its servers sized to them; a catalog tier; or a storage network), hot
    spares, checkpoint mode, or every MTBF x a factor."""
    if base.goodput is None:
        raise SpecError(f"{swap.label} changes only goodput, which --no-goodput leaves out", field="--swap")
    spec = base.goodput
    if swap.key == "checkpoint":
        if swap.value not in ("sync", "async", "memory"):
            raise SpecError(f"{swap.label}: checkpoint is sync, async or memory", field="--swap")
        return replace(base, goodput=spec.model_copy(update={"checkpoint": swap.value}))
    if swap.key == "spares":
        fields = spare_fields(swap.value, "--swap")
        return replace(base, goodput=spec.model_copy(update={"spares": None, "spare_fraction": None} | fields))
    if swap.key == "storage" and swap.value in STORAGE_NETWORK_VALUES:
        return replace(base, goodput=spec.model_copy(update={"storage_network": swap.value}))
    if swap.key == "storage" and not swap.value.endswith("x"):
        try:
            base.catalog.storage_tier(swap.value)
        except SpecError as exc:
            raise SpecError(f"{swap.label}: {exc}", field="--swap") from None
        return replace(base, goodput=spec.model_copy(update={"storage": swap.value}))
    text = swap.value.removesuffix("x")
    try:
        factor = float(text)
    except ValueError:
        factor = float("nan")
    if not 0 < factor < float("inf"):
        raise SpecError(f"{swap.label}: a positive finite factor (2 or 2x)", field="--swap")
    if swap.key == "mtbf":
        return replace(base, goodput=spec.model_copy(update={"mtbf_scale": spec.mtbf_scale * factor}))
    return replace(base, goodput=spec.model_copy(update={"storage_scale": spec.storage_scale * factor}))


def _repair(base: Scenario, swap: Swap) -> Scenario:
    """The degraded parts replaced: a straggler's node by a spare node (the system's price), a slow NIC link by a
    new cable of the fabric's rate (its catalog price, transceivers included)."""
    if swap.value not in REPAIRS:
        raise SpecError(f"{swap.label}: repair is {', '.join(REPAIRS)}", field="--swap")
    out = base
    if swap.value in ("gpu", "all"):
        if base.healthy_catalog is None:
            raise SpecError(f"{swap.label}: no GPU is slow; --degrade gpu=F@RANK or node=F@NODE makes one",
                            field="--swap")
        price = base.system.price_usd
        out = replace(out, catalog=base.healthy_catalog, healthy_catalog=None,
                      repair_usd=out.repair_usd + (price or 0.0),
                      repair_missing=out.repair_missing + (() if price is not None else (f"{base.system_id} price",)))
    if swap.value in ("link", "all"):
        if base.network_fraction >= 1.0:
            raise SpecError(f"{swap.label}: no NIC link is slow; --degrade link=F@nodeN makes one", field="--swap")
        from fabricsim.topology import cable_class

        link = base.link()
        cable = cable_class(base.catalog, "optical", min(link.bytes_per_s, base.catalog.nic(base.system.nic)
                                                          .port_bytes_per_s))
        out = replace(out, network_fraction=1.0, repair_usd=out.repair_usd + (cable.price_usd or 0.0),
                      repair_missing=out.repair_missing + (() if cable.price_usd is not None
                                                           else (f"{cable.id} price",)))
    return out


def _fabric_feature(base: Scenario, swap: Swap) -> Scenario:
    """How the fabric shares and reduces: routing (ecmp, adaptive, spray), its behaviour under congestion (a
    catalog `cc`), traffic classes (qos=on|off) and SHARP (sharp=on|off); the same switches, so the same bill."""
    cluster = base.template if base.template is not None else base.cluster()
    if swap.key in ("qos", "sharp") and swap.value not in ("on", "off"):
        raise SpecError(f"{swap.label}: {swap.key} is on or off", field="--swap")
    if swap.key in FLOW_KEYS and cluster.sim != "flow":
        raise SpecError(f"{swap.label}: only the flow simulator routes and shares links; add --sim flow",
                        field="--swap")
    if swap.key == "routing":
        from fabricsim.network import check_routing

        try:
            routing = check_routing(swap.value)
        except SpecError as exc:
            raise SpecError(f"{swap.label}: {exc.message}", field="--swap") from None
        return replace(base, template=replace(cluster, routing=routing))
    if swap.key == "qos":
        return replace(base, template=replace(cluster, qos=swap.value == "on"))
    if swap.key == "sharp":
        switch = base.catalog.switch(fabric_switch_of(base))
        if swap.value == "on" and not switch.sharp:
            raise SpecError(f"{swap.label}: {switch.id} does not reduce in the network", field="--swap")
        return replace(base, template=replace(cluster, sharp=swap.value == "on"))
    try:
        behaviour = base.catalog.congestion_control(swap.value)
    except SpecError as exc:
        raise SpecError(f"{swap.label}: {exc.message}", field="--swap") from None
    kind = base.link().kind
    if not behaviour.runs_on(kind):
        raise SpecError(f"{swap.label}: {behaviour.id} runs on {behaviour.fabric} fabrics, this one is {kind}",
                        field="--swap")
    return replace(base, template=replace(cluster, congestion=behaviour))


def fabric_switch_of(base: Scenario) -> str:
    """The catalog switch the scenario's fabric is built of."""
    from fabricsim.topology import resolve_switch

    return resolve_switch(base.link().id, base.catalog).id


def _facility_swap(base: Scenario, swap: Swap) -> Scenario:
    """``gpu-power=W``: every GPU of the cluster limited to W (its clock along the GPU's power curve, its systems'
    power down by the GPUs' share, `catalog.with_gpu_power`); ``cooling=air|liquid``: the hall's cooling class (its
    PUE, rack limit and floor; a class that cannot host the system says so in the swap's row)."""
    if swap.key == "cooling":
        try:
            hall = base.catalog.cooling_class(swap.value, field="--swap")
        except SpecError as exc:
            raise SpecError(f"{swap.label}: {exc.message}", field="--swap") from None
        return replace(base, cooling=hall.id)
    from fabricsim.catalog import with_gpu_power
    from fabricsim.units import parse_power

    try:
        text = swap.value.strip()
        watts = parse_power(float(text) if text.replace(".", "", 1).isdigit() else text.upper().replace("KW", "kW"),
                            field="--swap")
        gpu = base.system.gpu
        catalog = with_gpu_power(base.catalog, gpu, watts, "--swap")
        healthy = None if base.healthy_catalog is None else with_gpu_power(base.healthy_catalog, gpu, watts, "--swap")
    except SpecError as exc:
        raise SpecError(f"{swap.label}: {exc.message}", field="--swap") from None
    return replace(base, catalog=catalog, healthy_catalog=healthy)


def _scale_up(base: Scenario, swap: Swap) -> Scenario:
    """``scale-up=ualink-200g`` (or ``ualink``, ``sue``, a link id): the system's scale-up domain on that technology
    at the same per-GPU bandwidth, its switch's latency and in-switch reduction (`catalog.scale_up_variant`)."""
    from fabricsim.catalog import scale_up_variant

    try:
        catalog, system_id = scale_up_variant(base.catalog, base.system_id, swap.value)
        healthy = None if base.healthy_catalog is None else \
            scale_up_variant(base.healthy_catalog, base.system_id, swap.value)[0]
    except SpecError as exc:
        raise SpecError(f"{swap.label}: {exc.message}", field="--swap") from None
    return replace(base, catalog=catalog, healthy_catalog=healthy, system_id=system_id)

"""The candidate space: clusters (system x fabric x oversubscription x size) and, per cluster, plan shapes that
pass the divisibility rules; every rule here holds before any timing."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from fabricsim.catalog import Catalog, System, partial_system_id, power_of_two_part, split_partial_id
from fabricsim.collectives import resolve_fabric_link
from fabricsim.errors import SpecError, cli_field
from fabricsim.model import ModelSpec
from fabricsim.sizing.spec import RECOMPUTE, SizingSpec
from fabricsim.training import megatron_runs_interleaved

MAX_PP = 64
MAX_CP = 8
MAX_VPP = 8
MBS = (1, 2, 4, 8, 16)  # SC21 Table 1 ran micro-batches up to 16 (Megatron-LM examples/sc21/run_table_1.sh)


@dataclass(frozen=True)
class ClusterChoice:
    """One candidate cluster: a priced system, its scale-out network, oversubscription and size."""

    system: str
    fabric: str
    link: str
    oversubscription: float
    nodes: int
    gpus: int
    kind: str = "fat-tree"
    """scale-out design: fat-tree, rail-only or 2-plane (``fabric`` then names it: ``ndr rail-only``)"""
    gpu_power: float | None = None
    """the GPUs' board power limit in W (`--gpu-power-points`; None: the catalog's, the rating or --gpu-power)"""

    @property
    def chunk_id(self) -> str:
        """Stable id of the chunk of work this cluster is (results and resume key on it)."""
        power = "" if self.gpu_power is None else f"|{self.gpu_power:g}W"
        return f"{self.system}|{self.fabric}|{self.oversubscription:g}|{self.nodes}{power}"


@dataclass(frozen=True)
class Shape:
    """A plan without its global batch: the knobs that fix the per-micro-batch and per-step terms."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    etp: int
    vpp: int
    mbs: int
    recompute: str
    zero: int
    precision: str


def priced_systems(catalog: Catalog) -> tuple[str, ...]:
    """Catalog systems with a price that ship today (the default candidates; a roadmap system when named)."""
    return catalog.priced_system_ids()


def unit_gpus(system: System) -> int:
    """GPUs in the system's natural unit of purchase: a node, or a whole NVLink domain where one spans nodes
    (NVL72: a 72-GPU rack)."""
    per = system.gpus_per_node
    domain = system.nvlink_domain_gpus
    return math.lcm(per, domain) if domain > per else per


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _whole_units(g: int, unit: int) -> set[int]:
    """The whole-unit counts at or next to ``g`` GPUs: ``g`` itself when it is whole, else one each side."""
    if g % unit == 0:
        return {g // unit}
    return {n for n in (g // unit, g // unit + 1) if n >= 1}


def _pow2_units(g: int, unit: int) -> int:
    """The power-of-two unit count nearest ``g`` GPUs (lets power-of-two batches divide data parallelism)."""
    return int(2 ** max(0, round(math.log2(max(g / unit, 1.0)))))


def unit_counts(spec: SizingSpec, system: System) -> tuple[int, ...]:
    """Whole units (nodes, or NVLink-domain racks) searched for a system. A list of GPU counts: each count
    rounded to whole units (one each side when it is not whole) and, for units that are not a power of two, the
    nearest power-of-two unit count. A range ``lo..hi``: the same for its ends and the powers of two inside it,
    kept inside the range (its ends rounded inwards), plus every power-of-two unit count inside it; when no
    whole unit falls inside, the nearest one each side. A handful of counts per system, however wide the range."""
    unit = unit_gpus(system)
    targets = spec.gpus or (1024, 2048, 4096, 8192, 16384)
    pow2_unit = _is_power_of_two(unit)
    counts: set[int] = set()
    for g in targets:
        counts |= _whole_units(g, unit)
        if not pow2_unit:
            counts.add(_pow2_units(g, unit))
    if spec.gpus_range is None:
        return tuple(sorted(counts))
    lo, hi = spec.gpus_range
    first, last = -(-lo // unit), hi // unit
    if first > last:  # no whole unit inside: the nearest each side
        return tuple(sorted({n for n in (lo // unit, first) if n >= 1}))
    inside = {n for n in counts if first <= n <= last} | {first, last}
    k = 1
    while k <= last:
        if k >= first and not pow2_unit:
            inside.add(k)
        k *= 2
    return tuple(sorted(inside))


def node_counts(spec: SizingSpec, system: System) -> tuple[int, ...]:
    """Node counts for a system: ``nodes`` as given; else `unit_counts` in nodes."""
    if spec.nodes is not None:
        return spec.nodes
    per_unit = unit_gpus(system) // system.gpus_per_node
    return tuple(n * per_unit for n in unit_counts(spec, system))


def _odd_part(n: int) -> int:
    while n % 2 == 0 and n > 0:
        n //= 2
    return n


def search_system(catalog: Catalog, system_id: str) -> System:
    """A system ``--systems`` names, as every command reads a system id (`Catalog.system`: ``id``, ``id@D`` joined
    racks, ``id/N`` partly used nodes); errors name ``--systems``."""
    try:
        return catalog.system(system_id)
    except SpecError as exc:
        raise cli_field(exc, {"system": "--systems"}) from None


def clusters(spec: SizingSpec, catalog: Catalog) -> list[ClusterChoice]:
    """Every candidate cluster, in a fixed order; unknown systems or fabrics are a SpecError. A rack-scale system
    whose nodes are not a power of two GPUs (NVL72) is also searched at a power of two GPUs per node (``/64``),
    as NVIDIA runs 64- to 512-GPU jobs on such racks: power-of-two jobs then need no whole 72-GPU racks."""
    from fabricsim.sizing.power_points import system_points

    systems = spec.systems if spec.systems is not None else priced_systems(catalog)
    out = []
    for sid in systems:
        named = search_system(catalog, sid)
        points = system_points(spec, catalog, named.id)[0]
        base, used = split_partial_id(sid.strip().lower())
        part = power_of_two_part(named) if used is None else None
        for system in (named, *([catalog.system(partial_system_id(base, part))] if part else [])):
            for fabric in spec.fabrics:
                link = resolve_fabric_link(catalog, system, fabric).id
                for kind in spec.fabric_kinds:
                    label = fabric if kind == "fat-tree" else f"{fabric} {kind}"
                    for os in spec.oversubscription:
                        for n in node_counts(spec, system):
                            out += [ClusterChoice(system.id, label, link, float(os), n, n * system.gpus_per_node,
                                                  kind, watts) for watts in points]
    return out


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _tp_values(model: ModelSpec, spec: SizingSpec, system: System) -> list[int]:
    domain = max(system.nvlink_domain_gpus, 1) if system.nvlink_domain_gpus > 1 else system.gpus_per_node
    limit = domain * spec.tp_max_domains
    values = spec.knobs.tp or tuple(t for t in (2**k for k in range(8)) if t <= limit)
    ok = []
    for t in values:
        if model.heads % t or (model.kv_heads % t and t % model.kv_heads):
            continue
        if model.dense_layers and model.ffn_hidden % t:
            continue
        if model.moe is not None and model.expert_ffn_hidden % t:
            continue
        ok.append(t)
    return ok


def _pp_values(model: ModelSpec, spec: SizingSpec, gpus: int) -> list[int]:
    """Powers of two, divisors of the layer count, and the GPU count's odd part times powers of two (so a
    72-GPU-rack cluster can still run power-of-two data parallelism)."""
    if spec.knobs.pp is not None:
        return [p for p in spec.knobs.pp if p <= model.layers]
    pow2 = {2**k for k in range(7)}
    odd = _odd_part(gpus)
    extra = {odd * k for k in pow2} if odd > 1 else set()
    return sorted(p for p in pow2 | extra | set(_divisors(model.layers, MAX_PP)) if p <= min(model.layers, MAX_PP))


def _vpp_values(model: ModelSpec, spec: SizingSpec, pp: int) -> list[int]:
    if pp == 1:
        return [1]
    values = spec.knobs.vpp or tuple(_divisors(model.layers // pp, MAX_VPP))
    return [v for v in values if model.layers >= pp * v and (v == 1 or megatron_runs_interleaved(pp))]


def _ep_values(model: ModelSpec, spec: SizingSpec, tp: int, dp: int, cp: int) -> list[tuple[int, int]]:
    """(ep, etp) pairs: ep divides the experts, etp (default candidates tp and 1: Megatron-Core's default and MoE
    parallel folding's) the expert width, and etp * ep the stage's tp * cp * dp GPUs."""
    if model.moe is None:
        return [(1, tp)]
    values = spec.knobs.ep or tuple(_divisors(model.moe.experts, 256))
    etps = spec.knobs.etp or tuple(dict.fromkeys((tp, 1)))
    return [(e, f) for e in values for f in etps if model.moe.experts % e == 0 and model.expert_ffn_hidden % f == 0
            and (tp * dp * cp) % (e * f) == 0]


def _zero_values(spec: SizingSpec, pp: int) -> list[int]:
    values = spec.knobs.zero or (0, 1, 2, 3)
    return [z for z in values if z < 3 or pp == 1]


def shapes(model: ModelSpec, spec: SizingSpec, system: System, fp8: bool, gpus: int) -> Iterator[Shape]:
    """Plan shapes for ``gpus`` GPUs of ``system`` that pass the divisibility rules (heads, layers, sequence,
    experts; tp*pp*cp divides the GPUs), in a fixed order."""
    precisions = spec.knobs.precision or (("bf16", "fp8") if fp8 else ("bf16",))
    precisions = tuple(p for p in precisions if p == "bf16" or fp8)
    recomputes = spec.knobs.recompute or RECOMPUTE
    mbs_values = spec.knobs.mbs or MBS
    sp = spec.fixed.get("sequence_parallel")
    for tp in _tp_values(model, spec, system):
        for cp in spec.knobs.cp or tuple(c for c in (1, 2, 4, 8) if c <= MAX_CP):
            if cp > 1 and spec.seq % (2 * cp):
                continue
            if tp > 1 and sp is not False and (spec.seq // cp) % tp:
                continue
            for pp in _pp_values(model, spec, gpus):
                if gpus % (tp * pp * cp):
                    continue
                dp = gpus // (tp * pp * cp)
                for ep, etp in _ep_values(model, spec, tp, dp, cp):
                    for vpp in _vpp_values(model, spec, pp):
                        for zero in _zero_values(spec, pp):
                            for precision in precisions:
                                for recompute in recomputes:
                                    for mbs in mbs_values:
                                        yield Shape(tp, pp, dp, cp, ep, etp, vpp, mbs, recompute, zero,
                                                    precision)


def _listed(values: object) -> str:
    return ",".join(str(v) for v in values) if isinstance(values, (list, tuple)) else str(values)


def no_shape_reason(model: ModelSpec, spec: SizingSpec, system: System, fp8: bool, gpus: int) -> str:
    """Why `shapes` yields no plan for ``gpus`` GPUs: the first divisibility rule that rules out every plan."""
    tps = _tp_values(model, spec, system)
    if not tps:
        asked = _listed(spec.knobs.tp) if spec.knobs.tp else "powers of two up to the NVLink domain"
        return (f"no tp in {asked} divides the model's {model.heads} attention heads, {model.kv_heads} KV heads "
                "and FFN width")
    if spec.knobs.precision and not any(p == "bf16" or fp8 for p in spec.knobs.precision):
        return f"{system.gpu} has no FP8 and --precision asks only for fp8"
    cps = spec.knobs.cp or tuple(c for c in (1, 2, 4, 8) if c <= MAX_CP)
    sp = spec.fixed.get("sequence_parallel")
    pairs = [(tp, cp) for tp in tps for cp in cps if not (cp > 1 and spec.seq % (2 * cp))
             and not (tp > 1 and sp is not False and (spec.seq // cp) % tp)]
    if not pairs:
        return f"seq {spec.seq} divides by no 2 cp (cp {_listed(cps)}) x tp (tp {_listed(tps)})"
    pps = _pp_values(model, spec, gpus)
    if not pps:
        return f"no pp in {_listed(spec.knobs.pp)} is at most the model's {model.layers} layers"
    fits = [(tp, cp, pp) for tp, cp in pairs for pp in pps if gpus % (tp * pp * cp) == 0]
    if not fits:
        return (f"tp x pp x cp does not divide the GPUs (tp {_listed(sorted({t for t, _ in pairs}))}, pp "
                f"{_listed(pps) if spec.knobs.pp else 'searched'}, cp {_listed(sorted({c for _, c in pairs}))})")
    if not any(_ep_values(model, spec, tp, gpus // (tp * pp * cp), cp) for tp, cp, pp in fits):
        return (f"no ep divides the model's experts with etp x ep dividing tp x cp x dp (ep "
                f"{_listed(spec.knobs.ep or 'divisors')}, etp {_listed(spec.knobs.etp or 'tp and 1')})")
    if not any(_vpp_values(model, spec, pp) for _, _, pp in fits):
        return f"no vpp in {_listed(spec.knobs.vpp)} splits the layers evenly at these pp (or Megatron-LM does not "\
               "interleave them)"
    if not any(_zero_values(spec, pp) for _, _, pp in fits):
        return "ZeRO 3 runs only without pipeline parallelism (pp 1)"
    return "no plan shape passes the divisibility rules"

"""What a collective gets of a shared fabric: SHARP aggregation trees as a finite switch resource, and a link's share
beside a neighbour's traffic. SHARP trees: a switch holds streaming aggregation trees for only so many
jobs at once (one on NVIDIA Quantum, one per port on Quantum-2: the catalog's `sharp_jobs`), and a fabric only so
many trees (`sharp_subnet_trees`). A job that gets no tree runs NCCL's next choice (ring or tree), as NCCL does when
the SHARP plugin's tree request fails."""

from __future__ import annotations

from fabricsim.catalog import Switch


def sharp_refusal(switch: Switch | None, jobs: int) -> str | None:
    """Why a job gets no SHARP streaming tree when `jobs` jobs (itself included) want one through the same leaf
    switches; None when it gets one."""
    if switch is None or not switch.sharp:
        return f"{switch.id if switch else 'this fabric'}'s switches do not reduce in the network (no SHARP)"
    per_switch = switch.sharp_jobs.value if switch.sharp_jobs is not None else None
    if per_switch is not None and jobs > per_switch:
        return (f"{jobs} jobs want SHARP trees through the same {switch.id} switches, which hold {per_switch} at once "
                f"(catalog switches {switch.id} sharp_jobs)")
    subnet = switch.sharp_subnet_trees.value if switch.sharp_subnet_trees is not None else None
    if subnet is not None and jobs > subnet:
        return f"{jobs} jobs want SHARP trees; a fabric of {switch.id} holds {subnet} (sharp_subnet_trees)"
    return None


def background_share(load: float, weights: tuple[float, float] = (1.0, 1.0)) -> float:
    """The share of a network link a collective gets beside a neighbour whose traffic wants `load` of it (0-1),
    under work-conserving weighted arbitration of (own, neighbour) `weights`: what the neighbour leaves, or the
    collective's weighted share when both want more (equal weights: one shared queue, flow against flow)."""
    own, other = weights
    return max(1.0 - load, own / (own + other))

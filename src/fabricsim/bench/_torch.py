"""Lazy access to torch: the ``bench`` extra is optional, so nothing imports torch until a measurement runs."""

from __future__ import annotations

from types import ModuleType

from fabricsim.errors import SpecError

INSTALL_HINT = "pip install 'fabricsim[bench]'"


def require_torch() -> ModuleType:
    """The ``torch`` module with ``torch.distributed`` available, or a SpecError saying how to install it."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise SpecError(f"benchmarks need torch, which is not installed ({exc}); {INSTALL_HINT}") from exc
    if not dist.is_available():
        raise SpecError(f"this torch build ({torch.__version__}) has no torch.distributed; {INSTALL_HINT}")
    return torch

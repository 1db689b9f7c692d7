"""Issue 43 item 17, the rest: `collective` names the network `ib=` as `topology`, `train` and `whatif` do (the old
`fabric=` still works, deprecated), and a design name given to `whatif` is a SpecError, not a TypeError."""

from __future__ import annotations

import warnings

import pytest

import fabricsim


def test_collective_takes_ib_and_the_old_fabric_spelling_alike() -> None:
    new = fabricsim.collective(nodes=2, ib="hdr", min_size="1M", max_size="1M").to_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = fabricsim.collective(nodes=2, fabric="hdr", min_size="1M", max_size="1M").to_dict()
    assert new["rows"] == old["rows"]
    assert new["inputs"]["ib"] == "hdr"


def test_collective_fabric_design_goes_to_the_design() -> None:
    out = fabricsim.collective(nodes=2, fabric="rail-only", sim="flow", min_size="1M", max_size="1M").to_dict()
    assert out["inputs"]["fabric_kind"] == "rail-only"


def test_whatif_with_a_design_name_says_to_swap_it() -> None:
    with pytest.raises(fabricsim.SpecError, match="swap=\\['fabric=rail-only'\\]"):
        fabricsim.whatif(model="llama3-8b", gpus=16, tp=2, gbs=32, fabric="rail-only")


def test_executor_is_the_only_name_of_the_executor() -> None:
    """Issue 44 item 5: `size --engine serial` is refused, naming --executor (before: taken as the executor)."""
    from typer.testing import CliRunner

    from fabricsim.cli import app

    out = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "64", "--systems",
                                   "dgx-h100", "--fabrics", "ndr", "--engine", "serial"])
    assert out.exit_code == 2
    assert "--executor serial" in out.output

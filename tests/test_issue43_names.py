"""Issue 43 (names, overlays, API arguments): one resolver for network names on every command, catalog overlays
written before the storage fields, partial overlay entries, `size` with joined racks and --calibration, and the
API's keyword arguments in their natural Python types."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import fabricsim
from fabricsim.catalog import default_catalog, load_catalog, network_id, network_link_id
from fabricsim.cli import app
from fabricsim.collectives import resolve_fabric_link
from fabricsim.errors import SpecError
from fabricsim.topology import resolve_switch

SPELLINGS = {"hdr": "ib-hdr", "ndr": "ib-ndr", "xdr": "ib-xdr", "gdr": "ib-gdr", "HDR": "ib-hdr", "NDR": "ib-ndr",
             "ib-ndr": "ib-ndr", "IB-XDR": "ib-xdr", "400g": "eth-400g", "800g": "eth-800g", "400G": "eth-400g",
             "eth-400g": "eth-400g", "eth-800g": "eth-800g", "qm9700": "ib-ndr", "sn5600": "eth-800g"}
TRAIN = ["--model", "llama3-8b", "--gpus", "16", "--tp", "8", "--gbs", "32"]


def _run(argv: list[str]) -> Any:
    result = CliRunner().invoke(app, argv)
    return result


def _json(argv: list[str]) -> dict[str, Any]:
    run = _run([*argv, "--json"])
    assert run.exit_code == 0, run.output
    doc: dict[str, Any] = json.loads(run.stdout)
    doc.pop("inputs")
    doc.pop("wall_s", None)  # how long a simulation took, not what it found
    return doc


# ---- item 9: one resolver for network names ---------------------------------------------------------------------

@pytest.mark.parametrize(("name", "link"), SPELLINGS.items())
def test_every_spelling_resolves_to_one_link_on_both_paths(name: str, link: str) -> None:
    catalog = default_catalog()
    system = catalog.system("dgx-h100")
    assert network_link_id(catalog, name) == link
    assert resolve_fabric_link(catalog, system, name).id == link
    assert resolve_switch(name, catalog).link == link  # the storage bill's path


def test_unknown_and_non_network_names_are_refused_with_the_option() -> None:
    catalog = default_catalog()
    with pytest.raises(SpecError, match=r"^--ib: unknown network 'ndx'; did you mean 'ndr'|^--ib: unknown network"):
        network_id(catalog, "ndx")
    with pytest.raises(SpecError, match="nvlink link, not a fabric link"):
        network_link_id(catalog, "nvlink4")


@pytest.mark.parametrize("name", ["ndr", "NDR", "400g", "qm9700"])
def test_train_and_whatif_take_short_network_names(name: str) -> None:
    canonical = network_link_id(default_catalog(), name)
    assert _json(["train", *TRAIN, "--ib", name]) == _json(["train", *TRAIN, "--ib", canonical])
    assert _json(["whatif", *TRAIN, "--ib", name]) == _json(["whatif", *TRAIN, "--ib", canonical])


@pytest.mark.parametrize(("argv", "name"), [
    (["topo", "--system", "dgx-h100", "--nodes", "4"], "ndr"),
    (["topo", "--system", "dgx-h100", "--nodes", "4"], "NDR"),
    (["topo", "--system", "dgx-h100", "--nodes", "4"], "800g"),
    (["collective", "--system", "dgx-h100", "--nodes", "2", "--min", "1M", "--max", "1M"], "hdr"),
    (["collective", "--system", "dgx-h100", "--nodes", "2", "--min", "1M", "--max", "1M"], "qm9700"),
    (["traffic", "--system", "dgx-h100", "--nodes", "4", "--pattern", "all_to_all", "--bytes", "1M"], "xdr"),
    (["infer", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--tp", "8", "--pp", "2",
      "--batch", "4"], "ndr"),
])
def test_other_commands_take_short_network_names_alike(argv: list[str], name: str) -> None:
    # topo keeps a switch id as the switch it names (its JSON echoes the spec's link); others run its link
    canonical = (network_id if argv[0] == "topo" else network_link_id)(default_catalog(), name)
    assert _json([*argv, "--ib", name]) == _json([*argv, "--ib", canonical])


def test_the_api_takes_short_network_names_and_ib() -> None:
    short = fabricsim.train(model="llama3-8b", gpus=16, tp=8, gbs=32, ib="ndr").to_dict()
    full = fabricsim.train(model="llama3-8b", gpus=16, tp=8, gbs=32, ib="ib-ndr").to_dict()
    with pytest.warns(DeprecationWarning, match="ib="):
        old = fabricsim.train(model="llama3-8b", gpus=16, tp=8, gbs=32, fabric="ndr").to_dict()
    for doc in (short, full, old):
        doc.pop("inputs")
    assert short == full == old
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fabric= naming a design is not the deprecated use
        fabricsim.train(model="llama3-8b", gpus=16, tp=8, gbs=32, fabric="fat-tree", ib="xdr")


def test_size_takes_network_spellings() -> None:
    run = _run(["size", "--model", "llama3-8b", "--gpus", "16", "--systems", "dgx-h100", "--fabrics",
                "NDR,qm9700,400g", "--fabric-kinds", "fat-tree", "--tp", "8", "--pp", "1", "--tokens", "10B",
                "--no-goodput", "--json"])
    assert run.exit_code == 0, run.output
    times: dict[str, set[float]] = {}
    for row in json.loads(run.stdout)["results"]:
        times.setdefault(row["fabric"], set()).add(row["time_to_train_s"])
    assert set(times) == {"NDR", "qm9700", "400g"}
    assert times["NDR"] == times["qm9700"]  # one network, two names


# ---- item 10: overlays written before the storage fields, partial entries, size --calibration ---------------------

def _pre_storage_system(tmp_path: Path, new_id: str) -> Path:
    """An overlay with dgx-h100's packaged entry as it was before storage_nic / storage_ports, under ``new_id``."""
    from importlib import resources

    text = resources.files("fabricsim.catalog.data").joinpath("systems.yaml").read_text(encoding="utf-8")
    entry = dict(next(s for s in yaml.safe_load(text)["systems"] if s["id"] == "dgx-h100"))
    entry.pop("storage_nic")
    entry.pop("storage_ports")
    entry["id"] = new_id
    path = tmp_path / f"{new_id}.yaml"
    path.write_text(yaml.safe_dump({"systems": [entry]}), encoding="utf-8")
    return path


def test_a_pre_storage_system_runs_train_with_converged_storage_and_a_note(tmp_path: Path) -> None:
    overlay = str(_pre_storage_system(tmp_path, "my-h100"))
    run = _run(["train", *TRAIN, "--system", "my-h100", "--calibration", overlay, "--json"])
    assert run.exit_code == 0, run.output
    bill = json.loads(run.stdout)["goodput"]["storage_bill"]
    assert bill["network"] == "converged" and "no storage ports" in bill["fallback"]
    notes = [line for line in run.stderr.splitlines() if line.startswith("note:")]
    assert notes == [f"note: {bill['fallback']}"]


def test_separate_storage_asked_for_names_the_option_and_its_values(tmp_path: Path) -> None:
    overlay = str(_pre_storage_system(tmp_path, "my-h100"))
    run = _run(["train", *TRAIN, "--system", "my-h100", "--calibration", overlay, "--storage-network", "separate"])
    assert run.exit_code == 2
    line = run.output.strip().splitlines()[-1]
    assert line.startswith("error: --storage-network:")
    assert all(word in line for word in ("converged", "none", "default"))
    assert _run(["train", *TRAIN, "--system", "my-h100", "--calibration", overlay, "--storage-network",
                 "none"]).exit_code == 0


def test_a_pre_storage_system_runs_whatif_size_and_topo(tmp_path: Path) -> None:
    overlay = str(_pre_storage_system(tmp_path, "my-h100"))
    run = _run(["whatif", *TRAIN, "--calibration", overlay, "--swap", "system=my-h100", "--json"])
    assert run.exit_code == 0, run.output
    assert any("my-h100" in line for line in run.stderr.splitlines() if line.startswith("note:"))
    run = _run(["whatif", *TRAIN, "--system", "my-h100", "--calibration", overlay, "--json"])
    assert run.exit_code == 0, run.output
    run = _run(["size", "--model", "llama3-8b", "--systems", "my-h100", "--gpus", "16", "--tp", "8", "--pp", "1",
                "--tokens", "10B", "--fabrics", "ndr", "--calibration", overlay, "--json"])
    assert run.exit_code == 0, run.output
    assert {r["system"] for r in json.loads(run.stdout)["results"]} == {"my-h100"}
    assert "my-h100" in json.loads(run.stdout)["storage_fallbacks"][0]
    run = _run(["topo", "--system", "my-h100", "--nodes", "2", "--calibration", overlay, "--json"])
    assert run.exit_code == 0, run.output


def test_an_overlay_redefining_dgx_h100_without_storage_fields_keeps_working(tmp_path: Path) -> None:
    overlay = _pre_storage_system(tmp_path, "dgx-h100")
    run = _run(["train", *TRAIN, "--calibration", str(overlay), "--json"])
    assert run.exit_code == 0, run.output
    assert _run(["whatif", *TRAIN, "--calibration", str(overlay), "--swap", "system=dgx-h100"]).exit_code == 0


def test_size_takes_calibration_and_uses_it(tmp_path: Path) -> None:
    slow = tmp_path / "slow.yaml"
    slow.write_text("links:\n  - id: ib-ndr\n    efficiency: 0.2\n", encoding="utf-8")
    argv = ["size", "--model", "llama3-8b", "--systems", "dgx-h100", "--gpus", "64", "--tp", "8", "--pp", "1",
            "--fabrics", "ndr", "--oversubscription", "1", "--tokens", "10B", "--no-goodput", "--json"]
    base = _run(argv)
    slowed = _run([*argv, "--calibration", str(slow)])
    assert base.exit_code == 0 and slowed.exit_code == 0, slowed.output
    t0 = json.loads(base.stdout)["results"][0]["time_to_train_s"]
    t1 = json.loads(slowed.stdout)["results"][0]["time_to_train_s"]
    assert t1 > t0
    missing = _run([*argv, "--calibration", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "nope.yaml" in missing.output


def test_a_partial_overlay_entry_merges_over_the_catalog_entry(tmp_path: Path) -> None:
    path = tmp_path / "eff.yaml"
    path.write_text("links:\n  - id: ib-ndr\n    efficiency: 0.5\n", encoding="utf-8")
    base, merged = default_catalog().link("ib-ndr"), load_catalog(path).link("ib-ndr")
    assert merged.efficiency == 0.5
    assert merged.model_copy(update={"efficiency": base.efficiency}) == base
    bad = tmp_path / "bad.yaml"
    bad.write_text("links:\n  - id: ib-ndr\n    efficiency: 1.5\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"links\[0\] \(ib-ndr\)\.efficiency"):
        load_catalog(bad)


def test_a_new_overlay_entry_must_be_complete_and_the_error_lists_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    path.write_text("links:\n  - id: ib-new\n    kind: infiniband\n    efficiency: 0.5\n", encoding="utf-8")
    with pytest.raises(SpecError, match="missing: name, source, generation, unit, bytes_per_s, latency_s"):
        load_catalog(path)


# ---- item 11: size takes joined racks (@N) ---------------------------------------------------------------------

@pytest.mark.parametrize("system", ["gb200-nvl72@144", "gb300-nvl72@144"])
def test_size_takes_joined_racks(system: str) -> None:
    run = _run(["size", "--model", "llama3-8b", "--systems", system, "--gpus", "144", "--gbs", "1152", "--tp", "8",
                "--pp", "1", "--fabrics", "ndr", "--oversubscription", "1", "--tokens", "10B", "--no-goodput",
                "--json"])
    assert run.exit_code == 0, run.output
    assert {r["system"].split("/")[0] for r in json.loads(run.stdout)["results"]} == {system}


def test_size_inference_takes_joined_racks_and_names_unknown_systems() -> None:
    run = _run(["size", "--inference", "--model", "llama3-8b", "--systems", "gb200-nvl72@144", "--rate", "5",
                "--slo-ttft", "2s", "--slo-tpot", "50ms", "--tp", "8", "--top", "1", "--json"])
    assert run.exit_code == 0, run.output
    bad = _run(["size", "--model", "llama3-8b", "--systems", "dgx-h1000", "--gpus", "16"])
    assert bad.exit_code == 2 and "--systems: unknown system 'dgx-h1000'" in bad.output


def test_size_refuses_an_impossible_join_naming_the_option() -> None:
    run = _run(["size", "--model", "llama3-8b", "--systems", "dgx-h100@16", "--gpus", "16"])
    assert run.exit_code == 2 and "--systems" in run.output


# ---- item 16 (part): a partial rack id and --gpus-per-node -------------------------------------------------------

def test_partial_rack_id_and_gpus_per_node_conflict_is_named() -> None:
    argv = ["train", "--model", "llama3-8b", "--system", "gb200-nvl72/64", "--gpus", "64", "--tp", "8", "--gbs", "64"]
    run = _run([*argv, "--gpus-per-node", "32"])
    assert run.exit_code == 2
    assert "--gpus-per-node" in run.output and "gb200-nvl72/64" in run.output and "unknown" not in run.output
    same = _run([*argv, "--gpus-per-node", "64", "--json"])
    assert same.exit_code == 0, same.output
    alone = _run([*argv, "--json"])
    assert json.loads(same.stdout)["step_time_s"] == json.loads(alone.stdout)["step_time_s"]


# ---- item 17: API arguments in their natural Python types -------------------------------------------------------

def test_integral_floats_and_number_strings_are_counts() -> None:
    a = fabricsim.train(model="llama3-8b", gpus=16, tp=8, gbs=32).to_dict()
    b = fabricsim.train(model="llama3-8b", gpus="16", tp=8.0, gbs="32").to_dict()
    a.pop("inputs")
    b.pop("inputs")
    assert a == b
    with pytest.raises(SpecError, match=r"^--tp: expected a whole number, got 8\.5"):
        fabricsim.train(model="llama3-8b", gpus=16, tp=8.5)
    with pytest.raises(SpecError, match=r"^--gpus: expected a whole number"):
        fabricsim.train(model="llama3-8b", gpus=[16])


def test_one_string_is_one_value_of_a_repeated_option(tmp_path: Path) -> None:
    one = fabricsim.whatif(model="llama3-8b", gpus=16, tp=2, gbs=32, swap="ib=xdr").to_dict()
    many = fabricsim.whatif(model="llama3-8b", gpus=16, tp=2, gbs=32, swap=["ib=xdr"]).to_dict()
    one.pop("inputs")
    many.pop("inputs")
    assert one == many
    missing = str(tmp_path / "x.yaml")
    with pytest.raises(SpecError, match=f"{missing}: file not found"):
        fabricsim.train(model="llama3-8b", gpus=16, tp=8, gbs=32, calibration=missing)


def test_size_takes_ints_and_lists() -> None:
    result = fabricsim.size(model="llama3-8b", gpus=16, systems=["dgx-h100"], fabrics=["ndr"], tp=[8], pp=1,
                            tokens="10B", goodput=False, executor="serial")
    text = fabricsim.size(model="llama3-8b", gpus="16", systems="dgx-h100", fabrics="ndr", tp="8", pp="1",
                          tokens="10B", goodput=False, executor="serial")
    assert result.best is not None and text.best is not None
    assert result.best["system"] == "dgx-h100" and result.best["gpus"] == 16
    assert result.best["time_to_train_s"] == text.best["time_to_train_s"]
    with pytest.raises(SpecError, match=r"^--gpus: expected text"):
        fabricsim.size(model="llama3-8b", gpus={"n": 16})


def test_a_report_into_a_missing_folder_is_a_spec_error(tmp_path: Path) -> None:
    result = fabricsim.topology(nodes=2)
    with pytest.raises(SpecError, match=r"missing"):
        result.report(tmp_path / "missing" / "x.html")
    assert result.report(tmp_path / "x.html").exists()

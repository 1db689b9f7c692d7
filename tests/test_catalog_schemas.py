"""Issue 44 item 4: old catalogs keep working. The catalog schema carries a version (`catalog/data/schema.yaml`);
an overlay in each earlier schema, redefining `dgx-h100` and adding a system, runs `train`, `whatif`, `size` and
`topo`; the goodput add-on never refuses the main answer, and `--no-goodput` skips it."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fabricsim.api import train, whatif
from fabricsim.catalog import CATEGORY_MODELS, load_catalog
from fabricsim.catalog.loader import packaged_documents
from fabricsim.catalog.schema import catalog_schema
from fabricsim.cli import app
from fabricsim.errors import SpecError

SCHEMA = catalog_schema()
EARLIER = [v for v in SCHEMA.names if v != SCHEMA.current]
OVERLAID = ("systems", "cables")
"""the categories `overlay` writes entries of"""


def _shape(version: str) -> frozenset[tuple[str, str]]:
    """The fields an overlay of ``version`` lacks in the categories it writes: versions alike in this write the same
    overlay and load it through the same defaults."""
    return frozenset((c, f.name) for c in OVERLAID for f in SCHEMA.added_since(version).get(c, ()))


DISTINCT = [v for i, v in enumerate(EARLIER) if all(_shape(v) != _shape(w) for w in EARLIER[:i])]
"""the earliest version of each distinct overlay shape (the run of each costs ~4 s: CLI train, whatif, size, topo)"""
api_train = importlib.import_module("fabricsim.api.train")  # the module (fabricsim.api.train is the function)
TRAIN = ["--model", "llama3-8b", "--gpus", "64", "--tp", "1", "--pp", "1", "--mbs", "1", "--recompute", "none",
         "--zero", "1"]


def packaged_entry(category: str, entry_id: str) -> dict[str, Any]:
    """Today's packaged entry as its YAML gives it (units as written: 10.2kW)."""
    for _source, doc in packaged_documents():
        for item in (doc or {}).get(category, []):
            if item["id"] == entry_id:
                return dict(item)
    raise AssertionError(f"{category}.{entry_id} not packaged")


def older(entry: dict[str, Any], category: str, version: str) -> dict[str, Any]:
    """``entry`` as schema ``version`` wrote it: the fields added since deleted."""
    later = {f.name for f in SCHEMA.added_since(version).get(category, ())}
    return {k: v for k, v in entry.items() if k not in later}


def overlay(tmp_path: Path, version: str, *, key: bool = True) -> Path:
    """An overlay in schema ``version``: `dgx-h100` redefined whole, a new system `my-h100` (its copy) and, where the
    schema lacks cable rates, a cable class without one."""
    h100 = older(packaged_entry("systems", "dgx-h100"), "systems", version)
    mine = {**h100, "id": "my-h100", "name": f"my DGX H100 (schema {version})"}
    doc: dict[str, Any] = {"systems": [h100, mine]}
    cable = older(packaged_entry("cables", "dac-400g"), "cables", version)
    if "bytes_per_s" not in cable:
        doc["cables"] = [{**cable, "id": "old-dac", "price_usd": 1}]  # cheapest: it would win were it chosen
    if key:
        doc = {"schema": version, **doc}
    path = tmp_path / f"overlay-{version}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_cli(args: list[str]) -> Any:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result


@pytest.mark.parametrize(("version", "key"), [*((v, True) for v in DISTINCT), (SCHEMA.oldest, False)])
def test_an_overlay_in_each_earlier_schema_runs_train_whatif_size_and_topo(tmp_path: Path, version: str,
                                                                           key: bool) -> None:
    """Made by deleting from today's entries the fields the schema did not have; the new system took the fields
    added since from schema.yaml, and what it took beyond their defaults (a 0.1 system's PCIe switch chip) and
    the storage network it lacks ports for (schemas before 0.4) are said in one note line each."""
    path = overlay(tmp_path, version, key=key)
    cal = ["--calibration", str(path)]
    out = run_cli(["train", *TRAIN, "--system", "my-h100", *cal, "--json"])
    notes = [line for line in out.stderr.splitlines() if line.startswith("note:")]
    storage = "note: system my-h100 has no storage ports (storage_nic / storage_ports in its catalog entry): " \
        "storage converged on the compute fabric"
    schema = f"note: {path}: catalog schema {version}{'' if key else ' (no schema: key)'}, older than " \
        f"{SCHEMA.current}: its new entries take the fields added since as catalog/data/schema.yaml says: " \
        "systems.my-h100.pcie_switch = pcie-switch-gen5"
    portless = "storage_ports" in {f.name for f in SCHEMA.added_since(version).get("systems", ())}
    assert notes == ([schema] if version == "0.1" else []) + ([storage] if portless else [])
    mine = json.loads(out.stdout)
    if portless:  # a schema before storage ports: converged, said
        assert mine["goodput"]["storage_bill"]["network"] == "converged"
    # dgx-h100 redefined in the old shape keeps the fields it did not give: the same run as the packaged entry
    redefined = json.loads(run_cli(["train", *TRAIN, "--system", "dgx-h100", *cal, "--json"]).stdout)
    packaged = json.loads(run_cli(["train", *TRAIN, "--system", "dgx-h100", "--json"]).stdout)
    assert redefined["step_time_s"] == packaged["step_time_s"]
    assert redefined["goodput"] == packaged["goodput"]
    swapped = json.loads(run_cli(["whatif", *TRAIN, "--system", "dgx-h100", "--swap", "system=my-h100", *cal,
                                  "--json"]).stdout)
    assert [s["swap"] for s in swapped["swaps"]] == ["system=my-h100"]
    sized = json.loads(run_cli(["size", "--model", "llama3-8b", "--tokens", "10B", "--deadline", "30d", "--systems",
                                "my-h100", "--gpus", "64", "--fabrics", "ndr", "--seq", "4096", "--tp", "1", "--pp",
                                "1", "--cp", "1", "--mbs", "1", "--recompute", "none", "--zero", "1", "--workers", "1",
                                *cal, "--json"]).stdout)
    assert sized["results"] and sized["results"][0]["system"] == "my-h100"
    topo = json.loads(run_cli(["topo", "--system", "my-h100", "--nodes", "4", *cal, "--json"]).stdout)
    assert "old-dac" not in json.dumps(topo)  # a cable without a rate is never chosen


def test_the_fields_a_new_system_takes_are_the_stated_defaults_and_lookups(tmp_path: Path) -> None:
    """A 0.1 system with PCIe switches gets the catalog's switch of its PCIe generation (it failed: 'has
    pcie_switches but no pcie_switch id'); the rest take schema.yaml's defaults, equal to today's entry's where
    today's entry has none."""
    catalog = load_catalog(overlay(tmp_path, "0.1"))
    mine = catalog.systems["my-h100"]
    assert mine.pcie_switch == "pcie-switch-gen5" == catalog.systems["dgx-h100"].pcie_switch
    assert (mine.storage_nic, mine.storage_ports, mine.cpu_link, mine.status) == (None, 0, None, "shipping")
    assert catalog.cables["old-dac"].bytes_per_s is None
    assert catalog.systems["dgx-h100"] == load_catalog().systems["dgx-h100"]


def test_schema_yaml_accounts_for_every_field_and_each_added_one_is_optional() -> None:
    """Every field of every catalog model was in 0.1, came with its category, or is listed as added with a default
    equal to the model's (or a lookup): no field added since 0.1 is required."""
    introduced: dict[str, set[str]] = {}
    added: dict[str, dict[str, Any]] = {}
    for v in SCHEMA.versions:
        for category, names in v.categories.items():
            assert category not in introduced, category
            introduced[category] = set(names)
        for category, fields in v.added.items():
            assert category in introduced, (v.version, category)
            for f in fields:
                assert f.name not in introduced[category] and f.name not in added.get(category, {}), f.name
                added.setdefault(category, {})[f.name] = f
    assert set(introduced) == set(CATEGORY_MODELS)
    for category, model in CATEGORY_MODELS.items():
        fields = model.model_fields
        listed = set(SCHEMA.base_fields) | introduced[category] | set(added.get(category, {}))
        assert set(fields) == listed & set(fields) and set(fields) >= listed - set(SCHEMA.base_fields), category
        for name, f in added.get(category, {}).items():
            info = fields[name]
            assert not info.is_required(), f"{category}.{name} is required"
            if f.lookup is None:
                default = tuple(f.default) if isinstance(f.default, list) else f.default  # YAML has no tuples
                assert default == info.default, f"{category}.{name}: {f.default!r} != model's {info.default!r}"
            else:
                assert f.lookup["category"] in CATEGORY_MODELS
            assert f.fallback.strip()
    assert SCHEMA.current == SCHEMA.names[-1]


def test_an_unknown_schema_is_an_error_naming_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "future.yaml"
    path.write_text('schema: "9.9"\nsystems: []\n')
    with pytest.raises(SpecError, match=r"schema: unknown catalog schema '9.9'; known: 0.1, 0.2, 0.3, 0.4"):
        load_catalog(path)
    out = CliRunner().invoke(app, ["train", *TRAIN, "--calibration", str(path)])
    assert out.exit_code == 2 and "unknown catalog schema '9.9'" in out.output
    path.write_text("schema: 0.1\nsystems: []\n")  # unquoted, YAML reads a number: the same version
    assert load_catalog(path).systems == load_catalog().systems


def test_train_no_goodput_skips_the_add_on_with_the_same_step() -> None:
    """`train --no-goodput` (and the API's goodput=False): goodput null, no storage bill, the step unchanged."""
    with_it = json.loads(run_cli(["train", *TRAIN, "--json"]).stdout)
    without = json.loads(run_cli(["train", *TRAIN, "--no-goodput", "--json"]).stdout)
    assert with_it["goodput"] is not None and without["goodput"] is None
    assert without["step_time_s"] == with_it["step_time_s"] and without["tokens_per_s"] == with_it["tokens_per_s"]
    table = run_cli(["train", *TRAIN, "--no-goodput"]).stdout
    assert "step" in table and "goodput" not in table and "checkpoint" not in table
    result = train(model="llama3-8b", gpus=64, tp=1, pp=1, mbs=1, recompute="none", zero=1, goodput=False)
    assert result.goodput is None and result.to_dict()["goodput"] is None
    assert result.step_time_s == with_it["step_time_s"]
    healthy = whatif(model="llama3-8b", gpus=64, tp=1, pp=1, mbs=1, recompute="none", zero=1, goodput=False)
    assert healthy.data["base_goodput"] == 1.0


def test_a_failing_goodput_add_on_leaves_the_main_answer_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """A defect or a refusal of the add-on (the user gave no goodput option) is one note line; the step is
    printed, JSON goodput null with `goodput_note`."""
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("storage model broke")

    base = json.loads(run_cli(["train", *TRAIN, "--json"]).stdout)
    monkeypatch.setattr(api_train, "run_goodput", broken)
    out = run_cli(["train", *TRAIN, "--json"])
    data = json.loads(out.stdout)
    assert data["goodput"] is None and data["step_time_s"] == base["step_time_s"]
    assert data["goodput_note"] == "goodput: not computed: RuntimeError: storage model broke"
    assert "note: goodput: not computed: RuntimeError: storage model broke" in out.stderr
    table = run_cli(["train", *TRAIN])
    assert "bottleneck" in table.stdout and "goodput: not computed" in table.stderr

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise SpecError("the tier cannot hold it", field="--storage")

    monkeypatch.setattr(api_train, "run_goodput", refused)
    assert train(model="llama3-8b", gpus=64, tp=1, pp=1).data["goodput_note"] == \
        "goodput: not computed: --storage: the tier cannot hold it"
    with pytest.raises(SpecError, match="the tier cannot hold it"):  # an option the user gave: it fails
        train(model="llama3-8b", gpus=64, tp=1, pp=1, storage="superpod-good")
    given = CliRunner().invoke(app, ["train", *TRAIN, "--checkpoint-mode", "async"])
    assert given.exit_code == 2 and "the tier cannot hold it" in given.output


def test_whatif_prices_the_swaps_on_a_healthy_cluster_when_the_add_on_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import fabricsim.analysis.whatif as analysis_whatif

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("failure model broke")

    monkeypatch.setattr(analysis_whatif, "predict_goodput", broken)
    out = run_cli(["whatif", *TRAIN, "--swap", "ib=xdr", "--json"])
    data = json.loads(out.stdout)
    assert data["base_goodput"] == 1.0 and data["goodput_note"].startswith("goodput: not computed: RuntimeError")
    assert [s["swap"] for s in data["swaps"]] == ["ib=xdr"] and "goodput: not computed" in out.stderr
    given = run_cli(["whatif", *TRAIN, "--storage-network", "converged"])  # a defect, not a refusal: a note
    assert "goodput: not computed: RuntimeError: failure model broke" in given.stderr
    asked = CliRunner().invoke(app, ["whatif", *TRAIN, "--swap", "mtbf=2"])  # goodput is the question: it fails
    assert asked.exit_code != 0 and isinstance(asked.exception, RuntimeError)

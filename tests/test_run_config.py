"""`--config FILE` and `--dump-config` (issue 44 item 3): a run is a file; flags override it; the dumped run fed back
gives the identical run; bad files are one `error:` line; the API takes the same file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fabricsim.cli import app

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama70b-train.yaml"

# One small, fast run of every command that runs a model (options in both spellings, lists, flags).
RUNS = {
    "train": ["train", "--model", "llama3-8b", "--gpus", "64", "--tp", "2", "--gpus-per-node", "8", "--ib", "xdr",
              "--no-flash-attn", "--calibration", "{cal}"],
    "whatif": ["whatif", "--model", "llama3-8b", "--gpus", "32", "--tp", "2", "--ib", "ndr"],
    "size": ["size", "--model", "llama3-8b", "--gpus", "64", "--systems", "dgx-h100", "--fabrics", "ndr",
             "--tp", "1,2", "--no-exhaustive"],
    "size-inference": ["size", "--inference", "--model", "llama3-8b", "--rate", "2", "--systems", "dgx-h100",
                       "--slo-ttft", "2s", "--slo-tpot", "50ms"],
    "infer": ["infer", "--model", "llama3-8b", "--gpus", "2", "--tp", "2", "--batch", "4"],
    "collective": ["collective", "--nodes", "2", "--min", "1M", "--max", "16M", "--algo", "ring"],
    "topo": ["topo", "--nodes", "16", "--ib", "ndr", "--fabric", "fat-tree"],
    "traffic": ["traffic", "--nodes", "8", "--bytes", "16M", "--pattern", "all_to_all"],
}


def _invoke(args: list[str]) -> Any:
    result = CliRunner().invoke(app, args)
    return result


def _without_wall(data: Any) -> Any:
    """The document with its wall-time fields (``wall_s``, ``screen_wall_s``, ...) left out."""
    if isinstance(data, dict):
        return {k: _without_wall(v) for k, v in data.items() if "wall" not in k}
    if isinstance(data, list):
        return [_without_wall(v) for v in data]
    return data


def _json(args: list[str]) -> dict[str, Any]:
    result = _invoke([*args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.fixture()
def overlay(tmp_path: Path) -> Path:
    """An empty calibration overlay (a list option that takes a path)."""
    path = tmp_path / "cal.yaml"
    path.write_text("{}\n")
    return path


@pytest.mark.parametrize("name", list(RUNS))
def test_dumped_run_gives_the_identical_run(name: str, tmp_path: Path, overlay: Path) -> None:
    """`X ... --dump-config > a.yaml; X --config a.yaml --json` equals `X ... --json` (wall times aside), and the
    dump runs nothing (it is YAML, fast, exit 0)."""
    args = [a.format(cal=overlay) for a in RUNS[name]]
    dumped = _invoke([*args, "--dump-config"])
    assert dumped.exit_code == 0, dumped.output
    values = yaml.safe_load(dumped.stdout)
    assert isinstance(values, dict) and "config" not in values and "dump_config" not in values
    run_file = tmp_path / "a.yaml"
    run_file.write_text(dumped.stdout)
    assert _without_wall(_json([args[0], "--config", str(run_file)])) == _without_wall(_json(args))


def test_flags_override_the_file_and_the_example_runs(tmp_path: Path) -> None:
    """The packaged example is a run: its values reach the run, and a flag given with it wins over the file."""
    from_file = _json(["train", "--config", str(EXAMPLE)])
    written = yaml.safe_load(EXAMPLE.read_text())
    assert {k: from_file["inputs"][k] for k in written} == written
    overridden = _json(["train", "--config", str(EXAMPLE), "--pp", "8", "--ib", "xdr"])
    assert overridden["inputs"]["pp"] == 8 and overridden["inputs"]["ib"] == "xdr"
    assert overridden["inputs"]["tp"] == written["tp"]
    assert overridden["step_time_s"] != from_file["step_time_s"]
    # the same run as flags alone
    by_flags = _json(["train", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8", "--pp", "4", "--seq", "8192",
                      "--gbs", "1024", "--recompute", "selective", "--ib", "ndr"])
    assert _without_wall(by_flags) == _without_wall(from_file)


def test_json_inputs_echo_is_a_run_file(tmp_path: Path) -> None:
    """`fabricsim train --json | jq .inputs` (and the whole document) read back as --config give the same run."""
    first = _json(["train", "--model", "llama3-8b", "--gpus", "32", "--tp", "4", "--seq", "2048"])
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps(first["inputs"]))
    assert _without_wall(_json(["train", "--config", str(inputs)])) == _without_wall(first)
    whole = tmp_path / "result.json"
    whole.write_text(json.dumps(first))
    assert _json(["train", "--config", str(whole)])["inputs"] == first["inputs"]


def test_cli_spelling_keys_and_natural_values(tmp_path: Path) -> None:
    """Keys also in the option's spelling (``gpus-per-node``, ``min``, ``fabric``); a YAML list for a comma option;
    a number for a text option; the dump writes the canonical (API keyword) names."""
    run = tmp_path / "run.yaml"
    run.write_text("min: 1K\nmax: 1048576\nfabric: rail-only\n")
    dumped = yaml.safe_load(_invoke(["collective", "--config", str(run), "--dump-config"]).stdout)
    assert (dumped["min_size"], dumped["max_size"], dumped["fabric_kind"]) == ("1K", "1048576", "rail-only")
    run.write_text("gpus-per-node: 4\nsystems: [dgx-h100, dgx-b200]\n")
    result = _invoke(["train", "--config", str(run), "--dump-config"])
    assert result.exit_code == 2 and "'systems' is an option of size" in result.output
    run.write_text("systems: [dgx-h100, dgx-b200]\ntp: [1, 2]\n")
    dumped = yaml.safe_load(_invoke(["size", "--config", str(run), "--dump-config"]).stdout)
    assert (dumped["systems"], dumped["tp"]) == ("dgx-h100,dgx-b200", "1,2")


@pytest.mark.parametrize(("text", "message"), [
    ("model: llama3-8b\ngpu: 64\n", "run.yaml: unknown option 'gpu' of train; did you mean 'gpus'"),
    ("tokens: 2T\n", "run.yaml: 'tokens' is an option of size, sweep, not of train"),
    ("model: [llama\n", "run.yaml: not valid YAML: "),
    ("- 1\n- 2\n", "run.yaml: a run file is a mapping of option names to values"),
    ("flash_attn: 1\n", "run.yaml: flash_attn: expected true or false, got 1"),
    ("precision: on\n", "run.yaml: precision: expected a value (quote yes/no/on/off"),
    ("tp: 2\ntp: 4\n", "duplicate key"),
    ("gpus: 8\ngpus-per-node: 4\ngpus_per_node: 2\n", "'gpus_per_node' sets 'gpus_per_node' a second time"),
    ("config: other.yaml\n", "unknown option 'config' of train"),
    ("tp: 2.5\n", "run.yaml: tp: Invalid value for '--tp'"),
    ("oversubscription: fast\n", "run.yaml: oversubscription: Invalid value for '--oversubscription'"),
])
def test_bad_run_file_is_one_error_line(text: str, message: str, tmp_path: Path) -> None:
    run = tmp_path / "run.yaml"
    run.write_text(text)
    result = _invoke(["train", "--config", str(run)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --config: ") and message in lines[0], result.output


def test_missing_run_file_is_one_error_line(tmp_path: Path) -> None:
    result = _invoke(["topo", "--config", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and result.output.strip() == f"error: --config: {tmp_path / 'none.yaml'}: run file " \
        "not found"


def test_api_takes_the_run_file_and_keywords_override(tmp_path: Path) -> None:
    """`fabricsim.train(config="run.yaml", pp=8)`: the file's keywords, the call's win; a CLI-only option left
    null in a dumped run is ignored, an unknown key is a SpecError naming it and the file."""
    import fabricsim
    from fabricsim.errors import SpecError

    run = tmp_path / "run.yaml"
    run.write_text(_invoke(["train", "--config", str(EXAMPLE), "--dump-config"]).stdout)
    api = fabricsim.train(config=str(run), pp=8)
    cli = _json(["train", "--config", str(EXAMPLE), "--pp", "8"])
    assert api.prediction.step_time_s == pytest.approx(cli["step_time_s"], rel=1e-12)
    run.write_text("model: llama3-8b\ntokens: 2T\n")
    with pytest.raises(SpecError, match=r"run.yaml: config: unknown keyword 'tokens'"):
        fabricsim.train(config=str(run))

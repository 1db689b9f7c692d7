"""The documentation runs: every `fabricsim ...` example of README.md and of the docs pages (`docs/**/*.md`), in every
variant it offers, in under 30 s; every ```python block of the docs pages; every script in `examples/`. The README
stays a first screen: at most 160 lines, and the demo output it shows is what `fabricsim demo` prints.

An example line offers variants in two ways: `a|b|c` alternatives of one value, and optional `[...]` groups (which
may hold alternatives of their own, `[--replicas 2 | --disagg 1:1]`). Each line runs as its base command (groups
dropped, first alternatives) and once more for each other alternative and each optional group, one change at a time,
in a working directory that holds the input files the examples name (jobs.yaml, qos_jobs.yaml, requests.jsonl,
matrix.csv, run.json):
exit 0, and no plan in it reports that it does not fit (issue 21: an example must finish in seconds on 2 cores).
A command line that appears on several pages runs once. The README's ```python block runs in tests/test_api.py."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
README_MAX_LINES = 160
# Need a torch launch, GPUs or the user's own log files: covered by the bench and calibration tests.
SKIPPED = ("bench", "calibrate", "compare")
SECONDS_PER_EXAMPLE = 30.0
GROUP = re.compile(r"\[([^\[\]]*)\]")
BOX = re.compile(r"[│┃┏┓┗┛┡┩└┘━─╇┳┻┼╋]")


def pages() -> list[Path]:
    """README.md, then every docs page, in a stable order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _alternatives(words: list[str]) -> list[list[str]]:
    """The word lists of `words` with each `a|b|c` word at its first value, then one list per other value."""
    base = [w.split("|", 1)[0] for w in words]
    out = [base]
    for i, word in enumerate(words):
        for alt in word.split("|")[1:]:
            out.append([*base[:i], alt, *base[i + 1:]])
    return out


def _variants(line: str) -> list[list[str]]:
    """Base command, each other alternative, each optional group (each of its alternatives) added alone."""
    groups = GROUP.findall(line)
    base_words = shlex.split(GROUP.sub(" ", line))[1:]
    variants = _alternatives(base_words)
    base = variants[0]
    for group in groups:
        for option in group.split(" | "):
            variants += [base + extra for extra in _alternatives(shlex.split(option))]
    unique: dict[str, list[str]] = {}
    for v in variants:
        unique.setdefault(shlex.join(v), v)
    return list(unique.values())


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of one language in a Markdown text."""
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def command_lines(text: str) -> list[str]:
    """Each `fabricsim` command line of a page's bash blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("fabricsim ") and line.split()[1] not in SKIPPED:
                lines.append(line)
    return lines


def collect() -> dict[str, tuple[str, list[str]]]:
    """Every variant of every page's examples, keyed by its command line, with the first page that shows it."""
    found: dict[str, tuple[str, list[str]]] = {}
    for page in pages():
        for line in command_lines(page.read_text(encoding="utf-8")):
            for argv in _variants(line):
                found.setdefault(shlex.join(argv), (_name(page), argv))
    return found


COMMANDS = collect()
PYTHON_BLOCKS = [(_name(p), i, b) for p in pages()[1:] for i, b in enumerate(blocks(p.read_text("utf-8"), "python"))]
SCRIPTS = sorted(EXAMPLES.glob("*.py")) if EXAMPLES.is_dir() else []


def _option(argv: list[str], name: str, default: int) -> int:
    return int(argv[argv.index(name) + 1]) if name in argv else default


@pytest.fixture
def inputs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the example inputs the docs name, so that files the examples write land here."""
    (tmp_path / "jobs.yaml").write_text(
        "jobs:\n"
        "  - {name: neighbour, gpus: 64, placement: scattered, pattern: all_to_all, bytes: 16M}\n"
        "background:\n"
        "  - {kind: checkpoint_write, job: neighbour, bytes: 64M}\n"
        "storage_nodes: 1\n", encoding="utf-8")
    (tmp_path / "qos_jobs.yaml").write_text(
        "storage_nodes: 2\n"
        "classes: {training: 4, storage: 1}\n"
        "jobs:\n"
        "  - {name: train, gpus: 64, pattern: all_reduce, bytes: 64M, class: training}\n"
        "background:\n"
        "  - {kind: checkpoint_write, job: train, bytes: 256M, class: storage}\n", encoding="utf-8")
    (tmp_path / "kv_jobs.yaml").write_text(
        "storage_nodes: 2\n"
        "jobs:\n"
        "  - {name: train, gpus: 64, placement: scattered, pattern: all_to_all, bytes: 256M}\n"
        "  - {name: serve, gpus: 32, pattern: kv_tier, bytes: 64M, every: 2ms, loads: 10}\n", encoding="utf-8")
    (tmp_path / "requests.jsonl").write_text("".join(
        json.dumps({"arrival_s": i * 0.125, "prompt_tokens": 1024, "output_tokens": 256}) + "\n" for i in range(240)),
        encoding="utf-8")
    from test_trace_import import gpu_trace

    (tmp_path / "run.json").write_text(json.dumps(gpu_trace()), encoding="utf-8")  # a profiled step (two, H100)
    from test_trace_merge import write_ranks

    write_ranks(tmp_path / "ranks", 8, 6, {4: ("compute", 0.2)})  # bench_trace_merge.py --write ranks --ranks 8
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write_matrix(path: Path, gpus: int) -> None:
    """A GPU x GPU byte matrix: each GPU sends 1 MiB to the GPU half the cluster away."""
    rows = [["0"] * gpus for _ in range(gpus)]
    for i in range(gpus):
        rows[i][(i + gpus // 2) % gpus] = str(2**20)
    path.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")


def test_the_docs_have_examples_of_every_command() -> None:
    names = {argv[0] for _, argv in COMMANDS.values()}
    assert {"catalog", "topo", "collective", "traffic", "train", "whatif", "size", "validate", "infer",
            "trace"} <= names


def test_every_command_has_its_page() -> None:
    """One page per command under docs/commands, and the README links to it."""
    from typer.main import get_command

    readme = README.read_text(encoding="utf-8")
    commands = set(get_command(app).commands) - {"demo", "compare"}  # compare shares calibrate's page
    for command in commands:
        assert (DOCS / "commands" / f"{command}.md").is_file(), command
        assert f"docs/commands/{command}.md" in readme, command


def test_every_docs_page_is_in_the_site() -> None:
    """`make docs` (mkdocs --strict, run by tests/test_api.py) builds every page: each one is in mkdocs.yml's nav."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted(DOCS.rglob("*.md")):
        assert page.relative_to(DOCS).as_posix() in nav, page


def test_variants_expand_alternatives_and_groups() -> None:
    got = _variants("fabricsim x --a 1|2 [--b 3] [--c 4 | --d 5] [--e f|g]")
    assert [shlex.join(v) for v in got] == [
        "x --a 1", "x --a 2", "x --a 1 --b 3", "x --a 1 --c 4", "x --a 1 --d 5", "x --a 1 --e f", "x --a 1 --e g"]


def test_text_blocks_are_not_run() -> None:
    text = "```text\nfabricsim train --gpus 3\n```\n```bash\nfabricsim topo --nodes 2  # two\n```\n"
    assert command_lines(text) == ["fabricsim topo --nodes 2"]


def test_the_readme_is_a_first_screen_with_the_demo_output() -> None:
    """At most 160 lines, and every line of its demo output block (table borders aside) is what the demo prints."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    shown = [b for b in blocks(text, "text") if "step time" in b]
    assert len(shown) == 1, "the README shows the demo's output in one ```text block"
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    printed = " ".join(result.output.split())
    lines = [line for line in shown[0].splitlines() if line.strip() and not BOX.search(line)]
    assert len(lines) >= 5
    for line in lines:
        assert " ".join(line.split()) in printed, line


@pytest.mark.parametrize("key", list(COMMANDS), ids=[f"{page}: {key}"[:110] for key, (page, _) in COMMANDS.items()])
def test_docs_example_runs_in_seconds(key: str, inputs_dir: Path) -> None:
    _, argv = COMMANDS[key]
    if "matrix.csv" in argv:
        _write_matrix(inputs_dir / "matrix.csv", 8 * _option(argv, "--nodes", 1))
    start = time.perf_counter()
    result = CliRunner().invoke(app, argv)
    elapsed = time.perf_counter() - start
    assert result.exit_code in ((0, 1) if argv[0] == "validate" else (0,)), result.output
    assert "does not fit" not in result.output
    assert "fits: no" not in result.output
    assert elapsed < SECONDS_PER_EXAMPLE, f"{key} took {elapsed:.1f} s"


@pytest.mark.parametrize(("page", "index", "code"), PYTHON_BLOCKS, ids=[f"{p} python {i}" for p, i, _ in PYTHON_BLOCKS])
def test_docs_python_block_runs(page: str, index: int, code: str, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page} python block {index}", "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_example_script_runs(script: Path, tmp_path: Path) -> None:
    """A runnable example exits 0 in its own process, from a scratch directory (what it writes lands there)."""
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip(), f"{script.name} printed nothing"

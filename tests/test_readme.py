"""Every `fabricsim ...` example of README.md runs: exit 0, and no plan in it reports that it does not fit."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
# Need a torch launch, GPUs or the user's own log files: covered by the bench and calibration tests.
SKIPPED = ("bench", "calibrate", "compare")


def _drop_optional(text: str) -> str:
    """The command without its optional `[...]` groups (nested ones included)."""
    while True:
        stripped = re.sub(r"\[[^\[\]]*\]", "", text)
        if stripped == text:
            return text
        text = stripped


def readme_commands() -> list[list[str]]:
    """Each `fabricsim` command of the README's bash blocks: continuation lines joined, comments, optional groups
    and all but the first of `a|b|c` alternatives dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line.startswith("fabricsim "):
                continue
            argv = [word.split("|", 1)[0] for word in shlex.split(_drop_optional(line))[1:]]
            if argv and argv[0] not in SKIPPED:
                commands.append(argv)
    return commands


COMMANDS = readme_commands()


def test_readme_has_examples() -> None:
    names = {c[0] for c in COMMANDS}
    assert {"catalog", "topo", "collective", "traffic", "train", "whatif", "size", "validate"} <= names


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c)[:60] for c in COMMANDS])
def test_readme_example_runs(argv: list[str]) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code in ((0, 1) if argv[0] == "validate" else (0,)), result.output
    assert "does not fit" not in result.output
    assert "fits: no" not in result.output

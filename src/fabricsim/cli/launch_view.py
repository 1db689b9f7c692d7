"""A tool's own launch settings beside a prediction: `infer` and `size --inference` print the serving engine's command
(and the config file it reads) that starts the chosen plan, `train` the training stack's; or why there is none."""

from __future__ import annotations

from typing import Any

from fabricsim.cli.spec_options import LAUNCH_OPTIONS

Checkpoint = LAUNCH_OPTIONS["checkpoint"][0]


def launch_lines(data: dict[str, Any]) -> list[str]:
    """The launch settings as printed lines: each role's command, its config file and notes."""
    if "error" in data:
        return [f"launch: [dim]{data['error']}[/]"]
    lines: list[str] = []
    for role, settings in data.items():
        times = f" (x{settings['instances']})" if settings["instances"] > 1 else ""
        head = "launch" if role in ("serve", "train") else f"launch {role}{times}"
        lines.append(f"{head} ({settings['engine']}): {settings['command']}")
        for name, text in settings["config_files"].items():
            lines.append(f"  {name}: " + text.strip().replace("\n", "; "))
        lines += [f"  note: {note}" for note in settings["notes"]]
    return lines

"""The `fabricsim` command line: typer app; every command prints a table and takes --json."""

from __future__ import annotations

import sys

import typer

from fabricsim.cli.bench_cmd import bench_app
from fabricsim.cli.catalog_cmd import Category, catalog_command, catalog_table
from fabricsim.cli.output import console

app = typer.Typer(
    name="fabricsim",
    help="Which interconnect layer bounds a GPU workload, and what is the cheapest cluster that meets a target.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("catalog")(catalog_command)
app.add_typer(bench_app, name="bench")


@app.command("demo")
def demo_command() -> None:
    """The main job on a built-in default: the catalog's system presets."""
    from fabricsim.catalog import default_catalog

    console.print(catalog_table(default_catalog(), Category.systems))


def main() -> None:
    """Console-script entry point: usage errors become one line on stderr and exit code 2."""
    try:
        code = app(standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("error: aborted\n")
        sys.exit(130)
    except Exception as exc:
        # typer's (vendored click) usage errors: duck-typed, since their classes are private to typer.
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.exit(0)
        format_message = getattr(exc, "format_message", None)
        if format_message is None or not hasattr(exc, "exit_code"):
            raise
        sys.stderr.write(f"error: {format_message()}\n")
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main"]

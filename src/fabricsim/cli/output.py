"""Shared CLI output helpers: JSON printing, rich console, and the one-line error convention."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console

from fabricsim.errors import SpecError

# Wide tables when output is piped (rich would otherwise assume 80 columns).
console = Console(width=None if sys.stdout.isatty() else 200)
P = ParamSpec("P")
R = TypeVar("R")


def print_json(data: Any) -> None:
    """Machine-readable output on stdout (SI units, no rich markup)."""
    try:
        text = json.dumps(data, indent=2, sort_keys=False, default=str, allow_nan=False)
    except ValueError:
        raise SpecError("the result holds a number that is not finite (NaN or infinity); check the inputs") from None
    sys.stdout.write(text + "\n")


def fail(message: str) -> None:
    """One line on stderr and exit code 2: the CLI's answer to bad input."""
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code=2)


def spec_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn SpecError from a command into a one-line message and exit code 2, never a traceback."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except SpecError as exc:
            fail(str(exc))
            raise  # unreachable: fail() raises
        except ValidationError as exc:  # a model validated outside a from_data(): the same one line
            from fabricsim.workload._validation import spec_error

            fail(str(spec_error(exc)))
            raise

    return wrapper

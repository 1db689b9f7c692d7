"""Shared test fixtures: the packaged catalog and a CLI runner."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fabricsim.catalog import Catalog, default_catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return default_catalog()


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()

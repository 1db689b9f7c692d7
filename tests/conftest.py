"""Shared test fixtures: the packaged catalog and a CLI runner; property tests run derandomized (the same
examples every run, so CI is deterministic) unless HYPOTHESIS_PROFILE=explore asks for fresh random ones."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import settings
from typer.testing import CliRunner

from fabricsim.catalog import Catalog, default_catalog

# The error bands' residual table is cached on disk; the suite keeps its own copy, not the user's.
os.environ.setdefault("FABRICSIM_CACHE_DIR", tempfile.mkdtemp(prefix="fabricsim-test-cache-"))

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return default_catalog()


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()

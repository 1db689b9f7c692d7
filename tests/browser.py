"""Headless Chromium (Debian's, driven by playwright) for tests of the HTML report: open a file with every network
request aborted and recorded, collect console errors and page errors, count the charts drawn, take a screenshot.

Without a Chromium the tests skip, unless FABRICSIM_REQUIRE_BROWSER=1 (CI sets it) makes that a failure."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("FABRICSIM_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
LOCAL = ("file:", "data:", "about:", "blob:")


def require_browser() -> None:
    """Skip the calling test when there is no Chromium, or fail when FABRICSIM_REQUIRE_BROWSER=1."""
    missing = None
    if not CHROMIUM.exists():
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "playwright is not installed"
    if missing is None:
        return
    if os.environ.get("FABRICSIM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"FABRICSIM_REQUIRE_BROWSER=1 but {missing}")
    pytest.skip(missing)


def launched_browser() -> Iterator[Any]:
    """A headless Chromium for a module's tests (generator for a fixture): launched once, closed at the end."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class PageRun:
    """What one page load did."""

    network: list[str] = field(default_factory=list)  # requests that would have left the machine (aborted)
    errors: list[str] = field(default_factory=list)  # console errors and uncaught page errors
    charts_declared: int = 0
    charts_drawn: int = 0
    screenshot: bytes = b""


def open_offline(browser: Any, path: Path, *, timeout_ms: int = 30_000) -> PageRun:
    """Load ``path`` with every request that is not a local file aborted and recorded; wait until the charts the
    page declares (``<meta name="fabricsim-charts">``) are drawn, then screenshot the first screen."""
    run = PageRun()
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        def route(r: Any) -> None:
            url = r.request.url
            if url.startswith(LOCAL):
                r.continue_()
            else:
                run.network.append(url)
                r.abort()

        page.route("**/*", route)
        page.on("request", lambda req: run.network.append(req.url) if not req.url.startswith(LOCAL) else None)
        page.on("console", lambda msg: run.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
        page.on("pageerror", lambda exc: run.errors.append(f"pageerror: {exc}"))
        page.goto(path.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
        declared = page.get_attribute('meta[name="fabricsim-charts"]', "content")
        run.charts_declared = int(declared or 0)
        drawn = ("n => document.querySelectorAll('.plotly-graph-div.js-plotly-plot').length >= n && "
                 "[...document.querySelectorAll('.plotly-graph-div')].every(d => d.querySelector('.main-svg'))")
        if run.charts_declared:
            page.wait_for_function(drawn, arg=run.charts_declared, timeout=timeout_ms)
        run.charts_drawn = page.eval_on_selector_all(
            ".plotly-graph-div", "els => els.filter(e => e.classList.contains('js-plotly-plot') && "
            "e.querySelector('.main-svg') && e.querySelectorAll('.trace, .point').length > 0).length")
        run.screenshot = page.screenshot(full_page=False)
    finally:
        page.close()
    return run


def png_stats(png: bytes) -> tuple[int, int, int, float]:
    """(width, height, distinct colours on a coarse grid, standard deviation of the pixels) of a PNG."""
    import matplotlib.image as mpimg
    import numpy as np

    pixels = np.asarray(mpimg.imread(io.BytesIO(png), format="png"))[..., :3]
    grid = pixels[::4, ::4].reshape(-1, 3)
    colours = len(np.unique(np.round(grid * 255).astype(np.uint8), axis=0))
    return pixels.shape[1], pixels.shape[0], colours, float(pixels.std())

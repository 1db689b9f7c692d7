"""Benchmark: loading and validating the packaged catalog (run: `make bench` or this file as a script)."""

from __future__ import annotations

import time

from fabricsim.catalog.loader import load_documents, packaged_documents


def load_once() -> int:
    catalog = load_documents(packaged_documents())
    return len(catalog.gpus) + len(catalog.links)


def test_catalog_load(benchmark: object) -> None:
    benchmark(load_once)  # type: ignore[operator]


if __name__ == "__main__":
    start = time.perf_counter()
    runs = 20
    for _ in range(runs):
        load_once()
    print(f"catalog load: {(time.perf_counter() - start) / runs * 1e3:.2f} ms")

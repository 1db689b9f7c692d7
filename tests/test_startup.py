"""Start-up of an analytical run (issue 44 item 8): `import fabricsim.cli` and `fabricsim train` load no heavy
library (checked through ``sys.modules`` in a fresh interpreter, not by timing: benchmarks/bench_startup.py times
it), and the Poisson sum of the goodput model, computed without scipy.stats, is scipy's."""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fabricsim.training import spare_wait_s
from fabricsim.training.goodput import log_factorial, poisson_pmf

SRC = str(Path(__file__).resolve().parents[1] / "src")
# What an analytical run never needs: scipy (stats, sparse: the flow simulator's), data frames, plotting, graphs,
# torch and the distributed executors.
HEAVY = ("scipy", "pandas", "matplotlib", "plotly", "networkx", "torch", "numba", "ray", "pyarrow")
RUNS = (
    ("train", "--model", "llama3-8b", "--gpus", "64"),  # the README's first command
    ("train", "--model", "mixtral-8x7b", "--gpus", "256", "--tp", "2", "--ep", "8", "--pp", "2"),  # MoE
    ("train", "--model", "llama3-70b", "--gpus", "8192", "--tp", "8", "--pp", "8", "--spares", "0"),  # ~40 terms
)


def _loaded(code: str) -> tuple[list[str], str]:
    """The HEAVY packages in sys.modules after ``code`` runs in a fresh interpreter, and its stderr."""
    probe = f"{code}\nimport sys\nprint('LOADED', sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=SRC), timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("LOADED ")]
    assert proc.returncode == 0 and lines, proc.stdout[-800:] + proc.stderr[-800:]
    return ast.literal_eval(lines[-1][len("LOADED "):]), proc.stderr


def test_importing_the_cli_loads_no_heavy_package() -> None:
    assert _loaded("import fabricsim.cli")[0] == []


def test_an_analytical_train_run_loads_no_heavy_package() -> None:
    """Three analytical `fabricsim train` runs (dense, MoE, a goodput with no spare: the Poisson sum over ~40
    terms) in one interpreter; today's goodput imported scipy.stats for that sum (half a second)."""
    calls = "\n".join(
        f"sys.argv = ['fabricsim', *{list(argv)!r}, '--json']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, (sys.argv, exc.code)\n"
        for argv in RUNS)
    loaded, stderr = _loaded(f"import sys\nfrom fabricsim.cli import main\n{calls}")
    assert loaded == [], stderr[-800:]


def test_the_console_entry_freezes_start_up_and_exit_objects() -> None:
    """`main` freezes the objects of start-up at its first call and again at the process's exit (the shutdown's
    collections then skip numpy's, pydantic's and the catalog's objects, ~0.1 s of a `fabricsim train`), once per
    process however often it is called, and leaves collection on for the command."""
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('EXIT', gc.get_freeze_count(), len(gc.get_objects()), flush=True))\n"
        "from fabricsim.cli import main\n"
        "for _ in range(2):\n"
        "    sys.argv = ['fabricsim', 'train', '--model', 'llama3-8b', '--gpus', '64', '--json']\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "    print('RUN', gc.isenabled(), gc.get_freeze_count(), len(gc.get_objects()), flush=True)\n"
        "print('HOOKS', atexit._ncallbacks())\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=SRC), timeout=300)
    lines = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()
             if line.split()[:1] in (["RUN"], ["EXIT"], ["HOOKS"])}
    assert set(lines) == {"RUN", "EXIT", "HOOKS"}, proc.stdout[-800:] + proc.stderr[-800:]
    assert lines["RUN"][0] == "True"  # collection on while commands run
    assert int(lines["HOOKS"][0]) == 2  # the probe's hook and one freeze, not one per call
    frozen_at_exit, tracked_at_exit = int(lines["EXIT"][0]), int(lines["EXIT"][1])
    assert frozen_at_exit > int(lines["RUN"][1]) > 10_000  # start-up frozen; the commands' objects at exit
    assert tracked_at_exit < 1_000  # only what the exit made after the freeze is left to collect


def _scipy_spare_wait_s(node_loss_per_s: float, spares: int, repair_s: float) -> float:
    """`spare_wait_s` as it was written with scipy.stats (the reference)."""
    from scipy.stats import poisson

    m = node_loss_per_s * repair_s
    k = np.arange(spares, spares + math.ceil(m + 12.0 * math.sqrt(m) + 30.0))
    return float(np.sum(poisson.pmf(k, m) * repair_s / (k + 1)))


MEANS = (1e-9, 1e-4, 0.01, 0.3, 1.0, 2.5, 7.0, 12.9, 13.0, 40.0, 200.0, 999.5, 1000.0, 5e3, 1e4, 1e5)


@pytest.mark.parametrize("mu", MEANS)
def test_poisson_pmf_is_scipys(mu: float) -> None:
    """The pmf over k from 0 to far beyond the mean, against scipy.stats.poisson.pmf: the same formula
    exp(k ln mu - ln k! - mu), so equal to ~1e-12 wherever scipy itself is that precise. Where k ln mu is large its
    rounding (eps x |k ln mu|, 3e-10 at mu = 1e5) bounds any evaluation's precision, scipy's included, so the
    tolerance grows with it."""
    from scipy.stats import poisson

    k = np.arange(0, int(mu + 40.0 * math.sqrt(mu) + 60.0))
    ours, ref = poisson_pmf(k, mu), poisson.pmf(k, mu)
    kept = ref > 1e-300  # below, both underflow towards zero
    assert kept.sum() > 20
    conditioning = np.abs(k * math.log(mu)) + np.array([log_factorial(int(i)) for i in k]) + mu
    tolerance = 1e-12 + 8.0 * np.finfo(float).eps * conditioning
    assert np.all(np.abs(ours - ref)[kept] <= tolerance[kept] * ref[kept])
    assert np.all(ours[~kept] < 1e-290)


def test_log_factorial_is_scipys_gammaln() -> None:
    from scipy.special import gammaln

    k = np.unique(np.concatenate([np.arange(0, 3000), np.geomspace(3000, 1e12, 400).astype(np.int64)]))
    ours = np.array([log_factorial(int(i)) for i in k])
    ref = gammaln(k + 1.0)
    assert ours[0] == ours[1] == 0.0
    assert np.all(np.abs(ours - ref) <= 4.0 * np.finfo(float).eps * np.maximum(np.abs(ref), 1.0))
    exact = [math.log(math.factorial(int(i))) for i in k[k <= 170]]  # the integer's own log, within an ulp
    assert np.allclose(ours[k <= 170], exact, rtol=4.0 * np.finfo(float).eps, atol=0.0)


@pytest.mark.parametrize("spares", [0, 1, 3, 12, 30])
@pytest.mark.parametrize(("mean_in_repair", "rel"), [(1e-6, 1e-12), (0.02, 1e-12), (0.7, 1e-12), (3.0, 1e-12),
                                                     (25.0, 1e-12), (400.0, 1e-12), (2e4, 1e-10)])
def test_spare_wait_is_the_scipy_sum(spares: int, mean_in_repair: float, rel: float) -> None:
    """The goodput's mean wait for a repaired node against the same sum over scipy.stats.poisson (a mean of 2e4
    nodes in repair: rel 1e-10, the pmf's own conditioning, see above)."""
    repair_s = 28800.0
    ours = spare_wait_s(mean_in_repair / repair_s, spares, repair_s)
    ref = _scipy_spare_wait_s(mean_in_repair / repair_s, spares, repair_s)
    assert ours == pytest.approx(ref, rel=rel, abs=1e-300)

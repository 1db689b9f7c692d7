"""The package layering of docs/architecture.md, checked by walking every import of src/fabricsim with
``ast``: no package imports a higher layer, no module imports a private name of another package, code outside a
package reaches it only through its ``__init__`` (its public names), no import cycle between modules, no module
over 500 lines. A change that climbs a layer fails here."""

from __future__ import annotations

import ast
import graphlib
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "fabricsim"
MAX_LINES = 500

BASE = frozenset({"units", "inputs", "errors", "caching", "diskcache", "si_json", "lazy"})
# What each package may import directly (besides the base modules); the closure of this table is what it may use.
ALLOWED: dict[str, frozenset[str]] = {
    "catalog": frozenset(),
    "topology": frozenset({"catalog"}),
    "network": frozenset({"topology"}),
    "collectives": frozenset({"network"}),
    "traffic": frozenset({"collectives"}),
    "model": frozenset({"catalog"}),
    "comm": frozenset({"collectives", "traffic", "model"}),
    "training": frozenset({"comm"}),
    "inference": frozenset({"comm"}),
    "serving": frozenset({"inference"}),
    "validation": frozenset({"training", "serving"}),
    "analysis": frozenset({"training", "serving", "validation"}),
    "sizing": frozenset({"analysis"}),
    "nccltests": frozenset({"collectives"}),
    "bench": frozenset({"nccltests"}),
    "traces": frozenset({"nccltests"}),
    "calibration": frozenset({"bench", "traces"}),
    "report": frozenset({"analysis", "sizing", "calibration"}),
    "api": frozenset({"report", "sizing", "analysis", "validation", "calibration", "traffic", "training",
                      "inference", "serving"}),
    "cli": frozenset({"api", "report", "sizing", "analysis", "validation", "calibration", "traffic", "training",
                      "inference", "serving"}),
}
ENTRY = frozenset({"__init__", "__main__"})  # the top-level package and ``python -m fabricsim``


def closure(package: str) -> frozenset[str]:
    seen: set[str] = set()
    todo = [package]
    while todo:
        for dep in ALLOWED[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return frozenset(seen)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"  # the top-level package: its version only


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


@cache
def imports() -> list[tuple[str, str, int, tuple[str, ...]]]:
    """(importing module, imported module, line, names) of every fabricsim import, function-level ones too."""
    out = []
    for name, path in modules().items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    target = ".".join(base + ([target] if target else []))
                if target == "fabricsim" or target.startswith("fabricsim."):
                    names = tuple(a.name for a in node.names)
                    if target == "fabricsim":  # ``from fabricsim import units``: the submodules themselves
                        for n in names:
                            sub = f"fabricsim.{n}"
                            out.append((name, sub, node.lineno, ()) if sub in modules()
                                       else (name, target, node.lineno, (n,)))
                    else:
                        out.append((name, target, node.lineno, names))
            elif isinstance(node, ast.Import):
                out.extend((name, a.name, node.lineno, ()) for a in node.names if a.name.startswith("fabricsim."))
    return out


def test_every_package_has_a_layer() -> None:
    packages = {package_of(m) for m in modules()}
    assert packages - BASE - ENTRY == set(ALLOWED), "a new package needs its row in ALLOWED (and docs/architecture.md)"


Import = tuple[str, str, int, tuple[str, ...]]


def climbs(found: list[Import]) -> list[str]:
    """Imports of a package outside the closure of its row in ALLOWED."""
    bad = []
    for importer, target, line, _ in found:
        src, dst = package_of(importer), package_of(target)
        if src == dst or dst in BASE | ENTRY or src in ENTRY:
            continue
        if src in BASE or dst not in closure(src):
            bad.append(f"{importer}:{line} imports {target} ({src} may use {sorted(closure(src)) or 'nothing'})")
    return bad


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_crossings(found: list[Import]) -> list[str]:
    """Private names (or private modules) imported from another package."""
    bad = [f"{importer}:{line} imports {n} from {target}" for importer, target, line, names in found
           for n in names if is_private(n) and package_of(importer) != package_of(target)]
    bad += [f"{importer}:{line} imports private module {target}" for importer, target, line, _ in found
            if package_of(importer) != package_of(target) and any(is_private(p) for p in target.split(".")[1:])]
    return bad


def submodule_reaches(found: list[Import]) -> list[str]:
    """Imports of another package's submodule instead of the package's public names."""
    return [f"{importer}:{line} imports {target}" for importer, target, line, _ in found
            if package_of(importer) != package_of(target) and package_of(target) not in BASE
            and target.count(".") > 1]


def test_no_package_imports_a_higher_layer() -> None:
    bad = climbs(imports())
    assert not bad, "\n".join(bad)


def test_no_private_name_crosses_a_package() -> None:
    bad = private_crossings(imports())
    assert not bad, "\n".join(bad)


def test_other_packages_use_only_a_package_s_public_names() -> None:
    """Outside a package, ``from fabricsim.pkg import name`` only: never its submodules."""
    bad = submodule_reaches(imports())
    assert not bad, "\n".join(bad)


def test_the_checks_catch_what_they_forbid() -> None:
    """Each check flags a synthetic offence and passes its lawful twin."""
    assert climbs([("fabricsim.model.spec", "fabricsim.training", 1, ("ParallelPlan",))])
    assert climbs([("fabricsim.inference.plan", "fabricsim.training", 1, ("ParallelPlan",))])
    assert climbs([("fabricsim.catalog.models", "fabricsim.topology", 1, ("Topology",))])
    assert not climbs([("fabricsim.training.step", "fabricsim.collectives", 1, ("GroupShape",))])
    assert private_crossings([("fabricsim.sizing.space", "fabricsim.training", 1, ("_stage",))])
    assert not private_crossings([("fabricsim.training.step", "fabricsim.training.stage", 1, ("_stage",))])
    assert submodule_reaches([("fabricsim.cli.train_cmd", "fabricsim.training.step", 1, ("LAYERS",))])
    assert not submodule_reaches([("fabricsim.cli.train_cmd", "fabricsim.training", 1, ("LAYERS",))])


def test_no_import_cycle_between_modules() -> None:
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for importer, target, _, names in imports():
        if target not in graph:
            continue
        deps = {target}
        # ``from pkg import sub``: the submodule, when it is one
        deps |= {f"{target}.{n}" for n in names if f"{target}.{n}" in graph}
        # a package's own modules importing it by name would need its __init__ first: count that edge too
        graph[importer] |= deps - {importer}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_no_module_over_500_lines() -> None:
    long = {m: n for m, p in modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these by job: {long}"


def test_the_readme_table_is_the_rule() -> None:
    """The architecture table (docs/architecture.md) names every package with the same 'may import' row as ALLOWED."""
    section = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            deps = cells[2]
            for name in (n.strip(" `") for n in cells[0].split(",")):
                rows[name] = deps
    documented = set(ALLOWED)
    assert documented | BASE <= set(rows), f"undocumented: {sorted(documented | BASE - set(rows))}"
    for name in documented:
        listed = frozenset() if rows[name] == "-" else frozenset(d.strip() for d in rows[name].split(","))
        if name == "cli":
            assert listed == {"every package"}
            continue
        assert listed == ALLOWED[name], f"README row of {name}: {sorted(listed)} != {sorted(ALLOWED[name])}"


HEAVY = ("matplotlib", "pandas", "pyarrow", "torch", "ray", "scipy.optimize")


def test_importing_the_model_packages_loads_no_plotting_or_fitting_library() -> None:
    """Package re-exports stay light: plots, fits and frames load on first use (``fabricsim.lazy``), not when a
    benchmark rank or a CLI command imports the package."""
    code = ("import sys\nimport fabricsim.topology, fabricsim.comm, fabricsim.training, fabricsim.inference, "
            "fabricsim.serving, fabricsim.bench, fabricsim.nccltests, fabricsim.traces, fabricsim.calibration, "
            "fabricsim.validation\n"
            f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(SRC.parent)))
    assert "LOADED []" in proc.stdout, proc.stdout + proc.stderr


def test_a_lazy_export_resolves_on_first_use() -> None:
    import fabricsim.calibration as calibration
    from fabricsim.calibration.fit import calibrate
    from fabricsim.calibration.measurements import load_results

    assert calibration.calibrate is calibrate and calibration.load_results is load_results
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = calibration.nothing

"""How src/fabricsim/validation/data/ledger.yaml was backfilled (issue 45; kept for the record: the ledger is
append-only, new entries come from `python -m fabricsim.validation.ledger enter`). Its output was chained by
`fabricsim.validation.ledger.append` into the packaged file.

Backfill a blind-residual ledger for fabricsim's validation cases.

Usage:  .venv/bin/python tools/ledger_backfill.py [HEAD_SHA]   (work files under $LEDGER_WORK, default /tmp/ledger)
        (default HEAD_SHA is the commit pinned below; pin it so reruns give the same ledger while /work/main moves)

How cases map to commits
  * Every commit reachable from HEAD is listed (git rev-list --topo-order --parents). For each commit the blobs of
    src/fabricsim/validation/data/*.yaml (settings.yaml excluded: it configures, holds no cases) are parsed once per
    blob and the `id` of every mapping under `cases`, `collective_cases` and `training_cases` is collected.
  * A commit *introduces* an id when the id is in its tree and in none of its parents' trees. `arrived` is the
    introducing commit (earliest by committer date, then topo order, if there were several; there are none today).
  * Cross-check (done once by hand, results in REPORT.md): `git log --reverse -S<id>` over the whole repository gives
    the same first commit for all 281 ids, so no case lived elsewhere in git (tests, Python) before its data file.
    /work/shared/validation/*.yaml is not under git; its four files are byte-identical to the packaged copies at HEAD.
How parents run
  * parent = first parent of `arrived`. One detached worktree per parent under /tmp/ledger/wt-<sha>.
  * The arrival commit's case files (all data/*.yaml but settings.yaml) are written to /tmp/ledger/data/<arrived>/ and
    the parent's own CLI is run: FABRICSIM_VALIDATION_DIR=<that dir> PYTHONPATH=<wt>/src
    /work/main/.venv/bin/python -m fabricsim validate --json (cwd /tmp/ledger/run, no ../shared beside the worktree).
    Every parent's validation/cases.py honours FABRICSIM_VALIDATION_DIR (checked below); the parent's own packaged
    settings.yaml is used (it is byte-identical to the arrival commit's for every arrival commit but the one that
    added it, 42484c9, whose parent has no settings mechanism at all).
  * The parent's JSON (new layout: `cases` + `not_expressible`; old layout before 42484c9: `results`) gives the
    prediction and the error. A case the parent lists as not expressible, or does not list at all (older validate
    commands read only nccl_tests.yaml and training.yaml), gets blind_predicted null and a blind_note.
  * If the full run fails, each arrival file is run on its own (a dir holding just that file).
  * No fallback that feeds cases to parent internals is used: an old runner ignores fields it does not know
    (metric: time_us, overlays, settings), so its number would not be a prediction of the case as defined.
Errors
  * blind_error is the parent's reported `error`, i.e. predicted/measured - 1 (the formula of every commit involved,
    for time-like and rate-like metrics alike), measured being the arrival data's value as the parent read it.
  * current_* come from HEAD's `validate --json` run in a worktree of HEAD (packaged data only; /work/main's
    working tree and ../shared are not read).
Output: /tmp/ledger/ledger.yaml (sorted by arrived date, then id); raw JSON of every run in /tmp/ledger/out/.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = str(Path(__file__).resolve().parents[1])
PY = sys.executable
ROOT = Path(os.environ.get("LEDGER_WORK", "/tmp/ledger"))
DATA = "src/fabricsim/validation/data"
HEAD = next((a for a in sys.argv[1:] if not a.startswith("--")), None) or "c3e3d7bcfecf4f94f15dbb8dd9ef9547177308d0"
LAYOUT_KEYS = ("cases", "collective_cases", "training_cases")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout


def case_files(commit: str) -> dict[str, str]:
    """name -> blob of each case file of the data dir at `commit` (settings.yaml excluded)."""
    out = {}
    for line in git("ls-tree", commit, "--", DATA + "/").splitlines():
        meta, path = line.split("\t")
        name = path.rsplit("/", 1)[1]
        if name.endswith(".yaml") and name not in ("settings.yaml", "ledger.yaml"):
            out[name] = meta.split()[2]
    return out


_blob_ids: dict[str, set[str]] = {}


def ids_of_blob(blob: str) -> set[str]:
    if blob not in _blob_ids:
        data = yaml.safe_load(git("cat-file", "-p", blob))
        ids = set()
        if isinstance(data, dict):
            for key in LAYOUT_KEYS:
                for item in data.get(key) or []:
                    if isinstance(item, dict) and "id" in item:
                        ids.add(str(item["id"]))
        _blob_ids[blob] = ids
    return _blob_ids[blob]


def arrivals(head: str) -> tuple[dict[str, str], dict[str, str]]:
    """id -> arrival commit and id -> file it arrived in, for every id in HEAD's data."""
    rows = [line.split() for line in git("rev-list", "--topo-order", "--reverse", "--parents", head).splitlines()]
    order = {row[0]: n for n, row in enumerate(rows)}
    ids_at: dict[str, dict[str, str]] = {}
    for row in rows:
        ids_at[row[0]] = {i: name for name, blob in case_files(row[0]).items() for i in ids_of_blob(blob)}
    intro: dict[str, list[str]] = {}
    for row in rows:
        commit, parents = row[0], row[1:]
        for i in ids_at[commit]:
            if all(i not in ids_at[p] for p in parents):
                intro.setdefault(i, []).append(commit)
    arrived, file_of = {}, {}
    for i in ids_at[head]:
        first = min(intro[i], key=lambda c: (commit_date(c), order[c]))
        arrived[i], file_of[i] = first, ids_at[first][i]
    return arrived, file_of


_dates: dict[str, str] = {}


def commit_date(commit: str) -> str:
    if commit not in _dates:
        _dates[commit] = git("show", "-s", "--format=%cI", commit).strip()
    return _dates[commit]


def worktree(commit: str) -> Path:
    path = ROOT / f"wt-{commit}"
    if not (path / "src").is_dir():
        subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", str(path), commit],
                       capture_output=True, text=True, check=True)
    return path


def export_cases(commit: str, names: list[str] | None = None) -> Path:
    """The case files of `commit` (or just `names`) in a fresh dir."""
    dest = ROOT / "data" / (commit if names is None else f"{commit}-{'_'.join(n[:-5] for n in names)}")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name, blob in case_files(commit).items():
        if names is None or name in names:
            (dest / name).write_text(git("cat-file", "-p", blob), encoding="utf-8")
    return dest


def run_validate(wt: Path, data_dir: Path | None, tag: str) -> tuple[dict | None, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FABRICSIM_VALIDATION_DIR", "PYTHONPATH")}
    env["PYTHONPATH"] = str(wt / "src")
    if data_dir is not None:
        env["FABRICSIM_VALIDATION_DIR"] = str(data_dir)
    cwd = ROOT / "run"
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run([PY, "-m", "fabricsim", "validate", "--json"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    (ROOT / "out" / f"{tag}.json").write_text(proc.stdout, encoding="utf-8")
    (ROOT / "out" / f"{tag}.stderr").write_text(proc.stderr, encoding="utf-8")
    try:
        return json.loads(proc.stdout), ""
    except json.JSONDecodeError:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        return None, f"rc={proc.returncode}: {last[:200]}"


def results_of(doc: dict) -> tuple[dict[str, dict], dict[str, str]]:
    """Counted results by id and not-expressible reasons by id, from either JSON layout."""
    counted = {r["id"]: r for r in doc.get("cases", doc.get("results", []))}
    reasons = {r["id"]: r["reason"] for r in doc.get("not_expressible", [])}
    return counted, reasons


def head_kinds(wt: Path) -> dict[str, str]:
    """id -> loader kind (collective / training / inference) from HEAD's own loader."""
    code = ("import json; from fabricsim.validation.cases import all_cases; "
            "print(json.dumps({c.id: c.kind for c in all_cases()}))")
    env = {k: v for k, v in os.environ.items() if k != "FABRICSIM_VALIDATION_DIR"}
    env["PYTHONPATH"] = str(wt / "src")
    out = subprocess.run([PY, "-c", code], cwd=ROOT / "run", env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def has_validate(commit: str) -> bool:
    return bool(git("ls-tree", "--name-only", commit, "--", "src/fabricsim/cli/validate_cmd.py").strip())


def reads_env(commit: str) -> bool:
    try:
        return "FABRICSIM_VALIDATION_DIR" in git("show", f"{commit}:src/fabricsim/validation/cases.py")
    except subprocess.CalledProcessError:
        return False


def main() -> None:
    head = git("rev-parse", HEAD).strip()
    (ROOT / "out").mkdir(parents=True, exist_ok=True)
    (ROOT / "run").mkdir(exist_ok=True)
    arrived, file_of = arrivals(head)

    head_wt = worktree(head)
    head_doc, err = run_validate(head_wt, None, f"head-{head[:12]}")
    if head_doc is None:
        raise SystemExit(f"HEAD validate failed: {err}")
    cur, cur_reasons = results_of(head_doc)
    kinds = head_kinds(head_wt)

    blind: dict[str, dict] = {}
    notes: dict[str, str] = {}
    commits_meta = {}
    for commit in sorted(set(arrived.values()), key=lambda c: (commit_date(c), c)):
        parent = git("rev-parse", f"{commit}^1").strip()
        ids = sorted(i for i in arrived if arrived[i] == commit)
        files = sorted({file_of[i] for i in ids})
        meta = {"parent": parent, "ids": len(ids), "files": files, "runs": []}
        commits_meta[commit] = meta
        if not has_validate(parent):
            for i in ids:
                notes[i] = "parent predates the model: no validate command (collective model and validation set " \
                           "arrive in this commit)"
            meta["runs"].append("parent has no validate command")
            continue
        if not reads_env(parent):
            for i in ids:
                notes[i] = "parent's case loader does not read FABRICSIM_VALIDATION_DIR"
            continue
        wt = worktree(parent)
        same_settings = (git("ls-tree", commit, "--", f"{DATA}/settings.yaml").split()[2:3]
                         == git("ls-tree", parent, "--", f"{DATA}/settings.yaml").split()[2:3])
        meta["settings_identical"] = same_settings
        doc, err = run_validate(wt, export_cases(commit), f"parent-{parent[:12]}-of-{commit[:12]}")
        docs = []
        if doc is not None:
            docs.append(doc)
            meta["runs"].append("full run ok")
        else:
            meta["runs"].append(f"full run failed ({err}); per file")
            for name in files:
                d, e = run_validate(wt, export_cases(commit, [name]),
                                    f"parent-{parent[:12]}-of-{commit[:12]}-{name[:-5]}")
                meta["runs"].append(f"{name}: {'ok' if d is not None else e}")
                if d is not None:
                    docs.append(d)
                else:
                    for i in ids:
                        if file_of[i] == name:
                            notes[i] = f"parent's validate crashed on {name}: {e}"
        counted, reasons = {}, {}
        for d in docs:
            c, r = results_of(d)
            counted.update(c)
            reasons.update(r)
        if reads_only_fixed_names(parent):
            tier2(commit, parent, wt, [i for i in ids if i not in counted and i not in reasons], file_of,
                  counted, notes, meta)
        for i in ids:
            if i in counted:
                blind[i] = counted[i]
            elif i in reasons:
                notes[i] = f"parent reports not expressible: {reasons[i]}"
            elif i not in notes:
                notes[i] = (f"parent's validate does not run {file_of[i]} (it reads only "
                            + ", ".join(sorted(read_files(d) for d in docs) or ["?"])
                            + ")" if docs else f"parent's validate produced no result for {file_of[i]}")

    rows = []
    for i in arrived:
        commit = arrived[i]
        b = blind.get(i)
        c = cur.get(i)
        rows.append({
            "id": i,
            "group": c["group"] if c else group_of_reason(head_doc, i),
            "kind": kinds.get(i),
            "file": file_of[i],
            "arrived": commit,
            "arrived_date": commit_date(commit),
            "parent": commits_meta[commit]["parent"],
            "measured": (c or b or {}).get("measured"),
            "unit": (c or b or {}).get("unit"),
            "blind_predicted": in_head_unit(b, c)[0] if b else None,
            "blind_error": b["error"] if b else None,
            "blind_note": None if b else notes.get(i, "no result"),
            "blind_method": (b.get("method", "parent's validate --json on the arrival data") if b else None),
            "blind_measured_raw": b["measured"] if b else None,
            "blind_predicted_raw": b["predicted"] if b else None,
            "blind_unit_raw": b["unit"] if b else None,
            "blind_unit_note": in_head_unit(b, c)[1] if b else None,
            "current_measured": c["measured"] if c else None,
            "current_predicted": c["predicted"] if c else None,
            "current_error": c["error"] if c else None,
            "current_note": None if c else f"not expressible at HEAD: {cur_reasons.get(i)}",
        })
    rows.sort(key=lambda r: (r["arrived_date"], r["id"]))
    with open(ROOT / "ledger.yaml", "w", encoding="utf-8") as fh:
        fh.write(f"# blind-residual ledger: HEAD {head}; made by /tmp/ledger/backfill.py\n")
        yaml.safe_dump(rows, fh, sort_keys=False, width=200, allow_unicode=True)
    with open(ROOT / "out" / "commits.json", "w", encoding="utf-8") as fh:
        json.dump({c: {**m, "date": commit_date(c)} for c, m in commits_meta.items()}, fh, indent=1, sort_keys=True)
    print(f"{len(rows)} cases, {sum(r['blind_predicted'] is not None for r in rows)} with a blind prediction")
    if "--keep-worktrees" not in sys.argv:
        for wt in sorted(ROOT.glob("wt-*")):
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", str(wt)], capture_output=True,
                           text=True)


# Fields the pre-42484c9 collective runner reads (system, nodes, gpus, op, size_bytes, algo, busbw_GBps) plus fields
# that only describe a case (no effect on the prediction). A case with any other field, or with a metric other than
# busbw, is not served to an old runner: it would ignore what it does not know and predict a different quantity.
OLD_RUNNER_FIELDS = {"id", "system", "nodes", "gpus", "op", "size_bytes", "algo", "busbw_GBps", "metric", "source",
                     "hardware", "compare_unit", "published", "kind", "quality", "tol", "note", "notes", "conversion",
                     "settings_not_expressible", "expressible"}


def reads_only_fixed_names(commit: str) -> bool:
    """The pre-42484c9 validate: reads exactly nccl_tests.yaml and training.yaml (a `cases:` list each)."""
    text = git("show", f"{commit}:src/fabricsim/cli/validate_cmd.py")
    return 'load_cases("nccl_tests.yaml")' in text and "all_cases" not in text


def old_runner_can_express(case: dict, kind: str) -> str | None:
    """None if the old collective runner reads every field that shapes this case's prediction; else why not."""
    if kind != "collective":
        return "old runner has no validation path for this file's training/inference cases"
    extra = sorted(set(case) - OLD_RUNNER_FIELDS)
    if extra:
        return f"fields the old runner does not read: {', '.join(extra)}"
    if case.get("metric", "busbw_GBps") != "busbw_GBps" or "busbw_GBps" not in case:
        return f"metric {case.get('metric')} (old runner compares busbw only)"
    if "gpus" not in case and "nodes" not in case:
        return "neither gpus nor nodes"
    if case.get("expressible") is False:
        return "marked expressible: false in the arrival data"
    return None  # settings_not_expressible is a note for readers: no runner of any commit reads it


def gpus_per_node(wt: Path, system: str) -> int | None:
    """The parent catalog's GPUs per node of `system` (None if the parent's catalog lacks it)."""
    code = ("import sys; from fabricsim.catalog import default_catalog; "
            "print(default_catalog().system(sys.argv[1]).gpus_per_node)")
    env = {k: v for k, v in os.environ.items() if k != "FABRICSIM_VALIDATION_DIR"}
    env["PYTHONPATH"] = str(wt / "src")
    out = subprocess.run([PY, "-c", code, system], cwd=ROOT / "run", env=env, capture_output=True, text=True)
    return int(out.stdout.strip()) if out.returncode == 0 else None


def tier2(commit: str, parent: str, wt: Path, ids: list[str], file_of: dict[str, str], counted: dict,
          notes: dict[str, str], meta: dict) -> None:
    """Serve the arrival commit's eligible collective cases to the old parent under the one name its validate reads
    (nccl_tests.yaml, layout `cases:`), unchanged otherwise; per case if the batch run crashes."""
    wanted = set(ids)
    eligible: list[dict] = []
    filled: set[str] = set()
    for name, blob in sorted(case_files(commit).items()):
        data = yaml.safe_load(git("cat-file", "-p", blob))
        for key in LAYOUT_KEYS:
            kind = {"collective_cases": "collective", "training_cases": "training"}.get(key, "plain")
            if kind == "plain":
                kind = "inference" if "inference" in name else "collective"
            for case in data.get(key) or []:
                cid = str(case.get("id"))
                if cid not in wanted:
                    continue
                why = old_runner_can_express(case, kind)
                if why:
                    notes[cid] = f"parent's validate reads only nccl_tests.yaml and training.yaml; not served " \
                                 f"to it as nccl_tests.yaml: {why}"
                elif "gpus" not in case:
                    per_node = gpus_per_node(wt, str(case["system"]))
                    if per_node is None:
                        notes[cid] = f"parent's catalog has no system {case['system']!r}"
                    else:  # the arrival-era loader's default (validation.collective_cases.case_model)
                        eligible.append({**case, "gpus": int(case["nodes"]) * per_node})
                        filled.add(cid)
                else:
                    eligible.append(case)
    meta["tier2_eligible"] = len(eligible)
    if not eligible:
        return

    def serve(cases: list[dict], tag: str) -> tuple[dict | None, str]:
        dest = ROOT / "data" / tag
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        (dest / "nccl_tests.yaml").write_text(yaml.safe_dump({"cases": cases}, sort_keys=False), encoding="utf-8")
        return run_validate(wt, dest, tag)

    doc, err = serve(eligible, f"tier2-{commit[:12]}")
    batches = [(eligible, doc, err)]
    if doc is None:
        meta["runs"].append(f"served as nccl_tests.yaml: batch failed ({err}); per case")
        batches = [([c], *serve([c], f"tier2-{commit[:12]}-{c['id']}")) for c in eligible]
    else:
        meta["runs"].append(f"served {len(eligible)} cases as nccl_tests.yaml: ok")
    for cases, d, e in batches:
        got = results_of(d)[0] if d is not None else {}
        for c in cases:
            cid = str(c["id"])
            if cid in got:
                how = "arrival case served to the parent's validate as nccl_tests.yaml"
                if cid in filled:
                    how += " (gpus = nodes x the parent catalog's GPUs per node, the later runner's default)"
                counted[cid] = {**got[cid], "method": how}
            else:
                notes[cid] = f"parent's validate crashed on the case served as nccl_tests.yaml: {e}"


def in_head_unit(b: dict, c: dict | None) -> tuple[float, str | None]:
    """The parent's prediction in HEAD's unit for the case (HEAD reports SI units: bytes/s, s, tokens/s; older
    commits GB/s, us, ms), scaled by HEAD's measured / the parent's measured when that ratio is a power of ten (a pure
    unit change); otherwise the parent's own figure and a note (the measured value itself changed)."""
    if c is None or not b["measured"]:
        return b["predicted"], (None if c is not None else "case not counted at HEAD: unit as the parent reported")
    ratio = c["measured"] / b["measured"]
    exponent = round(math.log10(ratio)) if ratio > 0 else None
    if exponent is not None and abs(ratio / 10.0 ** exponent - 1) < 1e-9:
        return b["predicted"] * 10.0 ** exponent, None
    return b["predicted"], (f"measured differs: arrival {b['measured']} {b['unit']} vs HEAD {c['measured']} "
                            f"{c['unit']}; blind_predicted left in the parent's unit")


def read_files(doc: dict) -> str:
    """The case files a parent's run says it read (old layout: summary.sources)."""
    srcs = doc.get("summary", {}).get("sources") or doc.get("inputs", {}).get("sources") or []
    return "; ".join(Path(str(s).split(" ")[0]).name for s in srcs) or "its own file list"


def group_of_reason(doc: dict, case_id: str) -> str | None:
    for r in doc.get("not_expressible", []):
        if r["id"] == case_id:
            return r["group"]
    return None


if __name__ == "__main__":
    main()

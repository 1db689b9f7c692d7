"""Bad and edge inputs across every command: each exits 2 with exactly one `error:` line naming the field or file,
no traceback, within 10 s, and writes no file.

Each case runs the console entry point (``fabricsim.cli.main``, which turns usage errors into one line) in-process
with a temporary working directory holding the generated bad files.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from fabricsim.cli import main

DATA = Path(__file__).parent / "data"
LOG = str(DATA / "nccl-tests" / "h100-2node-16gpu-all_reduce.log")

GOOD_MODEL = {"name": "tiny", "layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}


def _yaml_model(**fields: object) -> str:
    data = {**GOOD_MODEL, **fields}
    return "\n".join(f"{k}: {v}" for k, v in data.items()) + "\n"


def _json_model(text_fields: str) -> str:
    base = json.dumps(GOOD_MODEL)[:-1]
    return base + ", " + text_fields + "}"


LINK = ("links:\n  - id: ib-ndr\n    name: x\n    kind: infiniband\n    generation: ndr\n    unit: port\n"
        "    bytes_per_s: {rate}\n    latency_s: 1us\n    source: test\n    efficiency: 0.9\n")

LOG_HEAD = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20\n"
            "# Using devices\n"
            "#  Rank  0 Group  0 Pid   1200 on        dgx device  0 [0x19] NVIDIA H100 80GB HBM3\n"
            "#  Rank  1 Group  0 Pid   1201 on        dgx device  1 [0x3b] NVIDIA H100 80GB HBM3\n"
            "#                                                   out-of-place                       in-place\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
            "  (GB/s)\n")


def _log(row: str) -> str:
    return "# Collective test starting: all_reduce_perf\n" + LOG_HEAD + row + "\n# Avg bus bandwidth    : 1\n"


# Bad files generated in the temporary working directory: name -> content (bytes, or text written as UTF-8).
FILES: dict[str, bytes | str] = {
    "latin1.yaml": "name: caf\xe9\nlayers: 2\n".encode("latin-1"),
    "latin1.json": b'{"name": "caf\xe9"}',
    "utf16.yaml": "name: x\n".encode("utf-16"),
    "nul.yaml": b"name: x\x00\n",
    "deep.json": b"[" * 10_000 + b"]" * 10_000,
    "deep.yaml": b"[" * 10_000 + b"]" * 10_000,
    "deepmap.yaml": ("a:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(200))).encode(),
    "dup.yaml": _yaml_model() + "layers: 3\n",
    "nan.json": _json_model('"extra": NaN'),
    "inf.json": _json_model('"extra": Infinity'),
    "big.json": json.dumps({**GOOD_MODEL, "layers": 2}).replace("256", "1e400"),
    "true-layers.yaml": _yaml_model(layers="true"),
    "1e12-layers.json": json.dumps({**GOOD_MODEL, "layers": 1e12}),
    "1e40-hidden.json": json.dumps({**GOOD_MODEL, "hidden": 1e40}),
    "float-layers.json": json.dumps({**GOOD_MODEL, "layers": 2.5}),
    "neg-layers.yaml": _yaml_model(layers=-1),
    "huge-vocab.yaml": _yaml_model(vocab=10**15),
    "huge-heads.yaml": _yaml_model(heads=2**40, hidden=2**40),
    "str-layers.yaml": _yaml_model(layers='"many"'),
    "nan-hidden.yaml": _yaml_model(hidden=".nan"),
    "syntax.yaml": "name: [x\nlayers: 2\n",
    "tabs.yaml": "name: x\n\tlayers: 2\n",
    "list.yaml": "- 1\n- 2\n",
    "empty.yaml": "",
    "unknown.yaml": _yaml_model(layerz=3),
    "bomb.yaml": "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    "zero-bw.yaml": LINK.format(rate="0GB/s"),
    "nan-bw.yaml": LINK.format(rate=".nan"),
    "inf-bw.yaml": LINK.format(rate=".inf"),
    "neg-bw.yaml": LINK.format(rate="-5"),
    "zero-hbm.yaml": "gpus:\n  - id: h100-sxm\n    hbm_bytes: 0\n",
    "dup-overlay.yaml": LINK.format(rate="50GB/s") + "links: []\n",
    "badcat.yaml": "widgets: []\n",
    "neg-time.log": _log("           8             2     float     sum      -1    -5.00    0.00    0.00       0"
                         "     5.00    0.00    0.00       0"),
    "zero-time.log": _log("           8             2     float     sum      -1     0.00    0.00    0.00       0"
                          "     0.00    0.00    0.00       0"),
    "bad-size.log": _log("           7             2     float     sum      -1     5.00    0.00    0.00       0"
                         "     5.00    0.00    0.00       0"),
    "huge-size.log": _log("  99999999999999999999999999            2     float     sum      -1     5.00    0.00"
                          "    0.00       0     5.00    0.00    0.00       0"),
    "inf-time.log": _log("           8             2     float     sum      -1      inf    0.00    0.00       0"
                         "      inf    0.00    0.00       0"),
    "empty.log": "",
    "binary.log": bytes(range(256)) * 4,
    "nonutf8.log": _log("").encode() + b"\xff\xfe garbage\n",
    "results-nan.json": '[{"op": "all_reduce", "rows": [{"size_bytes": 8, "time_s": NaN}]}]',
    "results-deep.json": "[" * 5000 + "]" * 5000,
    "results-bad.json": '{"op": "all_reduce", "rows": [{"size_bytes": -8}]}',
    "jobs-dup.yaml": "jobs:\n  - {gpus: 8, pattern: ring, bytes: 1M}\njobs: []\n",
    "jobs-negstart.yaml": "jobs:\n  - {gpus: 8, pattern: ring, bytes: 1M, start: -1}\n",
    "jobs-nanstart.yaml": "jobs:\n  - {gpus: 8, pattern: ring, bytes: 1M, start: .nan}\n",
    "jobs-zerobytes.yaml": "jobs:\n  - {gpus: 8, pattern: ring, bytes: 0}\n",
    "jobs-hugebytes.yaml": "jobs:\n  - {gpus: 8, pattern: ring, bytes: 1Z}\n",
    "jobs-zerogpus.yaml": "jobs:\n  - {gpus: 0, pattern: ring, bytes: 1M}\n",
    "jobs-latin1.yaml": b"jobs:\n  - {name: caf\xe9, gpus: 8, pattern: ring, bytes: 1M}\n",
    "jobs-deep.yaml": b"jobs: " + b"[" * 10_000 + b"]" * 10_000,
    "jobs-badkey.yaml": "jobs:\n  - {gpus: 8, pattern: ring, bytes: 1M, colour: red}\n",
    "adir/keep": "",
}

ARGV = list[str]
# (id, argv, text the error line must contain)
CASES: list[tuple[str, ARGV, str]] = []


def case(ident: str, argv: ARGV, names: str) -> None:
    CASES.append((ident, argv, names))


# ---- infer: plan, formats, serving options, traces, paths ----
INFER = ["infer", "--model", "llama3-70b", "--tp", "8"]
for flag, value in (("--tp", "0"), ("--tp", "3"), ("--pp", "0"), ("--batch", "0"), ("--batch", "-1"),
                    ("--prompt", "0"), ("--prompt", "10000000"), ("--output", "0"), ("--weights", "fp3"),
                    ("--weights", ""), ("--kv", "int8"), ("--ep", "2"), ("--gpus", "16"), ("--rate", "nan"),
                    ("--rate", "inf"), ("--rate", "-1"), ("--rate", "0"), ("--rate", "1e400"), ("--duration", "0s"),
                    ("--duration", "forever"), ("--duration", "-5s"), ("--slo-ttft", "0s"), ("--slo-tpot", "fast"),
                    ("--replicas", "0"), ("--disagg", "2"), ("--disagg", "0:1"), ("--disagg", "a:b"),
                    ("--max-seqs", "0"), ("--max-batched-tokens", "0"), ("--oversubscription", "nan"),
                    ("--plot", ""), ("--plot", "."), ("--plot", "nodir/x.png"), ("--plot", "x.txt")):
    extra = ["--rate", "1"] if flag in ("--duration", "--slo-ttft", "--slo-tpot", "--replicas", "--disagg",
                                        "--max-seqs", "--max-batched-tokens") else []
    case(f"infer{flag}-{value or 'empty'}", [*INFER, *extra, flag, value], flag.lstrip("-").split("-")[0])
for name in ("latin1.yaml", "deep.json", "missing.jsonl"):
    case(f"infer-trace-{name}", [*INFER, "--trace", name], name)
case("infer-trace-dev-zero", [*INFER, "--trace", "/dev/zero"], "/dev/zero")
case("infer-rate-and-trace", [*INFER, "--rate", "1", "--trace", "latin1.yaml"], "--trace")
case("infer-model-latin1", ["infer", "--model", "latin1.yaml"], "latin1.yaml")
# ---- size: constraints and sizes that cannot be met or built ----
SIZE = ["size", "--model", "llama3-70b", "--tokens", "1T"]
for args, name in ((["--gpus", "1..1000000000"], "--gpus"), (["--nodes", "4000000"], "--nodes"),
                   (["--deadline", "0d"], "--deadline"), (["--power-cap", "0MW"], "--power-cap"),
                   (["--budget", "0"], "--budget"), (["--top", "0"], "--top")):
    case(f"size-bound-{name.lstrip('-')}-{args[1]}", [*SIZE, *args], name)
# ---- size --inference ----
SIZE_INF = ["size", "--inference", "--model", "llama3-70b", "--systems", "dgx-h100"]
for args, name in ((["--rate", "-1", "--slo-ttft", "2s", "--slo-tpot", "50ms"], "rate"),
                   (["--rate", "nan", "--slo-ttft", "2s", "--slo-tpot", "50ms"], "rate"),
                   (["--rate", "20", "--slo-ttft", "0s", "--slo-tpot", "50ms"], "slo-ttft"),
                   (["--rate", "20", "--slo-ttft", "2s", "--slo-tpot", "1us"], "tpot"),
                   (["--rate", "20", "--slo-ttft", "2s", "--slo-tpot", "50ms", "--weights", "fp3"], "weights"),
                   (["--rate", "20", "--slo-ttft", "2s", "--slo-tpot", "50ms", "--systems", "nope"], "nope")):
    case(f"size-inference-{name}-{len(CASES)}", [*SIZE_INF, *args], name)


# ---- collective: numbers ----
for value in ("nan", "inf", "-inf", "1", "0.5", "0", "-2", "1.0000001", "1e400"):
    case(f"collective-step-factor-{value}", ["collective", "--step-factor", value], "--step-factor")
for value in ("0", "-1", "100000", "nan"):
    case(f"collective-nodes-{value}", ["collective", "--nodes", value], "--nodes")
for value in ("0", "-1", "9"):
    case(f"collective-gpus-{value}", ["collective", "--gpus", value], "--gpus")
case("collective-ranks-per-node-0", ["collective", "--ranks-per-node", "0"], "--ranks-per-node")
for value in ("nan", "inf", "0", "0.5", "1e300", "-1"):
    case(f"collective-oversub-{value}", ["collective", "--sim", "flow", "--oversubscription", value],
         "--oversubscription")
case("collective-huge-cluster", ["collective", "--nodes", "100000"], "--nodes")
case("collective-1m-gpus-flow", ["collective", "--nodes", "125000", "--sim", "flow"], "--nodes")
# ---- collective: sizes ----
for value in ("1e400", "1P", "1Z", "2T", "-1", "", "12Q", "1.5", "nan", "inf", "0", "1", "3"):
    case(f"collective-max-{value or 'empty'}", ["collective", "--min", "4", "--max", value], "--max")
for value in ("0", "2", "1P", "1e400", "abc"):
    case(f"collective-min-{value}", ["collective", "--min", value, "--max", "8G"], "--min")
case("collective-min-above-max", ["collective", "--min", "1G", "--max", "1K"], "--max")
case("collective-rows-cap", ["collective", "--min", "8", "--max", "1T", "--step-factor", "1.0001"], "--step-factor")
# ---- collective: names ----
case("collective-op", ["collective", "--op", "allreduce_x"], "op")
case("collective-algo", ["collective", "--algo", "warp"], "algo")
case("collective-proto", ["collective", "--proto", "LL256"], "proto")
case("collective-dtype", ["collective", "--dtype", "float7"], "dtype")
case("collective-sim", ["collective", "--sim", "quantum"], "--sim")
case("collective-ib-empty", ["collective", "--nodes", "2", "--ib", ""], "--ib")
case("collective-ib", ["collective", "--nodes", "2", "--ib", "qdr9"], "ib")
case("collective-system", ["collective", "--system", "dgx-h900"], "system")
case("collective-routing", ["collective", "--sim", "flow", "--nodes", "2", "--routing", "magic"], "routing")
# ---- collective: paths ----
case("collective-plot-dir", ["collective", "--plot", "adir"], "--plot")
case("collective-plot-dir-slash", ["collective", "--plot", "adir/"], "--plot")
case("collective-plot-empty", ["collective", "--plot", ""], "--plot")
case("collective-plot-no-parent", ["collective", "--plot", "missing/x.png"], "--plot")
case("collective-plot-unwritable", ["collective", "--plot", "/proc/x.png"], "--plot")
case("collective-plot-no-suffix", ["collective", "--plot", "busbw"], "--plot")
case("collective-plot-bad-suffix", ["collective", "--plot", "busbw.txt"], "--plot")
case("collective-plot-devnull-dir", ["collective", "--plot", "/dev/null/x.png"], "--plot")
# ---- collective: overlays ----
for name in ("zero-bw.yaml", "nan-bw.yaml", "inf-bw.yaml", "neg-bw.yaml", "zero-hbm.yaml", "dup-overlay.yaml",
             "badcat.yaml", "latin1.yaml", "utf16.yaml", "deep.yaml", "deepmap.yaml", "syntax.yaml", "tabs.yaml",
             "nul.yaml", "bomb.yaml"):
    case(f"collective-overlay-{name}", ["collective", "--nodes", "2", "--calibration", name], name)
case("collective-overlay-missing", ["collective", "--calibration", "nope.yaml"], "nope.yaml")
case("collective-overlay-dir", ["collective", "--calibration", "adir"], "adir")
case("collective-overlay-devzero", ["collective", "--calibration", "/dev/zero"], "/dev/zero")
case("collective-overlay-empty-name", ["collective", "--calibration", ""], "''")

# ---- topo ----
for value in ("0", "-3", "100000"):
    case(f"topo-nodes-{value}", ["topo", "--nodes", value], "nodes")
for value in ("nan", "inf", "0", "1e300"):
    case(f"topo-oversub-{value}", ["topo", "--nodes", "4", "--oversubscription", value], "oversubscription")
case("topo-ib-empty", ["topo", "--nodes", "2", "--ib", ""], "--ib")
case("topo-eth-empty", ["topo", "--nodes", "2", "--eth", ""], "--eth")
case("topo-switch-empty", ["topo", "--nodes", "2", "--switch", ""], "--switch")
case("topo-ib-bad", ["topo", "--nodes", "2", "--ib", "zdr"], "link")
case("topo-fabric", ["topo", "--fabric", "hypercube"], "fabric")
case("topo-tiers", ["topo", "--tiers", "9"], "tiers")
case("topo-torus-dims", ["topo", "--fabric", "torus", "--torus-dims", "0x1x1"], "torus_dims")
case("topo-torus-dims-text", ["topo", "--fabric", "torus", "--torus-dims", "axbxc"], "torus_dims")
case("topo-plot-dir", ["topo", "--plot", "adir"], "--plot")
case("topo-plot-empty", ["topo", "--plot", ""], "--plot")
case("topo-plot-no-parent", ["topo", "--plot", "nowhere/x.png"], "--plot")
case("topo-overlay-zero-bw", ["topo", "--nodes", "2", "--calibration", "zero-bw.yaml"], "zero-bw.yaml")
case("topo-overlay-latin1", ["topo", "--calibration", "latin1.yaml"], "latin1.yaml")
case("topo-node-cable", ["topo", "--node-cable", "string"], "node_cable")

# ---- traffic ----
for value in ("0", "-1", "1e400", "1Z", "nan", "x"):
    case(f"traffic-bytes-{value}", ["traffic", "--nodes", "2", "--bytes", value], "--bytes")
case("traffic-gpus-0", ["traffic", "--nodes", "2", "--gpus", "0"], "gpus")
case("traffic-gpus-too-many", ["traffic", "--nodes", "2", "--gpus", "99"], "gpus")
case("traffic-pattern", ["traffic", "--pattern", "zigzag"], "pattern")
case("traffic-pattern-csv-missing", ["traffic", "--pattern", "nope.csv"], "nope.csv")
case("traffic-placement", ["traffic", "--nodes", "2", "--placement", "sideways"], "placement")
case("traffic-routing", ["traffic", "--routing", "magic"], "routing")
case("traffic-oversub-nan", ["traffic", "--nodes", "4", "--oversubscription", "nan"], "oversubscription")
case("traffic-plot-dir", ["traffic", "--nodes", "2", "--plot", "adir"], "--plot")
case("traffic-plot-empty", ["traffic", "--nodes", "2", "--plot", ""], "--plot")
for name in ("jobs-dup.yaml", "jobs-negstart.yaml", "jobs-nanstart.yaml", "jobs-zerobytes.yaml",
             "jobs-hugebytes.yaml", "jobs-zerogpus.yaml", "jobs-latin1.yaml", "jobs-deep.yaml", "jobs-badkey.yaml",
             "list.yaml", "empty.yaml", "syntax.yaml"):
    case(f"traffic-jobs-{name}", ["traffic", "--nodes", "2", "--jobs", name], name.removesuffix(".yaml"))
case("traffic-jobs-missing", ["traffic", "--jobs", "none.yaml"], "none.yaml")
case("traffic-jobs-dir", ["traffic", "--jobs", "adir"], "adir")
case("traffic-jobs-devzero", ["traffic", "--jobs", "/dev/zero"], "/dev/zero")

# ---- train: numbers ----
for value in ("nan", "inf", "-inf", "0", "0.5", "1e300", "65"):
    case(f"train-oversub-{value}", ["train", "--oversubscription", value, "--json"], "--oversubscription")
for flag in ("--tp", "--pp", "--cp", "--ep", "--gbs", "--seq", "--dp", "--mbs", "--vpp", "--gpus"):
    case(f"train-{flag[2:]}-0", ["train", "--gpus", "8", flag, "0"], flag[2:])
case("train-cp-0-only", ["train", "--cp", "0"], "cp")
# goodput options: storage, checkpoint interval and mode, failure-rate scale, restart
for flag, value, names in (("--checkpoint-interval", "0s", "--checkpoint-interval"),
                           ("--checkpoint-interval", "-5m", "--checkpoint-interval"),
                           ("--checkpoint-interval", "1s", "--checkpoint-interval"),
                           ("--checkpoint-mode", "sometimes", "--checkpoint-mode"),
                           ("--mtbf-scale", "0", "--mtbf-scale"),
                           ("--mtbf-scale", "-1", "--mtbf-scale"), ("--mtbf-scale", "nan", "--mtbf-scale"),
                           ("--restart", "-1m", "--restart"), ("--storage", "floppy", "storage"),
                           ("--storage-bw", "0", "--storage-bw"), ("--storage-bw", "1PB/s", "--storage-bw")):
    case(f"train-goodput{flag[1:]}-{value}", ["train", "--gpus", "64", "--tp", "8", flag, value], names)
# storage network and hot spares (train, topo, whatif, size)
for flag, value, names in (("--spares", "-1", "--spares"), ("--spares", "150%", "--spares"),
                           ("--spares", "lots", "--spares"), ("--spares", "nan%", "--spares"),
                           ("--storage-network", "wireless", "--storage-network"),
                           ("--storage-server", "floppy", "storage server"),
                           ("--storage-servers", "0", "--storage-servers")):
    case(f"train-storage{flag[1:]}-{value}", ["train", "--gpus", "64", "--tp", "8", flag, value], names)
case("train-storage-server-min", ["train", "--gpus", "64", "--tp", "8", "--storage-server", "wekapod-nitro",
                                  "--storage-servers", "4"], "--storage-servers")
case("topo-storage-servers-no-network", ["topo", "--nodes", "8", "--storage-servers", "3"], "--storage-servers")
case("topo-storage-converged-mesh", ["topo", "--nodes", "4", "--fabric", "mesh", "--storage-network", "converged"],
     "--storage-network")
case("topo-storage-network-bad", ["topo", "--nodes", "4", "--storage-network", "cloud"], "--storage-network")
case("topo-storage-bw-physics", ["topo", "--nodes", "4", "--storage-network", "separate", "--storage-bw", "1PB/s"],
     "--storage-bw")
case("topo-storage-tier-bad", ["topo", "--nodes", "4", "--storage-network", "separate", "--storage", "floppy"],
     "storage")
case("topo-storage-switch-bad", ["topo", "--nodes", "4", "--storage-network", "separate", "--storage-switch",
                                 "nvswitch-gen3"], "link")
case("traffic-checkpoint-with-jobs", ["traffic", "--nodes", "2", "--checkpoint", "llama3-8b", "--jobs",
                                      "jobs-latin1.yaml"], "--checkpoint")
case("traffic-storage-servers-alone", ["traffic", "--nodes", "2", "--storage-servers", "2"], "--storage-servers")
case("traffic-checkpoint-model", ["traffic", "--nodes", "2", "--checkpoint", "llama9-1t"], "model")
case("topo-planes-3", ["topo", "--nodes", "8", "--planes", "3"], "planes")
case("topo-planes-torus", ["topo", "--nodes", "8", "--fabric", "torus", "--planes", "2"], "planes")
case("topo-planes-0", ["topo", "--nodes", "8", "--planes", "0"], "planes")
case("size-fabric-kinds-bad", ["size", "--gpus", "64", "--fabric-kinds", "fat-tree,torus"], "--fabric-kinds")
case("size-spares-bad", ["size", "--gpus", "64", "--spares", "2%,-3"], "--spares")
case("size-storage-bad", ["size", "--gpus", "64", "--storage", "superpod-good,floppy"], "storage")
case("train-seq-huge", ["train", "--gpus", "8", "--seq", "1000000000"], "seq")
case("train-seq-1e9", ["train", "--seq", "1e9"], "--seq")
case("train-gbs-huge", ["train", "--gpus", "8", "--gbs", "100000000000"], "gbs")
case("train-zero-5", ["train", "--gpus", "8", "--zero", "5"], "zero")
case("train-recompute", ["train", "--gpus", "8", "--recompute", "some"], "recompute")
case("train-precision", ["train", "--gpus", "8", "--precision", "fp4"], "precision")
case("train-kernels", ["train", "--gpus", "8", "--kernels", "slow"], "kernels")
case("train-no-gpus", ["train"], "gpus")
case("train-pp-layout", ["train", "--gpus", "8", "--pp", "2", "--pp-layout", "a,b"], "layout")
case("train-gpus-huge", ["train", "--gpus", "1000000", "--tp", "8"], "--gpus")
case("train-gpus-huge-flow", ["train", "--gpus", "800000", "--tp", "8", "--sim", "flow"], "--gpus")
case("train-cluster-nodes-0", ["train", "--gpus", "16", "--tp", "8", "--sim", "flow", "--cluster-nodes", "0"],
     "cluster")
case("train-sim", ["train", "--sim", "quantum"], "sim")
case("train-plot-dir", ["train", "--plot", "adir"], "--plot")
case("train-plot-empty", ["train", "--plot", ""], "--plot")
case("train-plot-no-parent", ["train", "--plot", "x/y/z.png"], "--plot")
# ---- train: model files ----
for name in ("latin1.yaml", "latin1.json", "utf16.yaml", "nul.yaml", "deep.json", "deep.yaml", "deepmap.yaml",
             "dup.yaml", "nan.json", "inf.json", "big.json", "syntax.yaml", "tabs.yaml", "list.yaml", "empty.yaml",
             "bomb.yaml"):
    case(f"train-model-{name}", ["train", "--model", name], name)
for name, field in (("true-layers.yaml", "layers"), ("1e12-layers.json", "layers"), ("1e40-hidden.json", "hidden"),
                    ("float-layers.json", "layers"), ("neg-layers.yaml", "layers"), ("huge-vocab.yaml", "vocab"),
                    ("huge-heads.yaml", "hidden"), ("str-layers.yaml", "layers"), ("nan-hidden.yaml", "hidden"),
                    ("unknown.yaml", "layerz")):
    case(f"train-model-field-{name}", ["train", "--model", name], field)
case("train-model-missing", ["train", "--model", "nope.yaml"], "nope.yaml")
case("train-model-dir", ["train", "--model", "adir/"], "adir")
case("train-model-devzero", ["train", "--model", "/dev/zero"], "/dev/zero")
case("train-model-unknown", ["train", "--model", "llama9-1t"], "model")
case("train-overlay-zero-bw", ["train", "--calibration", "zero-bw.yaml"], "zero-bw.yaml")
case("train-overlay-zero-hbm", ["train", "--calibration", "zero-hbm.yaml"], "zero-hbm.yaml")
case("train-jobs-latin1", ["train", "--gpus", "16", "--tp", "8", "--sim", "flow", "--jobs", "jobs-latin1.yaml"],
     "jobs-latin1.yaml")

# ---- whatif ----
for value in ("nan", "inf", "0", "-1", "1e300"):
    case(f"whatif-factor-{value}", ["whatif", "--factor", value], "--factor")
case("whatif-oversub-nan", ["whatif", "--oversubscription", "nan"], "--oversubscription")
case("whatif-swap", ["whatif", "--swap", "colour=red"], "swap")
for value in ("storage=0x", "storage=-2x", "storage=floppy", "checkpoint=maybe", "mtbf=-1", "mtbf=inf", "spares=-2",
              "spares=200%", "spares=some", "fabric=torus", "fabric=dragonfly", "planes=3", "planes=two"):
    case(f"whatif-swap-{value}", ["whatif", "--gpus", "64", "--tp", "8", "--swap", value], "swap")
case("whatif-swap-no-goodput", ["whatif", "--gpus", "64", "--tp", "8", "--no-goodput", "--swap", "mtbf=2"], "goodput")
case("whatif-swap-noeq", ["whatif", "--swap", "system"], "swap")
case("whatif-model-deep", ["whatif", "--model", "deep.json"], "deep.json")
case("whatif-cp-0", ["whatif", "--cp", "0"], "cp")

# ---- size ----
for value in ("nan", "0", "-1", "1e400", "inf"):
    case(f"size-tokens-{value}", ["size", "--tokens", value], "--tokens")
case("size-deadline", ["size", "--deadline", "-1d"], "--deadline")
case("size-deadline-nan", ["size", "--deadline", "nan"], "--deadline")
for value in ("nan", "0", "-1", "inf"):
    case(f"size-pue-{value}", ["size", "--pue", value], "--pue")
for value in ("nan", "-1", "inf"):
    case(f"size-kwh-{value}", ["size", "--kwh", value], "--kwh")
case("size-top-0", ["size", "--top", "0"], "--top")
case("size-seq-0", ["size", "--seq", "0"], "seq")
case("size-seq-huge", ["size", "--seq", "1000000000"], "seq")
case("size-gpus", ["size", "--gpus", "0"], "--gpus")
case("size-gbs", ["size", "--gbs", "0"], "--gbs")
case("size-oversub-nan", ["size", "--oversubscription", "nan"], "--oversubscription")
case("size-objective", ["size", "--objective", "speed"], "--objective")
case("size-out-dir", ["size", "--out", "adir"], "--out")
case("size-out-empty", ["size", "--out", ""], "--out")
case("size-plot-dir", ["size", "--plot", "adir"], "--plot")
case("size-plot-no-parent", ["size", "--plot", "nope/x.png"], "--plot")
case("size-model-latin1", ["size", "--model", "latin1.yaml"], "latin1.yaml")
case("size-model-1e12", ["size", "--model", "1e12-layers.json"], "layers")
case("size-workers-0", ["size", "--workers", "0"], "--workers")

# ---- catalog / validate ----
case("catalog-category", ["catalog", "widgets"], "category")
for name in ("latin1.yaml", "deep.json", "dup-overlay.yaml", "zero-bw.yaml", "badcat.yaml"):
    case(f"catalog-overlay-{name}", ["catalog", "--calibration", name], name)
case("catalog-overlay-devzero", ["catalog", "--calibration", "/dev/zero"], "/dev/zero")
case("validate-group", ["validate", "--group", "nope"], "--group")
case("validate-overlay-latin1", ["validate", "--calibration", "latin1.yaml"], "latin1.yaml")
case("validate-overlay-zero-bw", ["validate", "--calibration", "zero-bw.yaml"], "zero-bw.yaml")

# ---- bench parse / logs ----
for name in ("neg-time.log", "zero-time.log", "bad-size.log", "huge-size.log", "inf-time.log", "empty.log",
             "binary.log", "nonutf8.log", "latin1.yaml"):
    case(f"bench-parse-{name}", ["bench", "parse", name], name)
case("bench-parse-devzero", ["bench", "parse", "/dev/zero"], "/dev/zero")
case("bench-parse-dir", ["bench", "parse", "adir"], "adir")
case("bench-parse-missing", ["bench", "parse", "nope.log"], "nope.log")
case("bench-parse-op", ["bench", "parse", LOG, "--op", "dance"], "op")
# ---- bench collective: launch options ----
for value in ("0", "-1", "100000"):
    case(f"bench-nprocs-{value}", ["bench", "collective", "--nprocs", value], "nprocs")
case("bench-master-addr", ["bench", "collective", "--nprocs", "2", "--master-addr", "no-such-host.invalid",
                           "--master-port", "29517"], "29517")
case("bench-master-addr-empty", ["bench", "collective", "--nprocs", "2", "--master-addr", ""], "master_addr")
for value in ("-1", "70000"):
    case(f"bench-master-port-{value}", ["bench", "collective", "--nprocs", "2", "--master-port", value],
         "master_port")
for value in ("0", "-5", "nan", "inf", "1e400"):
    case(f"bench-timeout-{value}", ["bench", "collective", "--nprocs", "2", "--timeout", value], "timeout")
case("bench-warmup", ["bench", "collective", "--nprocs", "2", "--warmup", "-1"], "warmup")
case("bench-iters", ["bench", "collective", "--nprocs", "2", "--iters", "0"], "iters")
case("bench-step-factor", ["bench", "collective", "--nprocs", "2", "--step-factor", "1"], "step")
for value in ("1P", "1e400", "0", "2"):
    case(f"bench-max-{value}", ["bench", "collective", "--nprocs", "2", "--max", value], "max")
case("bench-dtype", ["bench", "collective", "--nprocs", "2", "--dtype", "float7"], "dtype")
case("bench-op", ["bench", "collective", "--nprocs", "2", "--op", "dance"], "op")
case("bench-backend", ["bench", "collective", "--backend", "mpi"], "--backend")

# ---- calibrate / compare ----
for name in ("neg-time.log", "binary.log", "nonutf8.log", "results-nan.json", "results-deep.json",
             "results-bad.json", "latin1.json"):
    case(f"calibrate-log-{name}", ["calibrate", name, "--system", "dgx-h100"], name)
    case(f"compare-log-{name}", ["compare", name, "--system", "dgx-h100"], name)
case("calibrate-log-devzero", ["calibrate", "/dev/zero", "--system", "dgx-h100"], "/dev/zero")
case("calibrate-out-dir", ["calibrate", LOG, "--system", "dgx-h100", "--out", "adir"], "--out")
case("calibrate-out-empty", ["calibrate", LOG, "--system", "dgx-h100", "--out", ""], "--out")
case("calibrate-out-no-parent", ["calibrate", LOG, "--system", "dgx-h100", "--out", "no/x.yaml"], "--out")
case("calibrate-system", ["calibrate", LOG, "--system", "dgx-h900"], "system")
case("calibrate-overlay", ["calibrate", LOG, "--system", "dgx-h100", "--calibration", "zero-bw.yaml"],
     "zero-bw.yaml")
case("compare-plot-dir", ["compare", LOG, "--system", "dgx-h100", "--plot", "adir"], "--plot")
case("compare-plot-empty", ["compare", LOG, "--system", "dgx-h100", "--plot", ""], "--plot")
case("compare-plot-unwritable", ["compare", LOG, "--system", "dgx-h100", "--plot", "/proc/x.png"], "--plot")
case("compare-missing", ["compare", "nope.log", "--system", "dgx-h100"], "nope.log")


@pytest.fixture()
def bad_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, content in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_main(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """Run the console entry point in-process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["fabricsim", *argv])
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main()
        except SystemExit as exc:
            code = exc.code
    return (code if isinstance(code, int) else 1), out.getvalue(), err.getvalue()


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_case_count() -> None:
    assert len(CASES) >= 170
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("argv", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(argv: list[str], names: str, bad_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _listing(bad_files)
    start = time.monotonic()
    code, out, err = run_main(argv, monkeypatch)
    elapsed = time.monotonic() - start
    text = out + err
    assert "Traceback" not in text, text
    assert code == 2, text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, text
    assert names in errors[0], errors[0]
    assert len(err.strip().splitlines()) == 1, err
    assert elapsed < 10, f"{elapsed:.1f} s"
    assert _listing(bad_files) == before
    assert not any(os.scandir(bad_files / "adir")) or _listing(bad_files / "adir") == {"keep"}


Check = Callable[[str], None]


def test_json_output_is_strict(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """print_json refuses NaN and infinity instead of writing invalid JSON."""
    from fabricsim.cli.output import print_json
    from fabricsim.errors import SpecError

    with pytest.raises(SpecError):
        print_json({"x": float("nan")})


def test_yaml_errors_are_one_line_with_file_line_and_column() -> None:
    from fabricsim.errors import SpecError
    from fabricsim.inputs import load_yaml

    with pytest.raises(SpecError) as info:
        load_yaml("a: 1\nb: [x\nc: 2\n", "spec.yaml")
    message = str(info.value)
    assert message.startswith("spec.yaml: not valid YAML:") and "line " in message and "column " in message
    assert "\n" not in message and "<unicode string>" not in message
    with pytest.raises(SpecError, match=r"spec.yaml: .*duplicate key 'a' \(first at line 1\)"):
        load_yaml("a: 1\nb: 2\na: 3\n", "spec.yaml")


def test_yaml_merge_keys_and_valid_files_still_load(tmp_path: Path) -> None:
    from fabricsim.inputs import load_spec_file

    path = tmp_path / "m.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n", encoding="utf-8")
    assert load_spec_file(path)["other"] == {"x": 1, "y": 3}
    path = tmp_path / "m.json"
    path.write_text('{"a": [1, 2.5, {"b": null}]}', encoding="utf-8")
    assert load_spec_file(path) == {"a": [1, 2.5, {"b": None}]}


def test_check_output_path_accepts_a_new_file(tmp_path: Path) -> None:
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    target = tmp_path / "plot.png"
    assert check_output_path(target, "--plot", PLOT_SUFFIXES) == target
    assert list(tmp_path.iterdir()) == []

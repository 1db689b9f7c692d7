"""Validate the inference model against published serving measurements (validation/inference.yaml): map each case's
hardware, model dimensions, plan and precisions to fabricsim inputs, predict its metric, or say why it cannot."""

from __future__ import annotations

import re
from typing import Any

from fabricsim.catalog import Catalog, default_catalog
from fabricsim.comm import Cluster, group_comm
from fabricsim.errors import SpecError
from fabricsim.inference import (
    DEFAULT_ENGINE,
    InferencePlan,
    InferencePrediction,
    decode_step_floor_s,
    engine_profile,
    inference_defaults,
    max_batch,
    predict_inference,
)
from fabricsim.model import ModelSpec
from fabricsim.validation.cases import NotExpressibleCase
from fabricsim.validation.collective_cases import CaseResult
from fabricsim.validation.regimes import TIME_METRICS, Regime, inference_family, inference_regime
from fabricsim.validation.serving_cases import is_serving_case, predict_serving_case

THROUGHPUT_TOLERANCE = 0.15
LATENCY_TOLERANCE = 0.25
# The case files' GPU strings -> the catalog system that carries that GPU (8-GPU HGX/DGX nodes, NVL72 for GB200).
GPU_SYSTEMS = {
    "H100-SXM-80GB": "dgx-h100",
    "H100-80GB": "dgx-h100",
    "H200-SXM-141GB": "hgx-h200",
    "A100-SXM-80GB": "dgx-a100",
    "B200-180GB": "dgx-b200",
    "B200 (SM100)": "dgx-b200",
    "GB200-192GB": "gb200-nvl72",
    "GB200": "gb200-nvl72",
    "H800-80GB": "hgx-h800",
}
THROUGHPUT_METRICS = ("output_throughput_per_gpu", "output_throughput_total", "output_throughput_per_node",
                      "input_throughput_per_node")
DEEPEP_METRICS = ("moe_dispatch_latency", "moe_combine_latency", "moe_dispatch_bottleneck_bandwidth")


def _int(value: Any, name: str) -> int:
    """A config integer, or its leading number ('8 (implied; single HGX H200)'); a missing one is not expressible."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = re.match(r"\s*(\d[\d,]*)\s*([Kk])?", str(value)) if value is not None else None
    if match is None:
        raise NotExpressibleCase(f"{name} not stated as a number ({value!r})")
    number = int(match.group(1).replace(",", ""))
    return number * 1000 if match.group(2) else number


def _system(hardware: dict[str, Any]) -> str:
    gpu = str(hardware.get("gpu"))
    if gpu not in GPU_SYSTEMS:
        raise NotExpressibleCase(f"no catalog GPU for {gpu!r}")
    return GPU_SYSTEMS[gpu]


MLA_FIELDS = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _mla_fields(model: dict[str, Any]) -> dict[str, int] | None:
    """MLA dimensions named in the case's attention strings ('q_lora_rank 1536, kv_lora_rank 512, ...'); None when
    the case's attention is not MLA; an MLA case without its per-head widths is not expressible."""
    moe_field = model.get("moe")
    moe: dict[str, Any] = moe_field if isinstance(moe_field, dict) else {}
    texts = [str(model.get("kv_heads")), str(model.get("attention") or ""), str(moe.get("attention") or "")]
    if not any("MLA" in t for t in texts):
        return None
    found = {name: int(value) for t in texts for name, value in re.findall(r"(\w+_(?:rank|dim)) (\d+)", t)}
    missing = [k for k in MLA_FIELDS if k != "q_lora_rank" and k not in found]
    if missing:
        raise NotExpressibleCase(f"MLA attention without {', '.join(missing)} in the case's model dims")
    return {k: found[k] for k in MLA_FIELDS if k in found}


def case_model(model: dict[str, Any]) -> ModelSpec:
    """The case's model dimensions as a ModelSpec (an explicit head_dim and MLA's latent widths included)."""
    mla = _mla_fields(model)
    if mla is None and not isinstance(model.get("kv_heads"), int):
        raise NotExpressibleCase(f"attention {model.get('kv_heads')!r} has no input in the model spec")
    moe = model.get("moe")
    fields = {k: model[k] for k in ("name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden",
                                    "gated_mlp", "vocab") if model.get(k) is not None}
    if mla is not None:
        fields.pop("kv_heads", None)
        fields["mla"] = mla
    if isinstance(moe, dict):
        if moe.get("head_dim") is not None:  # Qwen3's cases list head_dim beside the MoE dims
            fields["head_dim"] = moe["head_dim"]
        fields["moe"] = {"experts": moe.get("experts") or moe.get("routed_experts"), "top_k": moe["top_k"],
                         "ffn_hidden": moe.get("expert_ffn_hidden"), "shared_experts": moe.get("shared_experts", 0),
                         "dense_layers": moe.get("dense_layers", 0)}
    return ModelSpec.from_data(fields, source="inference case model")


def precisions(config: dict[str, Any], source: Any = None) -> tuple[str, str, str]:
    """(weights, kv, note) from the case's precision strings; an unstated KV format is the one of the checkpoint the
    case's publication (``source``) names (``checkpoint_kv_format``), else taken as BF16; the note says which."""
    text = str(config.get("weight_precision") or "")
    upper = text.upper()
    if "FP4" in upper:
        weights = "fp4"
    elif "FP8" in upper:
        weights = "fp8"
    elif "FP16" in upper or "BF16" in upper:
        weights = "bf16"
    else:
        raise NotExpressibleCase(f"weight precision {text!r} not recognised")
    kv_text = str(config.get("kv_precision") or "not stated")
    if "FP8" in kv_text.upper():
        return weights, "fp8", ""
    if "16" in kv_text:
        return weights, "bf16", ""
    found = checkpoint_kv_format(source, weights)
    if found is None:
        return weights, "bf16", ", KV not stated: bf16"
    checkpoint, kv = found
    return weights, kv, f", KV of {checkpoint}: {kv}"


def checkpoint_kv_format(source: Any, weights: str) -> tuple[str, str] | None:
    """(checkpoint, kv format) of the run a publication's case describes: the checkpoint the publication names for
    the case's section and weight format, and that checkpoint's own KV format, which TensorRT-LLM's 'auto' KV dtype
    keeps (``inference/data/inference.yaml`` checkpoint_kv_cache); None where either is not sourced."""
    if not isinstance(source, dict):
        return None
    spec = inference_defaults()["checkpoint_kv_cache"]
    locator = str(source.get("locator") or "")
    for publication in spec["publications"]:
        if not all(str(source.get(key)) == str(value) for key, value in publication["source"].items()):
            continue
        for run in publication["runs"]:
            if f"'{run['section']}'" in locator and weights == str(run["weights"]):
                checkpoint = str(run["checkpoint"])
                kv = spec["checkpoints"].get(checkpoint)
                return None if kv is None else (checkpoint, str(kv))
    return None


def _parallel(config: dict[str, Any]) -> tuple[int, int, int, int]:
    """(tp, pp, ep, dp) of the case; TensorRT-LLM's 'attention DP n' splits its tp GPUs into n attention ranks."""
    tp = _int(config.get("tp"), "tp")
    pp = _int(config.get("pp") if config.get("pp") is not None else 1, "pp")
    ep = _expert_parallel(config, tp) if config.get("ep") is not None else 1
    dp = _int(config["dp"], "dp") if isinstance(config.get("dp"), int) else 1
    attention_dp = re.search(r"attention DP (\d+)", str(config.get("dp") or ""), re.IGNORECASE)
    if attention_dp is not None:  # enable_attention_dp: tp_size GPUs run attention as dp ranks of tp / dp
        dp = int(attention_dp.group(1))
        if tp % dp:
            raise NotExpressibleCase(f"attention DP {dp} does not divide tp {tp}")
        tp //= dp
    return tp, pp, ep, dp


def _expert_parallel(config: dict[str, Any], tp: int) -> int:
    """The case's ep: a number, or the EP of a mixed mapping ('mixed: sparse experts TP4xEP2, shared experts TP8,
    attention TP8': the experts re-fold the tp GPUs as expert-TP x EP, as ``InferencePlan.ep`` does), whose
    expert-TP must then be tp / ep."""
    text = str(config["ep"])
    mixed = re.search(r"TP(\d+)\s*x\s*EP(\d+)", text, re.IGNORECASE)
    if mixed is None or re.match(r"\s*\d", text):
        return _int(config["ep"], "ep")
    expert_tp, ep = int(mixed.group(1)), int(mixed.group(2))
    if expert_tp * ep != tp:
        raise NotExpressibleCase(f"experts as TP{expert_tp} x EP{ep} do not fold the tp {tp} GPUs ({text!r})")
    return ep


def _plan(case: dict[str, Any], model: ModelSpec, batch: int, prompt: int, output: int) -> InferencePlan:
    config = case["config"]
    weights, kv, _ = precisions(config, case.get("source"))
    tp, pp, ep, dp = _parallel(config)
    drafts, accepted, _ = speculative(case)
    attention, attention_out = attention_formats(case, model, weights)
    return InferencePlan(tp=tp, pp=pp, ep=ep, dp=dp, batch=batch, prompt_tokens=prompt, output_tokens=output,
                         weights=weights, kv=kv, draft_tokens=drafts, acceptance_length=accepted,
                         attention_weights=attention, attention_out_weights=attention_out,
                         engine=case_engine(config) or DEFAULT_ENGINE)  # its kernels: as that release runs them


ENGINE_OF_FRAMEWORK = {"TensorRT-LLM": "trtllm", "vLLM": "vllm", "SGLang": "sglang"}


def case_engine(config: dict[str, Any]) -> str:
    """The engine profile a case ran (``--engine``): its framework's, at its stated release where one is given
    ('v0.9.0', '0.4.6') and profiled; the engine's default release otherwise; '' for kernel benchmarks (DeepEP),
    which no engine runs (they are priced with the default engine's profile)."""
    framework = str(config.get("framework", "")).strip()
    engine = next((e for name, e in ENGINE_OF_FRAMEWORK.items() if framework.startswith(name)), None)
    if engine is None:
        return ""
    found = re.match(r"[\s~]*v?(\d+\.\d+)", str(config.get("version", "")))
    if found is None:
        return engine
    try:
        return engine_profile(f"{engine}@{found.group(1)}").label
    except SpecError:  # a release before the engine's first profile
        return engine


def attention_formats(case: dict[str, Any], model: ModelSpec, weights: str) -> tuple[str | None, str | None]:
    """(attention, attention output) weight formats of the case's checkpoint where they differ from its weights: an
    NVFP4 MLA checkpoint keeps attention BF16, a v2 one (its publication in
    ``inference/data/inference.yaml`` nvfp4_mla_checkpoint v2_sources) quantises wo too; (None, None) otherwise."""
    spec = inference_defaults()["nvfp4_mla_checkpoint"]
    if model.mla is None or weights != str(spec["weights"]):
        return None, None
    source = case.get("source")
    v2 = isinstance(source, dict) and any(
        all(str(source.get(key)) == str(value) for key, value in entry.items()) for entry in spec["v2_sources"])
    return str(spec["attention_weights"]), str(spec["v2_attention_out_weights"]) if v2 else None




MTP_NOTE = re.compile(r"\bMTP\b[^;]*?\b(\d+)\s+(?:next-n\s+)?layers", re.IGNORECASE)


def speculative(case: dict[str, Any]) -> tuple[int, float, str]:
    """(draft tokens, mean accepted tokens per step, note) of a case that runs MTP speculative decoding ('MTP
    speculative decoding with 3 next-n layers' in its notes): the acceptance length published for its configuration
    (``inference/data/inference.yaml`` speculative_acceptance); without one, the fallback (0, 1.0): no speculative
    decoding modelled, said in the note. (0, 1.0, '') for a case without MTP."""
    config = case["config"]
    found = MTP_NOTE.search(str(config.get("notes") or ""))
    if found is None:
        return 0, 1.0, ""
    drafts = int(found.group(1))
    weights, _, _ = precisions(config, case.get("source"))
    tp, _, ep, _ = _parallel(config)
    model_name = str(case["model"].get("name", ""))
    for m in inference_defaults()["speculative_acceptance"]["measurements"]:
        lengths = {int(k): float(v) for k, v in m["accepted_length"].items()}
        if (str(config.get("framework", "")).strip().startswith(str(m["framework"])) and str(m["model"]) in model_name
                and case["hardware"].get("gpu") == m["gpu"] and weights == m["weights"] and tp == m["tp"]
                and ep == m["ep"] and drafts in lengths):
            return drafts, lengths[drafts], f", MTP {drafts} drafts accepting {lengths[drafts]:g} tokens a step"
    return 0, 1.0, f", MTP {drafts} drafts: acceptance not published for this configuration, not modelled"














def predict_case(case: dict[str, Any], catalog: Catalog | None = None) -> tuple[float, str, str]:
    """The case's metric as fabricsim predicts it: (value, unit, detail)."""
    cat = catalog or default_catalog()
    metric = str(case["metric"]["name"])
    config = case["config"]
    hardware = case["hardware"]
    system = cat.system(_system(hardware))
    cluster = Cluster(system, catalog=cat)
    if metric in DEEPEP_METRICS:
        return _deepep(case, cluster)
    model = case_model(case["model"])
    if is_serving_case(case):  # a serving benchmark: replayed on the serving simulator
        plan = _plan(case, model, _parallel(config)[3], _int(config.get("input_len"), "input_len"),
                     _int(config.get("output_len"), "output_len"))
        value, detail = predict_serving_case(case, model, cluster, plan)
        return value, str(case["metric"].get("unit", "")), detail
    prompt = _int(config.get("input_len"), "input_len")
    output = 1 if metric == "ttft_first_token_latency" else _int(config.get("output_len"), "output_len")
    batch_field = config.get("batch")
    static = isinstance(batch_field, int) and not isinstance(batch_field, bool)
    if static:
        batch = int(batch_field)
    elif config.get("concurrency") is None or "unbounded" in str(config.get("concurrency")):
        # every request queued: the engine runs the largest batch that fits
        probe = _plan(case, model, _parallel(config)[3], prompt, output)
        gpu = cat.gpu(system.gpu)
        batch = min(max_batch(model, probe, gpu), probe.engine_profile.max_batch(gpu))
        if batch < 1:
            raise SpecError("the model does not fit on the case's GPUs")
    else:
        batch = _int(config.get("concurrency"), "concurrency")
    plan = _plan(case, model, batch, prompt, output)
    if static:
        _check_roofline(case, plan, decode_step_floor_s(model, plan, cat.gpu(system.gpu)), system.gpus_per_node)
    pred = predict_inference(model, cluster, plan)
    _, _, kv_note = precisions(config, case.get("source"))
    detail = (f"tp={plan.tp} pp={plan.pp} ep={plan.ep} dp={plan.dp} batch {plan.batch}"
              f"{'' if static else ' (max-throughput batch)'} {plan.weights}/{plan.kv}{kv_note}"
              f"{'' if plan.kernel('gqa_kernel') else ', MHA decode kernel (no GQA)'}"
              f"{', MoE GEMMs on SM80 16-bit kernels' if plan.kernel('moe_sm80_kernels') and model.moe else ''}"
              f"{', fixed GEMM tiles' if plan.kernel('fixed_gemm_tiles') else ''}"
              f"{f', attention {plan.attention_format}/{plan.attention_out_format}' if plan.attention_weights else ''}"
              f"{', FP8 MLA decode' if plan.kernel('fp8_mla_decode') and plan.kv == 'fp8' and model.mla else ''}"
              f"{speculative(case)[2]}, "
              f"ttft {pred.ttft_s * 1e3:.0f} ms, tpot {pred.tpot_s * 1e3:.1f} ms, bound={pred.bottleneck}"
              + ("" if pred.fits else ", DOES NOT FIT in memory"))
    return _metric(metric, pred, system.gpus_per_node), str(case["metric"].get("unit", "")), detail


def _check_roofline(case: dict[str, Any], plan: InferencePlan, step_floor_s: float, gpus_per_node: int) -> None:
    """A static-batch measurement faster than its stated plan's HBM floor (every decode step streams its weights and
    KV cache at the GPU's peak bandwidth, prefill free) cannot have run as stated: not expressible, with the figures."""
    metric, measured = str(case["metric"]["name"]), float(case["metric"]["value"])
    steps = plan.output_tokens - 1
    if steps < 1 or plan.draft_tokens:
        return
    group = plan.batch * plan.output_tokens / (steps * step_floor_s)  # output tokens/s of the group at the floor
    bound = _rate_metric(metric, group, 1.0 / step_floor_s, plan.gpus, gpus_per_node)
    if bound is not None and measured > bound:
        raise NotExpressibleCase(
            f"measured {measured:g} exceeds the HBM floor of the stated plan ({bound:.0f}: {plan.weights} weights "
            f"and {plan.kv} KV streamed at peak bandwidth, {step_floor_s * 1e3:.1f} ms a decode step); the stated "
            "configuration cannot be what ran")


def _rate_metric(metric: str, group_tokens_per_s: float, user_tokens_per_s: float, gpus: int,
                 gpus_per_node: int) -> float | None:
    """A rate metric in the case's unit from the group's output tokens/s and one user's (None: not a rate)."""
    per_gpu = group_tokens_per_s / gpus
    return {"output_throughput_per_gpu": per_gpu, "output_throughput_total": group_tokens_per_s,
            "output_throughput_per_node": per_gpu * gpus_per_node,
            "output_tokens_per_s_per_user": user_tokens_per_s}.get(metric)


def _metric(metric: str, pred: InferencePrediction, gpus_per_node: int) -> float:
    rate = _rate_metric(metric, pred.output_tokens_per_s, 1.0 / pred.tpot_s, pred.gpus, gpus_per_node)
    if rate is not None:
        return rate
    if metric == "ttft_first_token_latency":
        return pred.ttft_s * 1e3
    if metric == "e2e_latency":
        return pred.e2e_s
    raise NotExpressibleCase(f"metric {metric!r} has no inference prediction (unit ambiguous or not modelled)")


def _deepep(case: dict[str, Any], cluster: Cluster) -> tuple[float, str, str]:
    """DeepEP: dispatch (FP8, 1 byte per element) and combine (BF16) of each rank's tokens to their top-k experts as
    one all-to-all on the ep group; bandwidth = bytes a rank sends to other ranks / time, as DeepEP reports it."""
    config, model, metric = case["config"], case["model"], str(case["metric"]["name"])
    ep = _int(config.get("ep"), "ep")
    gpus_per_node = cluster.system.gpus_per_node
    moe = model.get("moe") or {}
    top_k = int(moe.get("top_k", 8))
    hidden = int(model["hidden"])
    batch = str(config.get("batch"))
    tokens = _int(batch, "batch")
    per_rank_tokens = tokens if "per rank" in batch else tokens / ep
    combine = metric == "moe_combine_latency"
    size = per_rank_tokens * top_k * hidden * (2 if combine else 1)
    t, kind = group_comm(cluster, ep, min(ep, gpus_per_node), "all_to_all", size)
    detail = f"all_to_all of {size / 2**20:.1f} MiB per rank over ep={ep}, bound={kind}"
    if metric == "moe_dispatch_bottleneck_bandwidth":
        return size * (ep - 1) / ep / t / 1e9, "GB/s", detail
    return t * 1e6, "us", detail


def case_tolerance(case: dict[str, Any]) -> float:
    for key in ("tol", "tolerance"):
        if case.get(key) is not None:
            return float(case[key])
    metric = str(case["metric"]["name"])
    return LATENCY_TOLERANCE if metric in ("ttft_first_token_latency", "e2e_latency") or "latency" in metric \
        else THROUGHPUT_TOLERANCE


def run_inference_case(case: dict[str, Any], catalog: Catalog | None = None) -> CaseResult:
    """Predict one inference case; a prediction that does not fit in memory fails (the published run ran)."""
    predicted, unit, detail = predict_case(case, catalog)
    measured = float(case["metric"]["value"])
    error = (predicted - measured) / measured
    tol = case_tolerance(case)
    source = case.get("source")
    source_line = " ".join(str(source[k]) for k in ("repo", "path", "url") if source.get(k)) \
        if isinstance(source, dict) else str(source or "")
    metric = str(case["metric"]["name"])
    engine = case_engine(case.get("config", {}))
    return CaseResult(
        id=str(case["id"]), kind="inference", measured=measured, predicted=predicted, unit=unit, error=error,
        tolerance=tol, passed=abs(error) <= tol and "DOES NOT FIT" not in detail, detail=detail,
        source=source_line, group="serving" if case.get("group") == "serving" else "inference",
        metric=metric, engine=engine, regime=case_regime(case, metric, engine, catalog).to_json(),
        time_like=metric in TIME_METRICS,
    )


def case_regime(case: dict[str, Any], metric: str, engine: str, catalog: Catalog | None) -> Regime:
    """The case's regime for the error model (its metric's family, engine, GPU, batching, model, weights)."""
    cat = catalog or default_catalog()
    gpu = cat.gpu(cat.system(_system(case["hardware"])).gpu)
    model = case.get("model") or {}
    moe = isinstance(model, dict) and bool(model.get("moe"))
    try:
        weights = precisions(case.get("config", {}), case.get("source"))[0]
    except SpecError:
        weights = "unstated"
    return inference_regime(inference_family(metric), engine, gpu, moe, is_serving_case(case), weights)

"""Fit the catalog's free parameters (link efficiencies, base latency) to measurements: nccl-tests logs,
fabricsim's own benchmark results and profiler traces, refused when faster than the hardware allows.

Importing this package does not import scipy; fitting does."""

from typing import TYPE_CHECKING

from fabricsim.lazy import lazy_exports

if TYPE_CHECKING:
    from fabricsim.calibration.fit import (
        CalibrationResult,
        Measurement,
        calibrate,
        check_results,
        device_matches,
        predict_times,
    )
    from fabricsim.calibration.measurements import load_results, to_measurements
    from fabricsim.calibration.plausibility import check_bandwidths
    from fabricsim.calibration.trace import GemmEfficiency, calibrate_trace, check_trace, gemm_efficiency

# the fit imports scipy.optimize: loaded on first use
__getattr__ = lazy_exports(__name__, {
    **dict.fromkeys(("CalibrationResult", "Measurement", "calibrate", "check_results", "device_matches",
                     "predict_times"), "fabricsim.calibration.fit"),
    **dict.fromkeys(("load_results", "to_measurements"), "fabricsim.calibration.measurements"),
    "check_bandwidths": "fabricsim.calibration.plausibility",
    **dict.fromkeys(("GemmEfficiency", "calibrate_trace", "check_trace", "gemm_efficiency"),
                    "fabricsim.calibration.trace"),
})

__all__ = [
    "CalibrationResult",
    "GemmEfficiency",
    "Measurement",
    "calibrate",
    "calibrate_trace",
    "check_bandwidths",
    "check_results",
    "check_trace",
    "device_matches",
    "gemm_efficiency",
    "load_results",
    "predict_times",
    "to_measurements",
]

"""The published values of the Guo et al. 2017 / Kull et al. 2019 study on Kängsepp's logits
(``guo_kull_logits.csv``, :func:`calbench.reference.load_reference`): their sources, method
and metric names mapped to the workflow's keys, base tolerances and the cell statuses."""

from __future__ import annotations

import re

from calbench.reference import load_reference

PACKAGED = "guo_kull_logits"

#: Source key -> citation (the ``source`` column of the packaged table).
SOURCES = {
    "guo17_T1": "Guo, Pleiss, Sun, Weinberger 2017, On Calibration of Modern Neural Networks "
    "(ICML; arXiv 1706.04599), Table 1: ECE % (M = 15)",
    "guo17_S2": "Guo et al. 2017, supplementary Table S2: error %",
    "guo17_S3": "Guo et al. 2017, supplementary Table S3: NLL (mean nats)",
    "kull19_nb": "Kull, Perello-Nieto, Kängsepp, Silva Filho, Song, Flach 2019, Beyond temperature "
    "scaling (NeurIPS; arXiv 1910.12656): output of the notebook that generated Tables 3-4 "
    "(dirichletcal/experiments_dnn), log-loss and full-precision test metrics",
    "kull19_nb_table4": "Kull et al. 2019, Table 4 as printed by that notebook (classwise ECE, "
    "summed over classes, 3 decimals)",
    "kangsepp_nb": "Kängsepp, markus93/NN_calibration, notebook 'Calibration - (Temp, Iso, Beta, "
    "Hist)': test-set ECE (15 bins) and log-loss",
    "calarena": "CalArena (probkit 2026), results of the Base-model and TS runs on the same "
    "pickles (float32 probabilities; Brier summed over classes)",
    "guo17_slides": "Slides 'Calibration des réseaux de neurones modernes' (A. Ben Bouazza, "
    "S. Bossou) presenting Guo et al. 2017: summary table of their own DenseNet-40 (300 epochs) "
    "on CIFAR-100",
}
#: Sources computed on other networks than Kängsepp's logits: shown, never flagged.
REFERENCE_BAND = ("guo17_T1", "guo17_S2", "guo17_S3", "guo17_slides")

#: Each source's method names -> the calibrator keys of ``config/guo_kull_logits.yaml``.
METHOD_KEYS = {
    "guo17": {
        "uncal": "uncalibrated",
        "hist_binning": "hist",
        "isotonic": "iso",
        "bbq": "bbq",
        "temp_scaling": "ts",
        "vector_scaling": "vs",
        "matrix_scaling": "ms",
    },
    "kull19": {
        "Uncal": "uncalibrated",
        "TempS": "ts",
        "Dir-L2": "dir_l2",
        "Dir-ODIR": "dir_odir",
        "VecS": "vs",
        "MS-ODIR": "ms_odir",
    },
    "kangsepp": {
        "uncal": "uncalibrated",
        "hist_binning_M15": "hist",
        "isotonic_ovr": "iso",
        "temp_scaling": "ts",
    },
    "calarena": {"uncal": "uncalibrated", "TS": "ts"},
    "slides": {
        "uncal": "uncalibrated",
        "temp_scaling": "ts",
        "platt_scaling": "ms",
        "isotonic": "iso",
    },
}
_METHOD_FAMILY = {
    "guo17_T1": "guo17",
    "guo17_S2": "guo17",
    "guo17_S3": "guo17",
    "kull19_nb": "kull19",
    "kull19_nb_table4": "kull19",
    "kangsepp_nb": "kangsepp",
    "calarena": "calarena",
    "guo17_slides": "slides",
}

#: Published metric name -> (quantity, scale of the printed value relative to a fraction).
METRIC_KEYS = {
    "ece_pct_M15": ("ece", 100.0),
    "error_pct": ("error", 100.0),
    "nll_mean": ("nll", 1.0),
    "logloss": ("nll", 1.0),
    "ece": ("ece", 1.0),
    "classwise_ece_sum": ("cwece_sum", 1.0),
    "mce": ("mce", 1.0),
    "brier_div_k": ("brier_div_k", 1.0),
    "ece_frac_M15": ("ece", 1.0),
    "acc": ("accuracy", 1.0),
    "ece15": ("ece", 1.0),
    "brier": ("brier", 1.0),
    "acc_pct": ("accuracy", 100.0),
    "avg_conf_pct": ("confidence", 100.0),
    "ece_pct": ("ece", 100.0),
    "mce_pct": ("mce", 100.0),
}
#: Quantity -> the workflow metric it is read from (``error`` = 1 - that metric; ``brier_div_k``
#: = that metric / K unless the metric map names a metric that is already divided by K).
DEFAULT_METRIC_MAP = {
    "accuracy": "accuracy",
    "error": "accuracy",
    "ece": "ece",
    "mce": "mce",
    "nll": "nll",
    "brier": "brier",
    "brier_div_k": "brier",
    "cwece_sum": "cwece_kull",
}
#: Base tolerances (fractions) added to half a unit of the published value's last printed digit.
DEFAULT_TOLERANCES = {
    "accuracy": 0.0,
    "error": 0.0,
    "ece": 1e-4,
    "mce": 1e-3,
    "nll": 1e-4,
    "brier": 1e-5,
    "brier_div_k": 1e-6,
    "cwece_sum": 1e-3,
}
#: Tables whose values are printed at 6 decimals with trailing zeros dropped (e.g. "30" = 30.0).
_SIX_DECIMALS = ("full_precision", "table3")
#: Guo et al. print ECE and error with 2 decimals, NLL with 4 (the packaged strings drop zeros).
_GUO_DECIMALS = {"guo17_T1": 2, "guo17_S2": 2, "guo17_S3": 4, "guo17_slides": 2}

OK, FLAGGED, EXPECTED, MISSING, REFERENCE, NO_LOGITS = (
    "ok",
    "differs",
    "expected to differ",
    "missing",
    "reference band",
    "no published logits",
)


def _decimals(printed: str) -> int:
    m = re.fullmatch(r"-?\d+(?:\.(\d+))?", printed.strip())
    return len(m.group(1) or "") if m else 0


def published_rows() -> list[dict]:
    """The packaged published cells keyed like the workflow: ``source, table, dataset,
    published_model, model`` (config key, "" where no published logits), ``published_method,
    method`` (calibrator key), ``published_metric, quantity``, ``published`` (fraction; NaN for
    "NA"), ``printed``, ``scale`` and ``decimals`` (of the printed value)."""
    out = []
    for r in load_reference(PACKAGED):
        quantity, scale = METRIC_KEYS[r["metric"]]
        family = _METHOD_FAMILY[r["source"]]
        if r["table"] in _SIX_DECIMALS:
            decimals = 6
        elif r["source"] in _GUO_DECIMALS:  # printed with 2 (percent) or 4 (NLL) decimals
            decimals = _GUO_DECIMALS[r["source"]]
        else:
            decimals = _decimals(r["printed"])
        out.append(
            {
                "source": r["source"],
                "table": r["table"],
                "dataset": r["dataset"],
                "published_model": r["model"],
                "model": r["calbench_model"],
                "published_method": r["method"],
                "method": METHOD_KEYS[family][r["method"]],
                "published_metric": r["metric"],
                "quantity": quantity,
                "published": r["value"] / scale,
                "printed": r["printed"],
                "scale": scale,
                "decimals": decimals,
            }
        )
    return out

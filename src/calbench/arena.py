"""Implementations of one method side by side: the largest difference in calibrated
probabilities and in each metric between every pair of implementations of the same method
(calbench's own and the adapters whose ``same_as`` names it), fitted on the same validation
logits and applied to the same test logits.

:func:`implementation_groups` groups calibrator names by method, :func:`disagreements` computes
the rows, :func:`write_disagreements` writes them as CSV and as an autoescaped HTML table
(``calbench compare-implementations``, for the report's arena section).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from calbench.calibrators import get_calibrator
from calbench.io import atomic_write_text
from calbench.metrics import METRICS
from calbench.plugins import find_calibrator
from calbench.results import ARENA_COLUMNS


def method_of(name: str) -> str:
    """The method a calibrator name implements: an adapter's ``same_as``, else its own name."""
    cls = find_calibrator(name)
    return getattr(cls, "same_as", None) or cls.name


def implementation_groups(names: Sequence[str]) -> dict[str, list[str]]:
    """``{method: [names implementing it]}`` for the methods with two or more implementations,
    in the order of ``names``."""
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(method_of(n), []).append(n)
    return {m: v for m, v in groups.items() if len(v) > 1}


def disagreements(
    probs: Mapping[str, np.ndarray],
    labels: np.ndarray,
    metrics: Sequence[str],
    groups: Mapping[str, Sequence[str]],
) -> list[dict]:
    """One row per (method, pair of implementations, quantity): ``quantity`` is
    ``probability`` (``max |p_a - p_b|`` over samples and classes, values blank) or a metric
    (``|m(p_a) - m(p_b)|`` with both values), on the same samples."""
    rows = []
    for method, names in groups.items():
        for a, b in itertools.combinations(names, 2):
            pa, pb = np.asarray(probs[a], np.float64), np.asarray(probs[b], np.float64)
            rows.append(dict(method=method, a=a, b=b, quantity="probability",
                             max_abs_diff=float(np.abs(pa - pb).max()), value_a=None, value_b=None))  # fmt: skip
            for m in metrics:
                va, vb = float(METRICS[m](pa, labels)), float(METRICS[m](pb, labels))
                rows.append(dict(method=method, a=a, b=b, quantity=m,
                                 max_abs_diff=abs(va - vb), value_a=va, value_b=vb))  # fmt: skip
    return rows


def compare_implementations(
    names: Sequence[str],
    z_val,
    y_val,
    z_test,
    y_test,
    metrics: Sequence[str],
    params: Mapping[str, Mapping] | None = None,
) -> list[dict]:
    """Fit every calibrator ``names`` (hyperparameters ``params[name]``, default none) on the
    validation logits, apply it to the test logits and return :func:`disagreements` for the
    methods implemented twice."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise ValueError(f"--params names {unknown}, not among --calibrators {list(names)}")
    groups = implementation_groups(names)
    probs = {}
    for n in sorted({n for v in groups.values() for n in v}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = get_calibrator(n, **(params.get(n) or {}))
            probs[n] = cal.fit(z_val, y_val).predict_proba(z_test)
    return disagreements(probs, np.asarray(y_test), metrics, groups)


def largest(rows: Sequence[dict]) -> list[dict]:
    """Per (method, a, b, quantity) the row of the largest difference (rows of several models)."""
    best: dict[tuple, dict] = {}
    for r in rows:
        key = (r["method"], r["a"], r["b"], r["quantity"])
        if key not in best or r["max_abs_diff"] > best[key]["max_abs_diff"]:
            best[key] = r
    return list(best.values())


def _fmt(v) -> str:
    return "" if v is None else f"{v:.3g}" if abs(v) < 1e-3 and v != 0 else f"{v:.4f}"


def write_disagreements(rows: Sequence[dict], csv_path, html_path=None) -> None:
    """``rows`` as CSV (:data:`calbench.results.ARENA_COLUMNS`, full precision) and, with
    ``html_path``, as an HTML table (every cell escaped) titled by method."""
    lines = [",".join(ARENA_COLUMNS)]
    for r in rows:
        lines.append(",".join("" if r[c] is None else repr(r[c]) if isinstance(r[c], float)
                              else str(r[c]) for c in ARENA_COLUMNS))  # fmt: skip
    atomic_write_text(csv_path, "\n".join(lines) + "\n")
    if html_path is None:
        return
    from calbench.pages import render  # lazy: code inputs

    cells = [
        [r["method"], r["a"], r["b"], r["quantity"], _fmt(r["max_abs_diff"]), _fmt(r["value_a"]),
         _fmt(r["value_b"])]
        for r in rows
    ]  # fmt: skip
    atomic_write_text(html_path, render("arena/disagreements.html.j2", rows=cells))


def run_comparison(names, metrics, csv_path, html_path=None, *, logits=None, split=None,
                   synthetic=None, seed: int = 0, params=None) -> list[dict]:  # fmt: skip
    """The step behind ``calbench compare-implementations``: fit ``names`` (hyperparameters
    ``params``: ``{name: {param: value}}``) on the validation half of ``logits`` (with
    ``split``) or of synthetic over-confident logits ``(n, k)``, compare on the test half, write
    the rows; returns them."""
    from calbench.conformance import overconfident_logits  # lazy: code inputs

    if (logits is None) == (synthetic is None):
        raise ValueError("pass either --logits with --split or --synthetic NxK")
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {sorted(METRICS)}")
    if synthetic is not None:
        n, k = synthetic
        z, y = overconfident_logits(2 * n, k, seed=seed)
        zv, yv, zt, yt = z[:n], y[:n], z[n:], y[n:]
    else:
        from calbench.split import load_halves  # lazy: code inputs

        data = load_halves(logits, split)
        (zv, yv), (zt, yt) = data["val"], data["test"]
    if not implementation_groups(names):
        raise ValueError(
            f"no method among {list(names)} has two implementations; add e.g. ts and netcal.ts"
        )
    rows = compare_implementations(names, zv, yv, zt, yt, metrics, params)
    write_disagreements(rows, csv_path, html_path)
    return rows

"""The report's bibliography, in one place: every work the report cites, the works its fixed
text cites, and the source of every calibrator and metric.

:data:`CALIBRATOR_REFERENCES` (keyed by the names of :data:`calbench.calibrators.REGISTRY`) and
:data:`METRIC_REFERENCES` (keyed by the names of :data:`calbench.metrics.METRICS`) name the works
a method comes from; a test checks that every registered calibrator and metric has an entry, so
a new one without a reference is caught. :func:`bibliography` gives the works one report cites:
those of its text (:data:`TEXT_CITATIONS`) and those of the calibrators and metrics it shows.
No URLs: the report fetches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: Author-year key (as the report's text cites it) -> the full reference.
REFERENCES = {
    "Bohdal et al. 2021": "O. Bohdal, Y. Yang, T. Hospedales. Meta-calibration: learning of "
    "model calibration using differentiable expected calibration error. arXiv:2106.09613, 2021.",
    "Brier 1950": "G. W. Brier. Verification of forecasts expressed in terms of probability. "
    "Monthly Weather Review 78(1), 1950.",
    "Davison & Hinkley 1997": "A. C. Davison, D. V. Hinkley. Bootstrap Methods and their "
    "Application. Cambridge University Press, 1997.",
    "Demšar 2006": "J. Demšar. Statistical comparisons of classifiers over multiple data sets. "
    "Journal of Machine Learning Research 7, 2006.",
    "Guo et al. 2017": "C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. On calibration of modern "
    "neural networks. ICML 2017.",
    "Gupta et al. 2021": "K. Gupta, A. Rahimi, T. Ajanthan, T. Mensink, C. Sminchisescu, "
    "R. Hartley. Calibration of neural networks using splines. ICLR 2021.",
    "Holm 1979": "S. Holm. A simple sequentially rejective multiple test procedure. Scandinavian "
    "Journal of Statistics 6, 1979.",
    "Karandikar et al. 2021": "A. Karandikar, N. Cain, D. Tran, B. Lakshminarayanan, J. Shlens, "
    "M. C. Mozer, B. Roelofs. Soft calibration objectives for neural networks. NeurIPS 2021.",
    "Kull et al. 2019": "M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song, "
    "P. Flach. Beyond temperature scaling: obtaining well-calibrated multiclass probabilities "
    "with Dirichlet calibration. NeurIPS 2019.",
    "Kumar et al. 2019": "A. Kumar, P. Liang, T. Ma. Verified uncertainty calibration. "
    "NeurIPS 2019.",
    "Naeini et al. 2015": "M. P. Naeini, G. F. Cooper, M. Hauskrecht. Obtaining well calibrated "
    "probabilities using Bayesian binning. AAAI 2015.",
    "Nixon et al. 2019": "J. Nixon, M. W. Dusenberry, L. Zhang, G. Jerfel, D. Tran. Measuring "
    "calibration in deep learning. CVPR Workshops 2019.",
    "Platt 1999": "J. C. Platt. Probabilistic outputs for support vector machines and "
    "comparisons to regularized likelihood methods. Advances in Large Margin Classifiers, "
    "MIT Press, 1999.",
    "Roelofs et al. 2022": "R. Roelofs, N. Cain, J. Shlens, M. C. Mozer. Mitigating bias in "
    "calibration error estimation. AISTATS 2022.",
    "Vasilev 2021": "Post-hoc calibration of neural networks: the protocol this workflow "
    "reproduces (coursework, Moscow State University, 2021).",
    "Zadrozny & Elkan 2001": "B. Zadrozny, C. Elkan. Obtaining calibrated probability estimates "
    "from decision trees and naive Bayesian classifiers. ICML 2001.",
    "Zadrozny & Elkan 2002": "B. Zadrozny, C. Elkan. Transforming classifier scores into "
    "accurate multiclass probability estimates. KDD 2002.",
}

#: Works the report's fixed text cites (protocol, intervals, ranks, comparisons).
TEXT_CITATIONS = (
    "Davison & Hinkley 1997",
    "Demšar 2006",
    "Guo et al. 2017",
    "Holm 1979",
    "Kull et al. 2019",
    "Kumar et al. 2019",
    "Naeini et al. 2015",
    "Roelofs et al. 2022",
    "Vasilev 2021",
)

#: Calibrator registry name -> the works it comes from (empty: no method to cite).
CALIBRATOR_REFERENCES: dict[str, tuple[str, ...]] = {
    "uncalibrated": (),  # the softmax of the logits
    "ts": ("Guo et al. 2017",),
    "vs": ("Guo et al. 2017",),
    "vs_b": ("Guo et al. 2017",),
    "ms_b": ("Guo et al. 2017", "Kull et al. 2019"),
    "ts_sbece": ("Karandikar et al. 2021",),
    "hist": ("Zadrozny & Elkan 2001",),
    "iso": ("Zadrozny & Elkan 2002",),
    "bbq": ("Naeini et al. 2015",),
    "platt": ("Platt 1999",),
    "dirichlet": ("Kull et al. 2019",),
    "dir_odir_cv": ("Kull et al. 2019",),
    "ms_odir_cv": ("Kull et al. 2019",),
    "dir_l2_cv": ("Kull et al. 2019",),
}

#: Metric name (:data:`calbench.metrics.METRICS`) -> the works that define it (empty: none).
METRIC_REFERENCES: dict[str, tuple[str, ...]] = {
    "accuracy": (),
    "ece": ("Naeini et al. 2015", "Guo et al. 2017"),
    "mce": ("Naeini et al. 2015", "Guo et al. 2017"),
    "cwece": ("Kull et al. 2019",),
    "ace": ("Nixon et al. 2019",),
    "ece_l2_mass": ("Kumar et al. 2019",),
    "nll": ("Guo et al. 2017",),
    "nll_modern": ("Guo et al. 2017",),
    "brier": ("Brier 1950",),
    "ks": ("Gupta et al. 2021",),
    "sbece": ("Karandikar et al. 2021",),
    "dece": ("Bohdal et al. 2021",),
    "debiased_ece": ("Kumar et al. 2019",),
    "marginal_ce": ("Kumar et al. 2019",),
    "ece_sweep": ("Roelofs et al. 2022",),
    "ece_kull": ("Kull et al. 2019",),
    "mce_kull": ("Kull et al. 2019",),
    "cwece_kull": ("Kull et al. 2019",),
    "brier_kull": ("Brier 1950", "Kull et al. 2019"),
    "nll_kull": ("Kull et al. 2019",),
}


#: Works cited by an optional section of the report, when it is shown.
SECTION_CITATIONS = {
    "dece_history": ("Bohdal et al. 2021",),
    "robustness": ("Nixon et al. 2019",),
}


def bibliography(
    calibrators: Mapping[str, str] | None = None,
    metrics: Iterable[str] = (),
    labels: Mapping[str, str] | None = None,
    sections: Iterable[str] = (),
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The works one report cites, sorted by key, and what each is cited for.

    ``calibrators`` maps the report's calibrator keys to registry names (an unregistered name
    adds nothing); ``metrics`` are the metric names shown; ``labels`` the names to show for
    calibrator keys and metrics; ``sections`` the optional sections shown
    (:data:`SECTION_CITATIONS`). Returns ``({key: reference}, {key: [what it is cited for]})``.
    """
    labels = labels or {}
    cited_for: dict[str, list[str]] = {key: [] for key in TEXT_CITATIONS}
    for section in sections:
        for ref in SECTION_CITATIONS.get(section, ()):
            cited_for.setdefault(ref, [])
    for key, method in (calibrators or {}).items():
        for ref in CALIBRATOR_REFERENCES.get(method, ()):
            cited_for.setdefault(ref, []).append(labels.get(key, key))
    for metric in dict.fromkeys(metrics):
        for ref in METRIC_REFERENCES.get(metric, ()):
            cited_for.setdefault(ref, []).append(labels.get(metric, metric))
    unknown = sorted(set(cited_for) - set(REFERENCES))
    if unknown:
        raise ValueError(
            f"no reference for {unknown}; add them to calbench.report.references.REFERENCES"
        )
    keys = sorted(cited_for, key=lambda k: k.replace("š", "s").lower())
    return {k: REFERENCES[k] for k in keys}, {k: cited_for[k] for k in keys}

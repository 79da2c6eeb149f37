"""The report's bibliography, in one place: every work the report cites, the works its fixed
text cites, and the source of every calibrator and metric.

A calibrator's or metric's works are read from its own registry entry (the calibrator class's
``reference``, the metric's ``Metric.reference``) by :func:`cited_keys`; a test checks that every
registered calibrator and metric cites works listed here, so a new one without a reference, or
citing a work missing from :data:`REFERENCES`, is caught. :func:`bibliography` gives the works one report cites:
those of its text (:data:`TEXT_CITATIONS`) and those of the calibrators and metrics it shows.
No URLs: the report fetches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from calbench.calibrators import REGISTRY
from calbench.metrics import METRICS

#: Author-year key (as the report's text cites it) -> the full reference.
REFERENCES = {
    "Bates et al. 2023": "S. Bates, T. Hastie, R. Tibshirani. Cross-validation: what does it "
    "estimate and how well does it do it? Journal of the American Statistical Association "
    "119(546), 2024 (online 2023).",
    "Bohdal et al. 2021": "O. Bohdal, Y. Yang, T. Hospedales. Meta-calibration: learning of "
    "model calibration using differentiable expected calibration error. arXiv:2106.09613, 2021.",
    "Bouckaert & Frank 2004": "R. R. Bouckaert, E. Frank. Evaluating the replicability of "
    "significance tests for comparing learning algorithms. PAKDD 2004.",
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
    "McNemar 1947": "Q. McNemar. Note on the sampling error of the difference between correlated "
    "proportions or percentages. Psychometrika 12, 1947.",
    "Phipson & Smyth 2010": "B. Phipson, G. K. Smyth. Permutation p-values should never be zero: "
    "calculating exact p-values when permutations are randomly drawn. Statistical Applications "
    "in Genetics and Molecular Biology 9(1), 2010.",
    "Kull et al. 2017": "M. Kull, T. Silva Filho, P. Flach. Beta calibration: a well-founded and "
    "easily implemented improvement on logistic calibration for binary classifiers. AISTATS 2017.",
    "Vovk & Petej 2014": "V. Vovk, I. Petej. Venn-Abers predictors. UAI 2014.",
    "Zhang et al. 2020": "J. Zhang, B. Kailkhura, T. Y.-J. Han. Mix-n-Match: ensemble and "
    "compositional methods for uncertainty calibration in deep learning. ICML 2020.",
    "Oron & Flournoy 2017": "A. P. Oron, N. Flournoy. Centered isotonic regression: point and "
    "interval estimation for dose-response studies. Statistics in Biopharmaceutical Research "
    "9(3), 2017.",
    "Berta et al. 2025": "E. Berta, D. Holzmüller, M. I. Jordan, F. Bach. Rethinking early "
    "stopping: refine, then calibrate. arXiv:2501.19195, 2025.",
    "Lucena 2018": "B. Lucena. Spline-based probability calibration. arXiv:1809.07751, 2018.",
    "Geifman & El-Yaniv 2017": "Y. Geifman, R. El-Yaniv. Selective classification for deep neural "
    "networks. NeurIPS 2017.",
    "Sadinle et al. 2019": "M. Sadinle, J. Lei, L. Wasserman. Least ambiguous set-valued "
    "classifiers with bounded error levels. Journal of the American Statistical Association "
    "114(525), 2019.",
    "Romano et al. 2020": "Y. Romano, M. Sesia, E. J. Candès. Classification with valid and "
    "adaptive coverage. NeurIPS 2020.",
    "Blasiok & Nakkiran 2023": "J. Błasiok, P. Nakkiran. Smooth ECE: principled reliability "
    "diagrams via kernel smoothing. arXiv:2309.12236, 2023.",
    "Bröcker & Smith 2007": "J. Bröcker, L. A. Smith. Increasing the reliability of reliability "
    "diagrams. Weather and Forecasting 22(3), 2007.",
    "Sun et al. 2024": "Y. Sun, P. Chaudhari, I. J. Barnett, E. Dobriban. A confidence interval "
    "for the l2 expected calibration error. arXiv:2408.08998, 2024.",
    "Spiegelhalter 1986": "D. J. Spiegelhalter. Probabilistic prediction in patient management "
    "and clinical trials. Statistics in Medicine 5(5), 1986.",
    "Arrieta-Ibarra et al. 2022": "I. Arrieta-Ibarra, P. Gujral, J. Tannen, M. Tygert, C. Xu. "
    "Metrics of calibration for probabilistic predictions. JMLR 23, 2022.",
    "Naeini et al. 2015": "M. P. Naeini, G. F. Cooper, M. Hauskrecht. Obtaining well calibrated "
    "probabilities using Bayesian binning. AAAI 2015.",
    "Naeini & Cooper 2016": "M. P. Naeini, G. F. Cooper. Binary classifier calibration using an "
    "ensemble of near isotonic regression models. IEEE ICDM 2016.",
    "Wilcoxon 1945": "F. Wilcoxon. Individual comparisons by ranking methods. Biometrics "
    "Bulletin 1(6), 1945.",
    "Efron & Stein 1981": "B. Efron, C. Stein. The jackknife estimate of variance. The "
    "Annals of Statistics 9(3), 1981.",
    "Gruber & Buettner 2022": "S. G. Gruber, F. Buettner. Better uncertainty calibration via "
    "proper scores for classification and beyond. NeurIPS 2022.",
    "Efron 1987": "B. Efron. Better bootstrap confidence intervals. Journal of the American "
    "Statistical Association 82(397), 1987.",
    "Efron & Tibshirani 1993": "B. Efron, R. J. Tibshirani. An Introduction to the Bootstrap. "
    "Chapman & Hall, 1993.",
    "Nadeau & Bengio 2003": "C. Nadeau, Y. Bengio. Inference for the generalization error. "
    "Machine Learning 52(3), 2003.",
    "Nixon et al. 2019": "J. Nixon, M. W. Dusenberry, L. Zhang, G. Jerfel, D. Tran. Measuring "
    "calibration in deep learning. CVPR Workshops 2019.",
    "Platt 1999": "J. C. Platt. Probabilistic outputs for support vector machines and "
    "comparisons to regularized likelihood methods. Advances in Large Margin Classifiers, "
    "MIT Press, 1999.",
    "Roelofs et al. 2022": "R. Roelofs, N. Cain, J. Shlens, M. C. Mozer. Mitigating bias in "
    "calibration error estimation. AISTATS 2022.",
    "Friedman 1937": "M. Friedman. The use of ranks to avoid the assumption of normality "
    "implicit in the analysis of variance. Journal of the American Statistical Association "
    "32(200), 1937.",
    "Friedman 1940": "M. Friedman. A comparison of alternative tests of significance for the "
    "problem of m rankings. Annals of Mathematical Statistics 11(1), 1940.",
    "Iman & Davenport 1980": "R. L. Iman, J. M. Davenport. Approximations of the critical "
    "region of the Friedman statistic. Communications in Statistics - Theory and Methods 9(6), "
    "1980.",
    "Nemenyi 1963": "P. B. Nemenyi. Distribution-free multiple comparisons. PhD thesis, "
    "Princeton University, 1963.",
    "Dietterich 1998": "T. G. Dietterich. Approximate statistical tests for comparing supervised "
    "classification learning algorithms. Neural Computation 10(7), 1998.",
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


def cited_keys(text: str) -> tuple[str, ...]:
    """The keys of :data:`REFERENCES` that ``text`` (a registry entry's ``reference``) cites: a
    key "Surname ... Year" is cited when its first author's surname and its year appear in one
    ``;``-separated part of the text, e.g. "Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017,
    eq. 3" cites "Naeini et al. 2015" and "Guo et al. 2017"."""
    out = []
    for part in (text or "").split(";"):
        for key in REFERENCES:
            surname, year = key.split()[0].rstrip(","), key.split()[-1]
            pattern = rf"(?<!\w){re.escape(surname)}(?!\w).*?(?<!\d){year}(?!\d)"
            if re.search(pattern, part) and key not in out:
                out.append(key)
    return tuple(out)


def _cites(key: str) -> re.Pattern:
    """A pattern of a citation of ``key`` in running text: its first author's surname, then
    within a few words (no digit, no sentence end) its year, e.g. "Guo et al. (2017, fig. 1)",
    "Naeini, Cooper & Hauskrecht 2015", "Phipson & Smyth 2010"."""
    surname, year = key.split()[0].rstrip(","), key.split()[-1]
    return re.compile(
        rf"(?<!\w){re.escape(surname)}(?!\w)(?: et al\.)?[^.;()\d]{{0,40}}?\s\(?{year}(?!\d)"
    )


def cited_in(text: str) -> list[str]:
    """The keys of :data:`REFERENCES` that running ``text`` cites (:func:`_cites`), in the
    bibliography's order: the report's bibliography is derived from its own text
    (:func:`calbench.report.render.render_html`)."""
    keys = [k for k in REFERENCES if _cites(k).search(text)]
    return sorted(keys, key=lambda k: k.replace("š", "s").replace("ö", "o").lower())


def calibrator_references() -> dict[str, tuple[str, ...]]:
    """Calibrator registry name -> the works its class's ``reference`` cites (one place: the
    calibrator's own module; :data:`calbench.calibrators.REGISTRY`)."""
    return {name: cited_keys(cls.reference) for name, cls in REGISTRY.items()}


def metric_references() -> dict[str, tuple[str, ...]]:
    """Metric name -> the works its registry entry's ``reference`` cites
    (:data:`calbench.metrics.METRICS`)."""
    return {name: cited_keys(m.reference) for name, m in METRICS.items()}


#: Works cited by an optional section of the report, when it is shown.
SECTION_CITATIONS = {
    "dece_history": ("Bohdal et al. 2021",),
    "robustness": ("Nixon et al. 2019", "Kumar et al. 2019", "Wilcoxon 1945"),
    "verdicts": ("Kumar et al. 2019", "Efron & Stein 1981"),
    "over_models": ("Efron & Tibshirani 1993", "Efron 1987"),
    "proper_scores": ("Gruber & Buettner 2022",),
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
    calibrator_refs, metric_refs = calibrator_references(), metric_references()
    for key, method in (calibrators or {}).items():
        for ref in calibrator_refs.get(method, ()):
            cited_for.setdefault(ref, []).append(labels.get(key, key))
    for metric in dict.fromkeys(metrics):
        for ref in metric_refs.get(metric, ()):
            cited_for.setdefault(ref, []).append(labels.get(metric, metric))
    unknown = sorted(set(cited_for) - set(REFERENCES))
    if unknown:
        raise ValueError(
            f"no reference for {unknown}; add them to calbench.report.references.REFERENCES"
        )
    keys = sorted(cited_for, key=lambda k: k.replace("š", "s").lower())
    return {k: REFERENCES[k] for k in keys}, {k: cited_for[k] for k in keys}

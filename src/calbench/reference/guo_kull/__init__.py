"""The Guo et al. 2017 / Kull et al. 2019 study on Kängsepp's published logits: tables and sweep.

Kängsepp's pickles (markus93/NN_calibration ``logits/``: DenseNet-40, ResNet-110, ResNet-110 SD,
Wide-ResNet-32, LeNet-5 on CIFAR-10/100, ResNet-152 SD on SVHN, DenseNet-161 and ResNet-152 on
ImageNet, ResNet-50 on Birds) hold each model's validation and test logits. Kull et al. 2019
computed their deep-network tables from exactly these files, Kängsepp's own notebook and CalArena
re-ran them; Guo et al. 2017 used their own Torch models of the same architectures. This module
compares the workflow's numbers on these logits with every published value packaged in
``guo_kull_logits.csv`` (:func:`calbench.reference.load_reference`):

* :func:`comparison_rows` -- one row per published cell: ours (test part), published, difference,
  tolerance, status. Cells of Guo et al. (``guo17_*``) and of the DenseNet-40 summary slides
  (``guo17_slides``) are a *reference band* (other networks, never flagged); cells of
  ``kull19_nb``, ``kull19_nb_table4``, ``kangsepp_nb`` and ``calarena`` come from the same logits
  and are flagged beyond ``tolerance = base[quantity] + half a unit of the printed last digit``.
* :func:`study_tables` -- those rows in the publications' layouts: Guo et al. Table 1 (ECE %),
  S2 (error %), S3 (NLL); Kull et al. Table 3 (log-loss), Table 4 (classwise ECE summed over
  classes) and the full-precision rows; Kängsepp's notebook; CalArena.
* :func:`summary_rows` -- accuracy, average confidence, ECE and MCE (percent, 15 bins) on the
  validation and test parts before and after calibration, the DenseNet-40 / CIFAR-100 table of
  the Guo et al. summary slides.
* :func:`temperature_sweep` -- reliability diagrams of ``softmax(z / T)`` for fixed temperatures
  (``T in {0.5, 1, 1.5, 2}``) and the ECE-vs-temperature curve (Guo et al. 2017, section 4.2),
  with :mod:`calbench.plots`.
* :func:`to_markdown` / :func:`to_html` -- the report (HTML escaped and self-contained: figures
  embedded as data URIs).

Metric conventions of Kull et al. (their ``evaluation.py``): Brier divided by K -- ours is
``brier / K`` exactly; log-loss = scikit-learn's 2019 ``log_loss`` (clip 1e-15, renormalise),
our ``nll``; classwise ECE summed over classes with their per-class binning -- ``cwece_kull``
(:mod:`calbench.metrics.kull`, as ``ece_kull`` / ``mce_kull`` / ``brier_kull`` for their other
conventions). Quantities map to metrics through :data:`DEFAULT_METRIC_MAP`, which a config
overrides (``report.guo_kull.metric_map``).

Modules: :mod:`~calbench.reference.guo_kull.published` (the published values and the keys),
:mod:`~calbench.reference.guo_kull.cells` (comparison), :mod:`~calbench.reference.guo_kull.tables`
(the publications' layouts, the summary table), :mod:`~calbench.reference.guo_kull.sweep`,
:mod:`~calbench.reference.guo_kull.render` (CSV, Markdown, HTML) and
:mod:`~calbench.reference.guo_kull.write` (the verbs' file-level entry points); every public
name is importable from ``calbench.reference.guo_kull``.
"""

from __future__ import annotations

from calbench.reference.guo_kull.cells import (
    cell_status,
    comparison_rows,
    ours_lookup,
)
from calbench.reference.guo_kull.published import (
    DEFAULT_METRIC_MAP,
    DEFAULT_TOLERANCES,
    EXPECTED,
    FLAGGED,
    METHOD_KEYS,
    METRIC_KEYS,
    MISSING,
    NO_LOGITS,
    OK,
    PACKAGED,
    REFERENCE,
    REFERENCE_BAND,
    SOURCES,
    published_rows,
)
from calbench.reference.guo_kull.render import (
    csv_text,
    to_html,
    to_markdown,
)
from calbench.reference.guo_kull.sweep import (
    temperature_sweep,
)
from calbench.reference.guo_kull.tables import (
    GUO_NOTE,
    study_tables,
    summary_rows,
    summary_table,
)
from calbench.reference.guo_kull.write import (
    load_halves,
    write_sweep,
    write_tables,
)

__all__ = [
    "DEFAULT_METRIC_MAP",
    "DEFAULT_TOLERANCES",
    "EXPECTED",
    "FLAGGED",
    "GUO_NOTE",
    "METHOD_KEYS",
    "METRIC_KEYS",
    "MISSING",
    "NO_LOGITS",
    "OK",
    "PACKAGED",
    "REFERENCE",
    "REFERENCE_BAND",
    "SOURCES",
    "cell_status",
    "comparison_rows",
    "csv_text",
    "load_halves",
    "ours_lookup",
    "published_rows",
    "study_tables",
    "summary_rows",
    "summary_table",
    "temperature_sweep",
    "to_html",
    "to_markdown",
    "write_sweep",
    "write_tables",
]

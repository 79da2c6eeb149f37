"""Result tables and the HTML report.

* :mod:`calbench.report.display`: the one number formatter and display-name mapping.
* :mod:`calbench.report.table_model`: the one table model and its writers (HTML, Markdown, CSV,
  LaTeX), shared by the metric tables (:mod:`calbench.report.tables`), the
  calibration-during-training tables (:mod:`calbench.report.studies`) and the reproduced-vs-
  published tables (:mod:`calbench.reference.compare`).
* :mod:`calbench.report.published`: ours versus published numbers (``reference.csv``).
* :mod:`calbench.report.spec`: the slices of the configuration the reporting steps read.
* :mod:`calbench.report.build`: the steps ``aggregate`` and ``render-report``.
* :mod:`calbench.report.render`: the HTML report (context: :mod:`calbench.report.context`,
  views: :mod:`calbench.report.views`, provenance: :mod:`calbench.report.provenance`).

Submodules are imported on demand: ``from calbench.report import tables``.
"""

"""Result tables and the HTML report.

The report reads the result files (their layout: :mod:`calbench.results`) and prints through
two modules below it, shared with the reproduced-vs-published tables
(:mod:`calbench.reference.ours_vs_published`): :mod:`calbench.display` (the one number formatter and
display-name mapping) and :mod:`calbench.table_model` (the one table model and its writers:
HTML, Markdown, CSV, LaTeX).

* :mod:`calbench.report.tables`: the metric tables;
  :mod:`calbench.report.studies`: the calibration-during-training tables.
* :mod:`calbench.report.published`: ours versus published numbers (``reference.csv``).
* :mod:`calbench.report.spec`: the slices of the configuration the reporting steps read.
* :mod:`calbench.report.build`: the steps ``aggregate`` and ``render-report``.
* :mod:`calbench.report.render`: the HTML report, rendered by :mod:`calbench.pages` from
  ``calbench/templates/report/``; its context in one pass (:mod:`calbench.report.context`),
  its sections in page order (:mod:`calbench.report.sections`; views:
  :mod:`calbench.report.views`, :mod:`calbench.report.verdicts`, provenance:
  :mod:`calbench.report.provenance`).

Submodules are imported on demand: ``from calbench.report import tables``.
"""

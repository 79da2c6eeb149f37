"""Result tables (:mod:`calbench.report.tables`) and the HTML report (:mod:`calbench.report.render`).

Submodules are imported on demand: ``from calbench.report import tables``.
"""

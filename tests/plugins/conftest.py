"""The example plug-in package (examples/my_calibrator) made visible to importlib.metadata
without installing it: a folder holding the package and a ``.dist-info`` with its entry points,
first on ``sys.path`` (and on ``PYTHONPATH`` for subprocesses, :func:`plugin_path`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from plugin_site import EXAMPLE, make_plugin_path


def reset_plugins() -> None:
    """Forget every plug-in: entry-point caches, load records, registry entries, modules."""
    from calbench import plugins
    from calbench.calibrators import REGISTRY
    from calbench.metrics import METRICS

    plugins.forget_loaded()
    for name, cls in list(REGISTRY.items()):
        if not cls.__module__.startswith("calbench.calibrators."):
            del REGISTRY[name]
    for name, m in list(METRICS.items()):
        if not plugins.source_module(m).startswith("calbench.metrics"):
            del METRICS[name]
    for mod in list(sys.modules):
        top = mod.split(".")[0]
        if top in ("my_calibrator", "broken_pkg", "user_cal") or top.startswith("cbt_"):
            del sys.modules[mod]


@pytest.fixture
def plugin_env(tmp_path, monkeypatch):
    """A function ``install(package=..., entry_points=...)`` putting a plug-in package on the
    path (the example by default); every plug-in is forgotten before and after the test."""
    reset_plugins()

    def install(package: Path = EXAMPLE / "my_calibrator", entry_points=None, name="site"):
        path = make_plugin_path(tmp_path / name, package, entry_points)
        monkeypatch.syspath_prepend(str(path))
        from calbench import plugins

        plugins.entry_points.cache_clear()  # installed: nothing is loaded until it is named
        return path

    yield install
    reset_plugins()


@pytest.fixture(autouse=True)
def _forget_plugins_after():
    """Leave the registries as calbench's own tests expect them (adapters and references the
    conformance tests loaded are registered on use)."""
    yield
    reset_plugins()

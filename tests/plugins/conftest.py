"""The example plug-in package (examples/my_calibrator) made visible to importlib.metadata
without installing it: a folder holding the package and a ``.dist-info`` with its entry points,
first on ``sys.path`` (and on ``PYTHONPATH`` for subprocesses, :func:`plugin_path`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "my_calibrator"


def make_plugin_path(
    dest: Path, package: Path = EXAMPLE / "my_calibrator", entry_points=None
) -> Path:
    """``dest`` holding a copy of ``package`` and a dist-info declaring ``entry_points``
    (default: the example's pyproject.toml entry points)."""
    import tomllib

    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(package, dest / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    if entry_points is None:
        project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
        entry_points = project["entry-points"]
    info = dest / f"{package.name}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.name}\nVersion: 0.1.0\n")
    text = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in entry_points.items()
    )
    (info / "entry_points.txt").write_text(text)
    return dest


def reset_plugins() -> None:
    """Forget every plug-in: entry-point caches, load records, registry entries, modules."""
    from calbench import plugins
    from calbench.calibrators import REGISTRY
    from calbench.metrics import METRICS

    plugins.entry_points.cache_clear()
    plugins._FAILED.clear()
    plugins._ORIGINS.clear()
    for name, cls in list(REGISTRY.items()):
        if not cls.__module__.startswith("calbench.calibrators."):
            del REGISTRY[name]
    for name, m in list(METRICS.items()):
        if not plugins._source_module(m).startswith("calbench.metrics"):
            del METRICS[name]
    for mod in list(sys.modules):
        if mod.split(".")[0] in ("my_calibrator", "broken_pkg", "user_cal"):
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

        plugins.entry_points.cache_clear()
        plugins.load_metric_plugins()
        return path

    yield install
    reset_plugins()

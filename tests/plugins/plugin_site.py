"""A plug-in package made visible to importlib.metadata without installing it: a folder
holding the package and a ``.dist-info`` with its entry points, put first on ``sys.path`` (or on
``PYTHONPATH`` for a workflow run), as ``pip install -e`` would."""

from __future__ import annotations

import shutil
from pathlib import Path

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


def make_site(dest: Path, files: dict[str, str], entry_points=None, name: str = "cbt_site") -> Path:
    """``dest`` holding ``files`` (relative path -> text: lone modules, folders with or without
    ``__init__.py``) and a dist-info ``name`` declaring ``entry_points`` (``{group: {name:
    "module:attr"}}``), as an installed distribution of loose modules would."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    info = dest / f"{name}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    text = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in (entry_points or {}).items()
    )
    (info / "entry_points.txt").write_text(text)
    return dest

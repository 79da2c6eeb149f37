"""Tests of calbench.plots.save: atomic writes in every format, pyplot figures closed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")

from calbench import plots  # noqa: E402
from calbench.functional import softmax  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from plot_checks import HAND_LABELS, HAND_PROBS  # noqa: E402


# --------------------------------------------------------------------------------------------
# save_figure
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "suffix,magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".pdf", b"%PDF"), (".svg", b"<?xml")]
)
def test_save_figure_formats(tmp_path, suffix, magic):
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS)
    path = tmp_path / "sub" / f"diagram{suffix}"
    out = plots.save_figure(fig, path)
    assert out == path
    assert path.read_bytes().startswith(magic)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left


def test_save_figure_error_leaves_nothing(tmp_path, monkeypatch):
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS)
    path = tmp_path / "diagram.png"

    def boom(*args, **kwargs):
        fname = args[0]
        with open(fname, "wb") as fh:  # a partial write, then a failure
            fh.write(b"\x89PNG partial")
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(fig, "savefig", boom)
    with pytest.raises(RuntimeError, match="renderer failed"):
        plots.save_figure(fig, path)
    assert list(tmp_path.iterdir()) == []


def test_save_figure_replaces_existing_file(tmp_path):
    path = tmp_path / "d.png"
    path.write_bytes(b"old")
    plots.save_figure(plots.reliability_diagram(HAND_PROBS, HAND_LABELS), path)
    assert path.read_bytes().startswith(b"\x89PNG")


def test_save_figure_bad_input(tmp_path):
    fig = plots.reliability_diagram(HAND_PROBS, HAND_LABELS)
    with pytest.raises(ValueError, match="suffix"):
        plots.save_figure(fig, tmp_path / "diagram.xyz")
    with pytest.raises(ValueError, match="suffix"):
        plots.save_figure(fig, tmp_path / "diagram")
    with pytest.raises(ValueError, match="Figure"):
        plots.save_figure("not a figure", tmp_path / "diagram.png")
    assert list(tmp_path.iterdir()) == []


def test_save_figure_closes_pyplot_figure(tmp_path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    plots.reliability_diagram(HAND_PROBS, HAND_LABELS, ax=fig.add_subplot())
    assert plt.fignum_exists(fig.number)
    plots.save_figure(fig, tmp_path / "d.png")
    assert not plt.fignum_exists(fig.number)


def test_a_new_figure_is_written_as_save_figure_writes_it_and_freed_at_once(tmp_path):
    """save_new_figure writes the bytes save_figure writes, leaves the collector as it found it,
    and frees the figure before it returns (its cycles collected with the collector paused
    around it, so no later collection traverses them)."""
    import gc
    import weakref

    from calbench.plots import save_new_figure

    logits = np.random.default_rng(0).normal(size=(200, 3))
    labels = np.random.default_rng(1).integers(0, 3, 200)
    by_method = {"a": softmax(logits), "b": softmax(logits / 2)}
    plots.save_figure(plots.reliability_grid(by_method, labels), tmp_path / "old.png", dpi=50)
    refs = []

    def build():
        fig = plots.reliability_grid(by_method, labels)
        refs.append(weakref.ref(fig))
        return fig

    assert gc.isenabled()
    save_new_figure(build, tmp_path / "new.png", dpi=50)
    assert gc.isenabled() and refs[0]() is None
    assert (tmp_path / "new.png").read_bytes() == (tmp_path / "old.png").read_bytes()

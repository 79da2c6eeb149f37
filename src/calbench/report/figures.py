"""The report's reliability diagrams (Guo et al. 2017, fig. 1) as embedded images: per model
the default panels (uncalibrated, temperature scaling and the calibrator with the lowest
validation ECE) and the others folded, each PNG as a ``data:`` URI shown at its size at
:data:`SCREEN_DPI` (a 2x PNG stays sharp on a high-DPI screen, its text the same size). The
first :data:`EMBEDDED_MODELS` models' diagrams are embedded; the others are links to their
files, so that a study of hundreds of models still gives a page a browser opens."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from calbench.display import spec_labels
from calbench.io import png_data_uri


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "table"


#: Models whose diagrams the report embeds, in the study's order; the diagrams of the others are
#: linked to their files beside the report. A model's grid of 16 calibrators is ~0.45 MB as a
#: data URI: a folder of 100 models embedded whole made an 82 MB page.
EMBEDDED_MODELS = 12

#: The resolution (dots per inch) at which a figure's pixels are shown one to one: a PNG
#: drawn at a higher dpi (2x for high-DPI screens) is shown at its size at this dpi.
SCREEN_DPI = 100


def png_display_width(path: str | os.PathLike) -> int | None:
    """The width (CSS px) to show a PNG at: its pixel width scaled from the dpi it was drawn
    at (its ``pHYs`` chunk) to :data:`SCREEN_DPI`, so that a 2x PNG shows as sharp text of the
    same size; None for a PNG at :data:`SCREEN_DPI` or below, or without ``pHYs``."""
    import struct

    data = Path(path).read_bytes()
    width = struct.unpack(">I", data[16:20])[0]
    at = data.find(b"pHYs")
    if at < 0:
        return None
    ppm_x, _, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
    dpi = ppm_x * 0.0254 if unit == 1 else 0.0
    if dpi <= SCREEN_DPI * 1.05:
        return None
    return round(width * SCREEN_DPI / dpi)


def reliability_figures(
    plots: Mapping, grids: Mapping, rows, spec, report_dir: str | os.PathLike | None = None
) -> list[dict]:
    """Per model: the default panels (uncalibrated, temperature scaling and the calibrator with
    the lowest validation ECE) and the others; falls back to the per-model grid. Past the first
    :data:`EMBEDDED_MODELS` models an entry embeds nothing: its ``files`` are ``{"label",
    "href"}`` links to the same PNGs, relative to ``report_dir`` (the report's folder; the
    working folder when None)."""
    ml, cl, _, _ = spec_labels(spec)
    order = list(spec.get("calibrators", {}))
    val_ece = {
        (r["model"], r["method"]): float(r["value"])
        for r in rows
        if r["metric"] == "ece" and r.get("half") == "val"
    }
    out = []
    keys = list(plots) or list(grids)
    for i, key in enumerate(keys):
        model = key.split("/", 1)[-1]
        entry = {
            "id": f"rd-{_slug(key)}",
            "model": ml.get(model, model),
            "shown": [],
            "more": [],
            "files": [],
            "grid": not plots.get(key),  # the model's grid of every calibrator's diagram
        }
        embed = i < EMBEDDED_MODELS
        per = plots.get(key) or {}
        if per:
            methods = [c for c in order if c in per] + [c for c in per if c not in order]
            scored = [c for c in methods if (model, c) in val_ece]
            best = min(scored, key=lambda c: val_ece[(model, c)]) if scored else None
            default = [c for c in ("uncalibrated", "ts", best) if c in per]
            default = list(dict.fromkeys(default))
            for c in methods:
                label = cl.get(c, c) + (" (lowest validation ECE)" if c == best else "")
                if not embed:
                    entry["files"].append({"label": label, "href": _href(per[c], report_dir)})
                    continue
                fig = {
                    "label": label,
                    "src": png_data_uri(per[c]),
                    "width": png_display_width(per[c]),
                }
                (entry["shown"] if c in default else entry["more"]).append(fig)
        elif key in grids and not embed:
            entry["files"].append(
                {"label": "all calibrators", "href": _href(grids[key], report_dir)}
            )
        elif key in grids:
            entry["shown"].append(
                {
                    "label": "all calibrators",
                    "src": png_data_uri(grids[key]),
                    "width": png_display_width(grids[key]),
                }
            )
        out.append(entry)
    return out


def _href(path, report_dir) -> str:
    """A link from the report's folder to ``path``, URL-quoted (a folder name may hold spaces)."""
    from urllib.parse import quote

    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(report_dir or "."))
    return quote(Path(rel).as_posix())

"""The report's reliability diagrams (Guo et al. 2017, fig. 1) as embedded images: per model
the default panels (uncalibrated, temperature scaling and the calibrator with the lowest
validation ECE) and the others folded, each PNG as a ``data:`` URI shown at its size at
:data:`SCREEN_DPI` (a 2x PNG stays sharp on a high-DPI screen, its text the same size)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from calbench.display import spec_labels
from calbench.io import png_data_uri


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "table"


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


def reliability_figures(plots: Mapping, grids: Mapping, rows, spec) -> list[dict]:
    """Per model: the default panels (uncalibrated, temperature scaling and the calibrator with
    the lowest validation ECE) and the others; falls back to the per-model grid."""
    ml, cl, _, _ = spec_labels(spec)
    order = list(spec.get("calibrators", {}))
    val_ece = {
        (r["model"], r["method"]): float(r["value"])
        for r in rows
        if r["metric"] == "ece" and r.get("half") == "val"
    }
    out = []
    keys = list(plots) or list(grids)
    for key in keys:
        model = key.split("/", 1)[-1]
        entry = {"id": f"rd-{_slug(key)}", "model": ml.get(model, model), "shown": [], "more": []}
        per = plots.get(key) or {}
        if per:
            methods = [c for c in order if c in per] + [c for c in per if c not in order]
            scored = [c for c in methods if (model, c) in val_ece]
            best = min(scored, key=lambda c: val_ece[(model, c)]) if scored else None
            default = [c for c in ("uncalibrated", "ts", best) if c in per]
            default = list(dict.fromkeys(default))
            for c in methods:
                fig = {
                    "label": cl.get(c, c) + (" (lowest validation ECE)" if c == best else ""),
                    "src": png_data_uri(per[c]),
                    "width": png_display_width(per[c]),
                }
                (entry["shown"] if c in default else entry["more"]).append(fig)
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

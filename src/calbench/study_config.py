"""What a workflow config leaves out, filled in before it is validated: the one call the
Snakefile makes (and the config tests), so that a config holds only what it adds.

1. ``calarena:``: one model per experiment of a CalArena benchmark
   (:func:`calbench.reference.calarena.expand_config`);
2. ``logits_folder:``: one model per ``.npz`` / ``.pt`` file; then ``study``, ``datasets`` and
   ``calibrators`` when absent, the calibrators from the workflow's ``config.yaml``
   (:func:`calbench.logits_sources.folder.complete_config`).
"""

from __future__ import annotations

import os

from calbench.logits_sources.folder import complete_config, default_calibrators
from calbench.reference.calarena import expand_config as expand_calarena


def complete(config: dict, workflow_dir: str | os.PathLike) -> dict:
    """Fill ``config`` in place (module docstring); ``workflow_dir`` holds the default study's
    ``config.yaml``. Returns ``config``."""
    expand_calarena(config)
    defaults = None if "calibrators" in config else default_calibrators(workflow_dir)
    return complete_config(config, default_calibrators=defaults)

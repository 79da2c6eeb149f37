"""calbench: calibrators, calibration metrics and reliability plots for classifiers,
and the library under a reproducible Snakemake replication of calibration studies."""

__version__ = "0.1.0"

from calbench.functional import log_softmax, softmax  # noqa: E402

__all__ = ["__version__", "softmax", "log_softmax"]

"""calbench: calibrators, calibration metrics and reliability plots for classifiers,
and the library under a reproducible Snakemake replication of calibration studies."""

__version__ = "0.1.0"

__all__ = ["__version__", "softmax", "log_softmax"]


def __getattr__(name: str):
    """``calbench.softmax`` / ``calbench.log_softmax``, imported on first use, so that
    ``import calbench.cli`` (every job's first step) does not import numpy before it needs to."""
    if name in ("softmax", "log_softmax"):
        from calbench import functional  # lazy: pulls numpy

        return getattr(functional, name)
    raise AttributeError(f"module 'calbench' has no attribute {name!r}")

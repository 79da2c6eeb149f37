"""Divergence guard shared by the calibrators fitted by an iterative optimiser.

A fit must never end worse than where it started: the starting point of every guarded
calibrator (``T = 1``, the identity map, the method's own initial value) is itself a candidate
solution, so a fitted validation objective above its value there, or a non-finite one, means the
optimiser diverged.  LBFGS without a line search (the replicated study's protocol,
``torch.optim.LBFGS(lr=1)``) does so on large logits: the NLL is nearly linear in the
temperature there, the curvature estimate tiny and the first quasi-Newton step huge (on logits
with max |z| = 57 it lands on T = 0.0118 instead of 6.92, NLL 17.4 instead of 4.87 at T = 1).

Each guarded fit compares the two values (:func:`diverged`), refits with a safe method where it
diverged (strong-Wolfe line search in float64 for the scaling family), warns on stderr with a
:class:`FitGuardWarning` saying what happened, records the sentence on the calibrator
(``fit_note_``), and raises a one-line ``ValueError`` naming the calibrator when the safe refit
is still worse than the start.  A fit that did not diverge is returned untouched, so its result
is bit-identical to the unguarded fit.
"""

from __future__ import annotations

import warnings

import numpy as np

#: Relative slack of the comparison (float64 evaluations of both points; a converged fit whose
#: start is already the optimum may end a few ulps above it).
RTOL = 1e-6


class FitGuardWarning(UserWarning):
    """A calibrator's fit diverged and was redone with a safe optimiser, or stopped at a bound
    of its parameter's range (the message says which)."""


def diverged(fitted: float, start: float) -> bool:
    """Whether ``fitted`` (objective at the fitted point) is non-finite or worse than ``start``."""
    return not np.isfinite(fitted) or fitted > start + RTOL * max(1.0, abs(start))


def describe(name: str, what: str, objective: str, fitted: float, start: float, at: str) -> str:
    """``"<name>: <what> diverged (<objective> <fitted> > <start> at <at>)"``."""
    shown = f"{fitted:.4g}" if np.isfinite(fitted) else "non-finite"
    return f"{name}: {what} diverged ({objective} {shown} > {start:.4g} at {at})"


def warn_refit(note: str) -> None:
    """Emit ``note`` as a :class:`FitGuardWarning` (shown on stderr; attributed to the caller of
    ``Calibrator.fit``)."""
    warnings.warn(note, FitGuardWarning, stacklevel=4)


def fail(note: str, refit_value: float, fix: str) -> ValueError:
    """The one-line error of a fit whose safe refit is still worse than its start."""
    shown = f"{refit_value:.4g}" if np.isfinite(refit_value) else "non-finite"
    return ValueError(f"{note}; the safe refit is still worse ({shown}); {fix}")

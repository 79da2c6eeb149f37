"""Logit scaling calibrators: temperature, vector and matrix scaling (``ts``, ``vs``, ``vs_b``, ``ms_b``).

Guo et al. 2017, "On Calibration of Modern Neural Networks" (ICML), section 4.2: calibrated
probabilities are ``softmax(g(z))`` for an affine map ``g`` of the logits ``z`` whose parameters
minimise the negative log-likelihood (mean cross-entropy) on a validation set.

The four variants follow the replicated study's ``LogitScaling`` (one shared implementation, one
row of :data:`PARAMETERISATIONS` each):

=========  =========================================  ============================================
name       map ``g(z)``                               parameters (initial value)
=========  =========================================  ============================================
``ts``     ``z * a``  (temperature ``T = 1 / a``)     ``a`` scalar multiplier (1)
``vs``     ``z * v``                                  ``v`` (K,) (ones); no bias
``vs_b``   ``z * v + b``                              ``v`` (K,) (ones), ``b`` (K,) (zeros)
``ms_b``   ``z @ W + b``                              ``W`` (K, K) (identity), ``b`` (K,) (zeros)
=========  =========================================  ============================================

Defaults reproduce the study: ``torch.optim.LBFGS(lr=1.0, max_iter=1000)`` with PyTorch defaults
otherwise (no line search), one ``step(closure)`` call, float32 tensors, no regularisation,
device ``"auto"`` (``calbench calibrate --device``, cpu by default; else CUDA when
available).  Options: ``line_search="strong_wolfe"``, ``max_iter``, ``dtype="float64"``,
``device``, an L2 penalty ``l2 * sum((theta - theta_init)**2)`` on the deviation from the
initial (identity) map, and for ``ms_b`` the Off-Diagonal and Intercept Regularisation (ODIR) of
Kull et al. 2019, "Beyond temperature scaling" (NeurIPS), section 4:
``lambda / (K (K-1)) * sum_{i != j} W_ij**2 + mu / K * sum_j b_j**2``, added to the mean NLL.

Divergence guard: without a line search LBFGS diverges on large logits (max |z| ~ 57 and
beyond); a fit whose objective ends above its value at the identity map, or non-finite, is
redone with a strong-Wolfe line search in float64 and says so (:func:`guarded_fit_scaling`,
:mod:`calbench.calibrators.fit_guard`); fits that did not diverge are untouched.

``predict_proba`` is pure numpy (float64 arithmetic on the stored parameters; with
``precision="float32"`` the study's float32 arithmetic and float32 softmax, see
:mod:`calbench.calibrators.precision`); torch is imported only inside ``fit``.  ``dtype`` is the
precision of the LBFGS fit, ``precision`` that of the calibrated probabilities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench._checks import check_choice
from calbench._device import resolve_device
from calbench._torch import eager_optimizers
from calbench.calibrators.base import Calibrator, Field, load_calibrator, register
from calbench.calibrators.fit_guard import describe, diverged, fail, warn_refit
from calbench.calibrators.fit_threads import cpu_fit_settings, data_threads
from calbench.calibrators.precision import check_precision, softmax32
from calbench.functional import softmax

#: name -> ordered {parameter: initialiser}; initialisers: "one" (scalar 1), "ones" (K,),
#: "zeros" (K,), "eye" (K, K).  The map applies, in order: ``@ W``, ``* a``, ``* v``, ``+ b``.
PARAMETERISATIONS: dict[str, dict[str, str]] = {
    "ts": {"a": "one"},
    "vs": {"v": "ones"},
    "vs_b": {"v": "ones", "b": "zeros"},
    "ms_b": {"W": "eye", "b": "zeros"},
}

_DTYPES = ("float32", "float64")
_LINE_SEARCHES = (None, "strong_wolfe")


def init_params(kind: str, n_classes: int, dtype: str = "float64") -> dict[str, np.ndarray]:
    """Initial parameters of scaling family ``kind`` for ``n_classes`` classes (identity map)."""
    check_choice(kind, "kind", PARAMETERISATIONS)
    makers = {
        "one": lambda k: np.ones(1),
        "ones": lambda k: np.ones(k),
        "zeros": lambda k: np.zeros(k),
        "eye": lambda k: np.eye(k),
    }
    return {
        name: makers[init](n_classes).astype(dtype)
        for name, init in PARAMETERISATIONS[kind].items()
    }


def apply_scaling(logits, params: dict[str, Any]):
    """Apply the affine logit map defined by ``params`` (numpy arrays or torch tensors).

    Order: ``z @ W`` then ``* a`` then ``* v`` then ``+ b`` (each only if present), so the same
    function serves every row of :data:`PARAMETERISATIONS` and both numpy and torch.
    """
    out = logits
    if "W" in params:
        out = out @ params["W"]
    if "a" in params:
        out = out * params["a"]
    if "v" in params:
        out = out * params["v"]
    if "b" in params:
        out = out + params["b"]
    return out


def check_fit_options(line_search, max_iter, dtype, l2, odir) -> None:
    if line_search not in _LINE_SEARCHES:
        raise ValueError(f"line_search must be None or 'strong_wolfe', got {line_search!r}")
    check_choice(dtype, "dtype", _DTYPES)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    if not (isinstance(l2, int | float) and np.isfinite(l2) and l2 >= 0):
        raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
    if odir is not None:
        ok = isinstance(odir, list | tuple) and len(odir) == 2
        ok = ok and all(isinstance(x, int | float) and np.isfinite(x) and x >= 0 for x in odir)
        if not ok:
            raise ValueError(
                f"odir must be a pair (lambda_offdiag, lambda_bias) of numbers >= 0, got {odir!r}"
            )


def fit_scaling(
    logits: np.ndarray,
    labels: np.ndarray,
    kind: str,
    *,
    max_iter: int = 1000,
    line_search: str | None = None,
    dtype: str = "float32",
    device: str = "auto",
    l2: float = 0.0,
    odir: tuple[float, float] | None = None,
    l2_center: str = "init",
    name: str | None = None,
) -> dict[str, np.ndarray]:
    """Fit scaling family ``kind`` by minimising mean cross-entropy (+ penalties) with LBFGS.

    Objective (Guo et al. 2017, eq. of section 4.2 NLL, plus optional penalties)::

        mean_i CE(softmax(g(z_i)), y_i) + l2 * sum ||theta - theta_0||^2
            + lambda / (K (K-1)) * sum_{i != j} W_ij^2 + mu / K * sum_j b_j^2   (ODIR, Kull 2019)

    ``l2_center="zero"`` replaces ``theta_0`` (the identity map) by 0, i.e. plain weight decay
    ``l2 * sum ||theta||^2`` (Kull et al. 2019's Dir-L2, a Keras L2 regulariser).

    One ``torch.optim.LBFGS(lr=1, max_iter=max_iter, line_search_fn=line_search).step(closure)``
    call, as in the study.  Returns the fitted parameters as numpy arrays of ``dtype``.
    On the CPU the fit runs under :func:`~calbench.calibrators.fit_threads.cpu_fit_settings`
    (the optimiser on one thread, the data term of large problems on several, denormals flushed
    to zero), which changes its speed, not its arithmetic.

    Divergence guard (:mod:`calbench.calibrators.fit_guard`): when the fitted objective
    (evaluated in float64) is non-finite or above its value at the initial map, the fit is
    redone with a strong-Wolfe line search in float64 (parameters then rounded to ``dtype``) and
    a :class:`~calbench.calibrators.fit_guard.FitGuardWarning` says so; a refit still worse than
    the start is a ``ValueError`` naming ``name`` (default ``kind``).  A fit that did not diverge
    is returned unchanged.
    """
    params, note = guarded_fit_scaling(
        logits, labels, kind, max_iter=max_iter, line_search=line_search, dtype=dtype,
        device=device, l2=l2, odir=odir, l2_center=l2_center, name=name,
    )  # fmt: skip
    if note:
        warn_refit(note)
    return params


def guarded_fit_scaling(
    logits, labels, kind, *, max_iter=1000, line_search=None, dtype="float32", device="auto",
    l2=0.0, odir=None, l2_center="init", name=None,
) -> tuple[dict[str, np.ndarray], str | None]:  # fmt: skip
    """:func:`fit_scaling` without the warning: ``(params, note)``, ``note`` the sentence saying
    how a diverged fit was redone (``None`` when the first fit did not diverge)."""
    check_fit_options(line_search, max_iter, dtype, l2, odir)
    check_choice(l2_center, "l2_center", ("init", "zero"))
    if odir is not None and kind != "ms_b":
        raise ValueError(f"odir regularisation applies to matrix scaling (ms_b) only, not {kind!r}")
    name = name or kind
    dev = resolve_device(device)

    def fit(search, precision):
        shape = np.shape(logits)
        with cpu_fit_settings(int(np.prod(shape)), dev, kind, int(shape[1])) as threads:
            return _fit_scaling(
                logits,
                labels,
                kind,
                max_iter,
                search,
                precision,
                dev,
                l2,
                odir,
                l2_center,
                threads,
            )

    def value(params):
        return scaling_objective(
            logits, labels, kind, params, l2=l2, odir=odir, l2_center=l2_center
        )

    out = fit(line_search, dtype)
    start = value(None)
    fitted = value(out)
    if not diverged(fitted, start):
        return out, None
    at = "T=1" if kind == "ts" else "the identity map"
    what = "LBFGS " + ("without line search" if line_search is None else f"({line_search})")
    note = describe(name, what, "NLL" if not (l2 or odir) else "objective", fitted, start, at)
    fix = (
        "check the logits for extreme values, or fit with line_search='strong_wolfe', "
        "dtype='float64'"
    )
    if (line_search, dtype) == ("strong_wolfe", "float64"):
        raise fail(note, fitted, fix)
    refit = {k: v.astype(dtype) for k, v in fit("strong_wolfe", "float64").items()}
    again = value(refit)
    if diverged(again, start):
        raise fail(note, again, fix)
    note += f"; refitted with strong-Wolfe line search in float64 (NLL {again:.4g})"
    return refit, note


def scaling_objective(
    logits, labels, kind, params, *, l2=0.0, odir=None, l2_center="init"
) -> float:
    """The objective of :func:`fit_scaling` at ``params``, in float64 (``inf`` if non-finite);
    ``params=None``: at the initial (identity) map, whose logits are ``z`` itself (no product
    with an identity matrix: on 1,000 classes that would cost more than the fit's own steps)."""
    z = np.asarray(logits, dtype=np.float64)
    identity = params is None
    params = init_params(kind, z.shape[1]) if identity else params
    p64 = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    if not all(np.all(np.isfinite(v)) for v in p64.values()):
        return float("inf")
    with np.errstate(over="ignore", invalid="ignore"):
        g = z if identity else apply_scaling(z, p64)
        m = g.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(g - m).sum(axis=1))
        loss = float(np.mean(lse - g[np.arange(g.shape[0]), np.asarray(labels)]))
    k = z.shape[1]
    if l2:
        init = init_params(kind, k)
        center = {n: 0.0 if l2_center == "zero" else init[n] for n in p64}
        loss += l2 * sum(float(((p64[n] - center[n]) ** 2).sum()) for n in p64)
    if odir is not None:
        lam, mu = odir
        off = p64["W"] - np.diag(np.diag(p64["W"]))
        loss += lam / (k * (k - 1)) * float((off**2).sum()) + mu / k * float((p64["b"] ** 2).sum())
    return loss if np.isfinite(loss) else float("inf")


def _fit_scaling(
    logits, labels, kind, max_iter, line_search, dtype, dev, l2, odir, l2_center="init",
    threads=1,
):  # fmt: skip
    import torch

    tdtype = getattr(torch, dtype)
    n_classes = int(logits.shape[1])
    z = torch.as_tensor(np.asarray(logits), device=dev).to(tdtype)
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64), device=dev)
    init = {
        k: torch.as_tensor(v, device=dev) for k, v in init_params(kind, n_classes, dtype).items()
    }
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    eager_optimizers(torch.optim.LBFGS)
    opt = torch.optim.LBFGS(
        list(params.values()), lr=1.0, max_iter=int(max_iter), line_search_fn=line_search
    )
    offdiag = None
    if odir is not None:
        # multiplying by a 0/1 mask is 3x cheaper than boolean indexing (forward + backward)
        offdiag = 1.0 - torch.eye(n_classes, dtype=tdtype, device=dev)

    def objective():
        with data_threads(threads):  # the optimiser and the penalties: one thread
            loss = torch.nn.functional.cross_entropy(apply_scaling(z, params), y)
        if l2 and l2_center == "zero":
            loss = loss + l2 * sum((params[k] ** 2).sum() for k in params)
        elif l2:
            loss = loss + l2 * sum(((params[k] - init[k]) ** 2).sum() for k in params)
        if odir is not None:
            lam, mu = odir
            k = n_classes
            loss = loss + lam / (k * (k - 1)) * ((params["W"] * offdiag) ** 2).sum()
            loss = loss + mu / k * (params["b"] ** 2).sum()
        return loss

    def closure():
        opt.zero_grad()
        loss = objective()
        with data_threads(threads):  # the penalties' backward is elementwise
            loss.backward()
        return loss

    opt.step(closure)
    # non-finite parameters are left to the divergence guard of guarded_fit_scaling
    return {k: v.detach().cpu().numpy().astype(dtype, copy=False) for k, v in params.items()}


#: Fitted-state schema of each parameterisation (shapes against K; the inverse temperature a > 0).
STATE_SCHEMAS: dict[str, dict[str, Field]] = {
    "ts": {"a": Field(shape=(1,), low=0.0, low_open=True, note="a = 1/T, the inverse temperature")},
    "vs": {"v": Field(shape=("K",))},
    "vs_b": {"v": Field(shape=("K",)), "b": Field(shape=("K",))},
    "ms_b": {"W": Field(shape=("K", "K")), "b": Field(shape=("K",))},
}


#: singular values below this share of the largest count as zero in :func:`shift_subspace`
_NULL_RTOL = 1e-9


def shift_subspace(matrix) -> np.ndarray:
    """An orthonormal basis (rows) of ``{d : d @ matrix in span(1)}``: the input differences
    that the affine map ``x @ matrix + b`` turns into a shift of all classes alike, which
    ``softmax`` does not see (singular values below ``1e-9`` of the largest count as zero)."""
    m = np.asarray(matrix, dtype=np.float64)
    k = m.shape[0]
    centred = m - m.mean(axis=1, keepdims=True)  # m (I - 11^T / K)
    _, sv, vt = np.linalg.svd(centred.T)
    tol = _NULL_RTOL * max(float(sv.max()) if sv.size else 0.0, 1e-300)
    rank = int(np.sum(sv > tol))
    return vt[rank:k]


def softmax_affine_injective(matrix, features: str) -> bool:
    """Whether ``softmax(x @ matrix + b)`` is an injective map of the model's probabilities
    ``p = softmax(z)`` (exact arithmetic), for ``features`` ``"logits"`` (``x = z``, the scaling
    family) or ``"log_probs"`` (``x = log p``, Dirichlet calibration).

    Let ``S = {d : d @ matrix in span(1)}`` (:func:`shift_subspace`). On logits, two inputs give
    the same output iff their difference lies in ``S``, and two logits give the same ``p`` iff
    their difference lies in ``span(1)``: the map is a function of ``p`` and injective iff
    ``S = span(1)`` (temperature scaling, ``a != 0``; vector scaling only with equal scales;
    matrix scaling with equal column sums and otherwise invertible). On log-probabilities
    ``d = log p - log q`` of two points of the open simplex: ``d = 0`` or ``d`` has entries of
    both signs (both sum to 1), and for any ``d = mu u`` with ``u`` of both signs some ``q`` has
    ``sum_j q_j exp(mu u_j) = 1`` for a ``mu != 0`` (the convex ``f(mu)`` equals 1 at ``mu = 0``
    and grows without bound on both sides), a collision. So the map is injective iff ``S`` is one
    line spanned by a ``u`` whose entries share one sign (zeros allowed)."""
    basis = shift_subspace(matrix)
    if basis.shape[0] != 1:
        return False
    u = basis[0] / np.max(np.abs(basis[0]))
    tol = 1e-9
    if features == "logits":
        return bool(np.all(np.abs(np.abs(u) - 1.0) <= tol) and np.all(u * u[0] > 0))
    if features == "log_probs":
        return bool(np.all(u >= -tol) or np.all(u <= tol))
    raise ValueError(f"features must be 'logits' or 'log_probs', got {features!r}")


class _LogitScaling(Calibrator):
    """Shared implementation of :data:`PARAMETERISATIONS` (see module docstring)."""

    kind: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind and "state_schema" not in cls.__dict__:
            cls.state_schema = STATE_SCHEMAS[cls.kind]

    def __init__(
        self,
        *,
        max_iter: int = 1000,
        line_search: str | None = None,
        dtype: str = "float32",
        device: str = "auto",
        l2: float = 0.0,
        precision: str = "float64",
        **extra: Any,
    ) -> None:
        check_fit_options(line_search, max_iter, dtype, l2, extra.get("odir"))
        super().__init__(
            max_iter=max_iter,
            line_search=line_search,
            dtype=dtype,
            device=device,
            l2=l2,
            precision=check_precision(precision),
            **extra,
        )
        self.params_: dict[str, np.ndarray] | None = None
        #: how a diverged fit was redone (:mod:`calbench.calibrators.fit_guard`), else None
        self.fit_note_: str | None = None

    def _transform_input(self, logits: np.ndarray) -> np.ndarray:
        """Features the affine map acts on (the logits themselves; Dirichlet overrides)."""
        return logits

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        p = self._params
        odir = p.get("odir")
        self.fit_note_ = None
        self.params_, self.fit_note_ = guarded_fit_scaling(
            self._transform_input(logits),
            labels,
            self.kind,
            max_iter=p["max_iter"],
            line_search=p["line_search"],
            dtype=p["dtype"],
            device=p["device"],
            l2=p["l2"],
            odir=tuple(odir) if odir is not None else None,
            name=self.name,
        )
        if self.fit_note_:
            warn_refit(self.fit_note_)

    def transform_logits(self, logits) -> np.ndarray:
        """Calibrated logits ``g(z)`` whose softmax is :meth:`predict_proba`: float64, or with
        ``precision="float32"`` the study's float32 arithmetic (float32 input, parameters and
        result; :mod:`calbench.calibrators.precision`)."""
        if self.params_ is None:
            raise ValueError(f"{type(self).__name__} is not fitted; call fit(logits, labels) first")
        dtype = np.float32 if self._params.get("precision") == "float32" else np.float64
        z = np.asarray(self._transform_input(np.asarray(logits)), dtype=dtype)
        params = {k: v.astype(dtype) for k, v in self.params_.items()}
        return apply_scaling(z, params)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        g = self.transform_logits(logits)
        return softmax32(g) if g.dtype == np.float32 else softmax(g)

    def _get_state(self) -> dict[str, Any]:
        return {k: np.array(v) for k, v in self.params_.items()}

    def linear_part(self) -> np.ndarray:
        """The ``(K, K)`` matrix ``M`` of the fitted map ``x @ M + b`` (``W``, times ``a``, times
        ``diag(v)``, in :data:`PARAMETERISATIONS`' order)."""
        if self.params_ is None:
            raise ValueError(f"{type(self).__name__} is not fitted; call fit(logits, labels) first")
        k = int(self.n_classes_)
        m = np.asarray(self.params_.get("W", np.eye(k)), dtype=np.float64)
        if "a" in self.params_:
            m = m * float(self.params_["a"][0])
        if "v" in self.params_:
            m = m * np.asarray(self.params_["v"], dtype=np.float64)[None, :]
        return m

    def is_injective(self) -> bool:
        """Whether the fitted map is injective in the model's probabilities
        (:func:`softmax_affine_injective` on the logits): always for temperature scaling
        (``a > 0``); for vector scaling only when all scales are equal (else a shift of the
        logits, which leaves ``softmax(z)`` alone, changes the output: the output is not a
        function of the model's probabilities); for matrix scaling when the column sums of
        ``W`` are equal and ``W`` is invertible."""
        super().is_injective()
        return softmax_affine_injective(self.linear_part(), "logits")

    def _set_state(self, state: dict[str, Any]) -> None:
        self.params_ = {k: np.asarray(state[k]) for k in PARAMETERISATIONS[self.kind]}


@register
class TemperatureScaling(_LogitScaling):
    """Temperature scaling (Guo et al. 2017, sec. 4.2): ``softmax(z * a)``, ``T = 1 / a``."""

    name = "ts"
    reference = "Guo et al. 2017, sec. 4.2 (temperature scaling)"
    kind = "ts"
    injective = True  # softmax(a z), a > 0 (the state's bound): z / T determines p

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        super()._fit(logits, labels)
        a = float(self.params_["a"][0])
        pred = np.argmax(logits, axis=1)
        if not a > 0.0 and np.all(pred == pred[0]):
            # a model that predicts one class: its logits carry no information about the labels
            # that a positive temperature could use, so the likelihood's maximum over a > 0 is at
            # a -> 0 (T -> infinity, uniform probabilities); the fit keeps a small a, whose
            # probabilities are uniform to 1e-3 and whose argmax is still the model's class
            spread = float(np.max(np.ptp(np.asarray(logits, dtype=np.float64), axis=1)))
            dtype = self.params_["a"].dtype
            self.params_ = {"a": np.array([1e-3 / max(spread, 1.0)], dtype=dtype)}
            import warnings

            warnings.warn(
                f"temperature scaling: the model predicts class {int(pred[0])} for all "
                f"{len(labels)} samples, so no positive temperature improves on uniform "
                f"probabilities; fitted T = {1.0 / float(self.params_['a'][0]):.4g} (about "
                "uniform)",
                stacklevel=2,
            )
            return
        if not a > 0.0:
            self.params_ = None
            acc = float(np.mean(pred == labels))
            raise ValueError(
                f"temperature scaling found no positive temperature (a = 1/T = {a:.3g}): the "
                f"logits do not predict these labels (accuracy {acc:.1%} on {len(labels)} "
                "samples); check that logits and labels come from the same samples in the same "
                "order"
            )

    @property
    def temperature_(self) -> float:
        """Fitted temperature ``T = 1 / a``."""
        if self.params_ is None:
            raise ValueError("TemperatureScaling is not fitted; call fit(logits, labels) first")
        return float(1.0 / np.float64(self.params_["a"][0]))


@register
class VectorScaling(_LogitScaling):
    """Vector scaling without bias (study's "V-scaling"): ``softmax(z * v)``."""

    name = "vs"
    reference = "Guo et al. 2017, sec. 4.2 (vector scaling)"
    kind = "vs"


@register
class VectorScalingBias(_LogitScaling):
    """Vector scaling with per-class bias (study's "V-scaling-b", Guo 2017): ``softmax(z*v + b)``."""

    name = "vs_b"
    reference = "Guo et al. 2017, sec. 4.2 (vector scaling with bias)"
    kind = "vs_b"


@register
class MatrixScalingBias(_LogitScaling):
    """Matrix scaling with bias (Guo 2017; study's "M-scaling-b"): ``softmax(z @ W + b)``.

    ``odir=(lambda, mu)`` adds Kull et al. 2019's ODIR penalty (see module docstring).
    """

    name = "ms_b"
    reference = (
        "Guo et al. 2017, sec. 4.2 (matrix scaling); Kull et al. 2019 (its ODIR regulariser)"
    )
    kind = "ms_b"

    def __init__(self, *, odir: tuple[float, float] | None = None, **kwargs: Any) -> None:
        if odir is not None:
            check_fit_options(None, 1, "float32", 0.0, odir)
            odir = [float(odir[0]), float(odir[1])]
        super().__init__(odir=odir, **kwargs)


def fitted_temperature(path) -> float:
    """Temperature ``T`` of a fitted ``ts`` / ``ts_sbece`` calibrator JSON."""
    cal = load_calibrator(path)
    if not hasattr(cal, "temperature_"):
        raise ValueError(f"{path} is not a temperature-scaling calibrator; pass a ts JSON file")
    return float(cal.temperature_)

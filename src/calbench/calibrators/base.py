"""Base class, registry and (de)serialisation shared by every calibrator.

A calibrator is sklearn-style: ``fit(logits, labels)`` returns ``self`` and
``predict_proba(logits)`` returns an ``(N, K)`` array of probabilities whose rows sum to 1.
Its hyperparameters (constructor arguments) and fitted state serialise to a JSON-able dict, so a
fitted calibrator is a file that round-trips bit-exactly::

    {"method": "ts", "params": {...constructor kwargs...}, "state": {...fitted arrays...}}

(the file format, with arrays stored as base64 of their bytes and a digest verified on load, is
:mod:`calbench.calibrators.storage`).

Subclasses set ``name`` (the registry key), declare ``state_schema`` (one :class:`Field` per
fitted-state entry), implement ``_fit``, ``_predict_proba``, ``_get_state`` and ``_set_state``,
and register themselves with :func:`register`. Two checks then hold for every calibrator without
further code:

* hyperparameters: the accepted names are those of the ``__init__`` signatures along the class
  hierarchy (:meth:`Calibrator.accepted_params`); any other keyword is a one-line ``ValueError``
  that lists them (also when read back from JSON);
* fitted state read from JSON (:meth:`Calibrator.from_dict`, :func:`load_calibrator`) must have
  exactly the declared keys, real finite values, the declared shapes against ``K`` and the
  declared bounds (e.g. a temperature's inverse ``a > 0``), and pass the calibrator's
  cross-field checks (``_check_state``: sorted knots, consistent offsets) and its checks against
  the hyperparameters (``_check_state_params``: ``hist``'s ``n_bins``); errors name the file and
  the field.

``fit`` refuses inputs whose rows are already probability vectors (calibrators take logits;
pass ``allow_probabilities=True`` if such rows really are logits). A calibrator may record the
identity of the logits it was fitted on (``fitted_on``: order hash and file digest), which the
``evaluate``/``compare``/``plot-reliability`` verbs check (a calibrator recording none is refused
there unless ``--allow-other-logits``).
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from calbench._checks import ROW_SUM_ATOL, check_input_file, check_logits, check_logits_labels
from calbench.calibrators.storage import (
    MAX_JSON_BYTES,
    from_jsonable,
    read_sealed,
    to_jsonable,
    write_sealed,
)

REGISTRY: dict[str, type[Calibrator]] = {}


def register(cls: type[Calibrator]) -> type[Calibrator]:
    """Class decorator: add ``cls`` to :data:`REGISTRY` under ``cls.name``."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} needs a non-empty class attribute 'name'")
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise TypeError(f"calibrator name {cls.name!r} is registered twice")
    REGISTRY[cls.name] = cls
    return cls


@dataclass(frozen=True)
class Field:
    """One entry of a calibrator's fitted state, as declared in ``state_schema``.

    ``shape``: dimensions, each an int, ``"K"`` (classes), ``"K+1"`` or ``None`` (any length);
    ``()`` is a scalar. ``ragged=True``: a list of ``K`` 1-D arrays of any lengths (BBQ).
    ``integer``: integral values. ``low``/``high``: inclusive bounds, or exclusive with
    ``low_open``. Every value must be finite. ``note`` explains the field in error messages.
    """

    shape: tuple = ()
    ragged: bool = False
    integer: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    note: str = ""

    def check(self, value: Any, k: int) -> str | None:
        """Why ``value`` is not a valid entry for ``k`` classes, or ``None``."""
        if self.ragged:
            if not isinstance(value, list) or len(value) != k:
                return f"must be a list of {k} arrays (one per class)"
            for j, part in enumerate(value):
                why = Field(
                    shape=(None,),
                    integer=self.integer,
                    low=self.low,
                    high=self.high,
                    low_open=self.low_open,
                ).check(part, k)
                if why:
                    return f"[{j}] {why}"
            return None
        if isinstance(value, bool) or value is None or isinstance(value, str | dict | list):
            return f"must be {'a number' if not self.shape else 'an array'}, got {value!r:.40}"
        arr = np.asarray(value)
        if not (np.issubdtype(arr.dtype, np.number)):
            return f"must be numeric, got dtype {arr.dtype}"
        want = tuple(k if d == "K" else k + 1 if d == "K+1" else d for d in self.shape)
        if arr.ndim != len(want) or any(
            w is not None and w != s for w, s in zip(want, arr.shape, strict=True)
        ):
            shown = tuple("*" if w is None else w for w in want)
            return f"has shape {arr.shape}, expected {shown} for K={k}"
        if arr.size == 0:
            return None
        if not np.all(np.isfinite(arr)):
            return "holds NaN or infinite values"
        if self.integer and not np.all(arr == np.round(arr)):
            return "must hold integers"
        lo, hi = float(arr.min()), float(arr.max())
        if self.low is not None and (lo <= self.low if self.low_open else lo < self.low):
            return f"= {lo:g} must be {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None and hi > self.high:
            return f"= {hi:g} must be <= {self.high:g}"
        return None


def rises_within(values, offsets, *, strict: bool = True) -> bool:
    """Whether ``values`` rise (strictly, or non-decreasing with ``strict=False``) within each
    segment ``values[offsets[j]:offsets[j+1]]``: sorted knots of per-class fits, checked on load
    (knots applied out of order silently give another map)."""
    v = np.asarray(values)
    if v.size < 2:
        return True
    d = np.diff(v)
    ok = d > 0 if strict else d >= 0
    cuts = np.asarray(offsets, dtype=np.int64)[1:-1] - 1  # a step from one segment to the next
    ok[cuts[(cuts >= 0) & (cuts < ok.size)]] = True
    return bool(np.all(ok))


def _why(cls_name: str, where: str, detail: str) -> ValueError:
    return ValueError(
        f"{where}: {detail}; refit the {cls_name} calibrator (calbench fit-calibrator)"
    )


class Calibrator:
    """Common interface of all calibrators (see module docstring)."""

    name: ClassVar[str] = ""
    #: the paper (authors and year, section or equation) the calibrator implements; the report's
    #: bibliography reads it (calbench.report.references.cited_keys); empty only for softmax
    reference: ClassVar[str] = ""
    #: Fitted-state entries (see :class:`Field`). Every calibrator of calbench declares one (a
    #: contract test checks); ``None`` (undeclared) loads a state without checking it.
    state_schema: ClassVar[dict[str, Field] | None] = None
    #: whether every fitted instance's map is injective as a map of the model's probabilities
    #: ``softmax(z)`` to the calibrated ones (a function of them, and distinct ones stay
    #: distinct; exact arithmetic). Then the refinement part of a proper score is unchanged and
    #: the paired NLL or Brier difference against uncalibrated is the change in (proper)
    #: calibration error (Gruber & Buettner 2022, "Better uncertainty calibration via proper
    #: scores for classification and beyond", NeurIPS). ``False`` (the default, also for
    #: plug-ins that declare nothing) claims
    #: nothing; :meth:`is_injective` may still find a fitted instance injective.
    injective: ClassVar[bool] = False

    def is_injective(self) -> bool:
        """Whether this fitted calibrator's map is injective in the sense of :attr:`injective`
        (a proof from its fitted parameters where the class cannot promise it for all; ``False``
        where none is known). A one-line ``ValueError`` when it is not fitted."""
        if self.n_classes_ is None:
            raise ValueError(
                f"calibrator {self.name} is not fitted; call fit(logits, labels) before "
                "is_injective"
            )
        return bool(type(self).injective)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_checks_params", False):
            return

        @functools.wraps(init)
        def checked_init(self, *args: Any, **params: Any) -> None:
            type(self)._reject_unknown(params)
            try:
                init(self, *args, **params)
            except ValueError as exc:  # a bad hyperparameter: name the calibrator
                text = str(exc)
                if text.startswith("calibrator "):
                    raise
                raise ValueError(
                    f"calibrator {type(self).name or type(self).__name__}: {text}"
                ) from None

        checked_init._checks_params = True  # type: ignore[attr-defined]
        cls.__init__ = checked_init  # type: ignore[method-assign]

    def __init__(self, **params: Any) -> None:
        type(self)._reject_unknown(params)
        self._params = dict(params)
        self.n_classes_: int | None = None
        #: identity of the logits this calibrator was fitted on (see :meth:`set_fitted_on`)
        self.fitted_on_: dict[str, str] | None = None
        #: whether fit accepted probability rows (allow_probabilities=True); predict_proba follows
        self.allow_probabilities_: bool = False

    @classmethod
    def accepted_params(cls) -> tuple[str, ...]:
        """Hyperparameter names ``cls`` accepts: the keyword parameters of the ``__init__``
        signatures along the MRO, down to the first ``__init__`` without ``**kwargs``."""
        names: list[str] = []
        for klass in cls.__mro__:
            if klass is Calibrator:
                break
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            more = False
            for p in list(inspect.signature(inspect.unwrap(init)).parameters.values())[1:]:
                if p.kind is inspect.Parameter.VAR_KEYWORD:
                    more = True
                elif p.kind is not inspect.Parameter.VAR_POSITIONAL and p.name not in names:
                    names.append(p.name)
            if not more:
                break
        return tuple(names)

    @classmethod
    def _reject_unknown(cls, params: dict[str, Any]) -> None:
        unknown = [k for k in params if k not in cls.accepted_params()]
        if unknown:
            accepted = sorted(cls.accepted_params())
            raise ValueError(
                f"calibrator {cls.name or cls.__name__} has no parameter(s) {unknown}; "
                f"accepted: {accepted if accepted else 'none'}"
            )

    # --- public API -------------------------------------------------------------------------
    def fit(self, logits, labels, *, allow_probabilities: bool = False) -> Calibrator:
        """Fit on validation ``logits`` (N, K) and integer ``labels`` (N,); return ``self``.

        Rows that are already probability vectors (all >= 0, each summing to 1) are refused:
        calibrators take logits, and fitting them on probabilities silently gives a wrong map
        (temperature scaling then fits a far too small T). ``allow_probabilities=True`` accepts
        such rows for users who really have logits of that form; the fitted calibrator then
        accepts them in :meth:`predict_proba` too (and records so in its JSON).

        Fewer than 2 samples is an error. Labels of a single class, or fewer samples than the
        calibrator has fitted parameters (:meth:`n_parameters`), give a
        :class:`FewSamplesWarning`: the parameters are then not identified by the data
        (regularisation or defaults decide them).
        """
        try:
            z, y = check_logits_labels(logits, labels)
            if not allow_probabilities:
                check_not_probabilities(z)
        except ValueError as exc:
            raise ValueError(f"calibrator {self.name}: {exc}") from None
        if z.shape[0] < 2:
            raise ValueError(
                f"calibrator {self.name}: fit got {z.shape[0]} sample; pass at least 2 "
                "(a validation set large enough to estimate its parameters)"
            )
        self.n_classes_ = None  # a failed (re)fit must not leave the object looking fitted
        self.fitted_on_ = None
        self.allow_probabilities_ = bool(allow_probabilities)
        self._fit(z, y)
        self.n_classes_ = int(z.shape[1])
        self._warn_few_samples(z.shape[0], y)
        return self

    def n_parameters(self) -> int:
        """Number of fitted real parameters whose count the data cannot change: the sizes of the
        state fields declared with a fixed, non-integer shape (a temperature: 1, vector scaling:
        2 K, matrix scaling: K^2 + K). Data-sized states (bin values, isotonic knots) count 0."""
        if self.n_classes_ is None or not self.state_schema:
            return 0
        state = self._get_state()
        total = 0
        for key, field in self.state_schema.items():
            if field.ragged or field.integer or None in field.shape or key not in state:
                continue
            total += int(np.size(state[key]))
        return total

    def _warn_few_samples(self, n: int, y: np.ndarray) -> None:
        if not self.state_schema:  # nothing is estimated (uncalibrated)
            return
        n_params = self.n_parameters()
        if np.unique(y).size < 2:
            why = "all labels are one class"
        elif n < n_params:
            why = f"{n} samples for {n_params} fitted parameters"
        else:
            return
        warnings.warn(
            f"calibrator {self.name}: {why}; the fit is not determined by the data, use a "
            "larger validation set (or a calibrator with fewer parameters)",
            FewSamplesWarning,
            stacklevel=3,
        )

    def set_fitted_on(self, order_hash: str, logits_sha256: str) -> None:
        """Record the identity of the logits file the calibrator was fitted on: the sample
        order hash stored in it and the file's SHA-256 (checked by :meth:`check_fitted_on`)."""
        self.fitted_on_ = {"order_hash": str(order_hash), "logits_sha256": str(logits_sha256)}

    def check_fitted_on(
        self, order_hash: str, logits_sha256: str, where: str = "calibrator"
    ) -> None:
        """Raise a one-line ``ValueError`` when the calibrator records being fitted on other
        logits than those identified by ``order_hash`` / ``logits_sha256``."""
        rec = self.fitted_on_
        if not rec:
            raise ValueError(
                f"{where} records no fitted_on (the logits it was fitted on), so it cannot be "
                "checked against these logits; refit it with calbench fit-calibrator, or pass "
                "--allow-other-logits if applying it unchecked is intended"
            )
        if rec.get("order_hash") and order_hash and rec["order_hash"] != order_hash:
            raise ValueError(
                f"{where} was fitted on logits of other samples (order_hash "
                f"{rec['order_hash'][:12]}... vs {order_hash[:12]}...); refit it on these logits, "
                "or pass --allow-other-logits if applying it elsewhere is intended"
            )
        if rec.get("logits_sha256") and logits_sha256 and rec["logits_sha256"] != logits_sha256:
            raise ValueError(
                f"{where} was fitted on another logits file (sha256 {rec['logits_sha256'][:12]}... "
                f"vs {logits_sha256[:12]}...), e.g. another model's; refit it on these logits, "
                "or pass --allow-other-logits if applying it elsewhere is intended"
            )

    def predict_proba(self, logits, *, allow_probabilities: bool | None = None) -> np.ndarray:
        """Calibrated probabilities (N, K) for ``logits`` (N, K); rows sum to 1.

        The input is validated as in :meth:`fit`: probability rows are refused unless
        ``allow_probabilities`` (default: what ``fit`` was told) is true.
        """
        if self.n_classes_ is None:
            raise ValueError(
                f"calibrator {self.name} ({type(self).__name__}) is not fitted; call "
                "fit(logits, labels) before predict_proba"
            )
        if allow_probabilities is None:
            allow_probabilities = getattr(self, "allow_probabilities_", False)
        try:
            z = check_logits(logits)
            if not allow_probabilities:
                check_not_probabilities(z, what="predict_proba")
        except ValueError as exc:
            raise ValueError(f"calibrator {self.name}: {exc}") from None
        if z.shape[1] != self.n_classes_:
            raise ValueError(
                f"calibrator {self.name}: logits have {z.shape[1]} classes but the calibrator was fitted on "
                f"{self.n_classes_}"
            )
        return self._predict_proba(z)

    def get_params(self) -> dict[str, Any]:
        """Constructor keyword arguments (hyperparameters)."""
        return dict(self._params)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict holding method name, hyperparameters and fitted state."""
        state = None
        if self.n_classes_ is not None:
            state = {"n_classes": self.n_classes_, **self._get_state()}
        out = {
            "method": self.name,
            "params": to_jsonable(self._params),
            "state": to_jsonable(state),
        }
        if self.fitted_on_:
            out["fitted_on"] = dict(self.fitted_on_)
        if getattr(self, "allow_probabilities_", False):
            out["allow_probabilities"] = True
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "calibrator dict") -> Calibrator:
        """Rebuild a (fitted) calibrator from :meth:`to_dict` output; dispatches on ``method``.

        Everything is validated (see module docstring); errors are one-line ``ValueError`` s
        that start with ``where`` (e.g. the file name) and name the field.
        """
        if not isinstance(data, dict):
            raise ValueError(
                f"{where} must hold a JSON object with method, params and state, got "
                f"{'null' if data is None else type(data).__name__}; refit it (calbench fit-calibrator)"
            )
        unknown = sorted(
            set(data) - {"method", "params", "state", "fitted_on", "allow_probabilities"}
        )
        if unknown:
            raise ValueError(
                f"{where}: unknown top-level key(s) {unknown}; expected method, params, state"
            )
        method = data.get("method")
        if cls is Calibrator:
            target = REGISTRY.get(method) if isinstance(method, str) else None
        else:
            target = cls
        if target is None:
            raise ValueError(
                f"{where}: unknown calibrator method {method!r:.80}; known: {sorted(REGISTRY)} "
                "(a plug-in is loaded by the verb or workflow that names it: docs/plugins.md)"
            )
        if target.name != method:
            raise ValueError(f"{where}: dict is for method {method!r}, not {target.name!r}")
        params = data.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise _why(method, where, f"params must be an object, got {type(params).__name__}")
        try:
            obj = target(**from_jsonable(params))
        except (ValueError, TypeError) as exc:
            raise _why(method, where, f"params: {exc}") from None
        raw = data.get("state")
        if raw is not None:
            obj.n_classes_, state = target._validated_state(raw, where)
            why = obj._check_state_params(state, obj.n_classes_)
            if why:
                raise _why(method, where, f"state: {why}")
            obj._set_state(state)
        fitted_on = data.get("fitted_on")
        if fitted_on is not None:
            if not isinstance(fitted_on, dict) or not all(
                isinstance(fitted_on.get(k), str) and fitted_on[k]
                for k in ("order_hash", "logits_sha256")
            ):
                raise _why(
                    method,
                    where,
                    "fitted_on must hold the non-empty strings order_hash and logits_sha256",
                )
            obj.fitted_on_ = {k: fitted_on[k] for k in ("order_hash", "logits_sha256")}
        allow = data.get("allow_probabilities", False)
        if not isinstance(allow, bool):
            raise _why(
                method, where, f"allow_probabilities must be true or false, got {allow!r:.40}"
            )
        obj.allow_probabilities_ = allow
        return obj

    @classmethod
    def _validated_state(cls, raw: Any, where: str) -> tuple[int, dict[str, Any]]:
        """``(K, state)`` from a JSON state object, checked against :attr:`state_schema`."""
        if not isinstance(raw, dict):
            raise _why(
                cls.name, where, f"state must be an object or null, got {type(raw).__name__}"
            )
        k = raw.get("n_classes")
        if isinstance(k, bool) or not isinstance(k, int) or k < 2:
            raise _why(cls.name, where, f"state.n_classes must be an integer >= 2, got {k!r}")
        schema = cls.state_schema
        if schema is None:  # an undeclared (third-party) calibrator: only decoded, not checked
            return k, {f: from_jsonable(v) for f, v in raw.items() if f != "n_classes"}
        missing = [f for f in schema if f not in raw]
        extra = [f for f in raw if f != "n_classes" and f not in schema]
        if missing:
            raise _why(cls.name, where, f"state.{missing[0]} is missing (fields: {list(schema)})")
        if extra:
            raise _why(
                cls.name,
                where,
                f"state.{extra[0]} is not a field of {cls.name} (fields: {list(schema)})",
            )
        state: dict[str, Any] = {}
        for key, field in schema.items():
            try:
                value = from_jsonable(raw[key])
            except (ValueError, TypeError, KeyError, OverflowError) as exc:  # 300 as int8
                raise _why(cls.name, where, f"state.{key} is not a stored array ({exc})") from None
            why = field.check(value, k)
            if why:
                note = f" ({field.note})" if field.note else ""
                raise _why(cls.name, where, f"state.{key} {why}{note}")
            state[key] = value
        why = cls._check_state(state, k)
        if why:
            raise _why(cls.name, where, f"state: {why}")
        return k, state

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        """Cross-field checks of a fitted state the per-field schema cannot express (override)."""
        return None

    def _check_state_params(self, state: dict[str, Any], k: int) -> str | None:
        """Checks of a fitted state against the hyperparameters (override; e.g. ``hist``'s
        ``n_bins`` against its bin values)."""
        return None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})"

    # --- to implement -----------------------------------------------------------------------
    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


def get_calibrator(name: str, **params: Any) -> Calibrator:
    """Instantiate the registered calibrator ``name`` with hyperparameters ``params``."""
    return _find(name)(**params)


def _find(name: str) -> type[Calibrator]:
    """``REGISTRY[name]``; one-line ``ValueError`` otherwise. Entry points and ``module:Class``
    references are never looked up here: the command or workflow that names a plug-in loads it
    first (:func:`calbench.plugins.load_plugins`, docs/plugins.md)."""
    if isinstance(name, str) and name in REGISTRY:
        return REGISTRY[name]
    raise ValueError(
        f"unknown calibrator {name!r:.80}; choose one of {sorted(REGISTRY)}, or name a plug-in "
        "(an entry point or a module:Class reference) where calbench loads it: a config, "
        "fit-calibrator --method, check-calibrator (docs/plugins.md)"
    )


def save_calibrator(calibrator: Calibrator, path: str | os.PathLike) -> None:
    """Write ``calibrator`` to ``path`` atomically in the file format of
    :mod:`calbench.calibrators.storage` (compact arrays, sealed by a digest); a file larger than
    :data:`MAX_JSON_BYTES` is an error before anything is written."""
    write_sealed(path, calibrator.to_dict(), max_bytes=MAX_JSON_BYTES)


def load_calibrator(path: str | os.PathLike) -> Calibrator:
    """Read a calibrator written by :func:`save_calibrator`, verifying its digest and validating
    every field (:meth:`Calibrator.from_dict`).

    Files larger than :data:`MAX_JSON_BYTES` or nested deeper than
    :data:`~calbench.calibrators.storage.MAX_JSON_DEPTH` are refused before they are decoded
    further."""
    path = Path(path)
    check_input_file(path, "calibrator file", "run calbench fit-calibrator")  # devices, FIFOs too
    data = read_sealed(path, max_bytes=MAX_JSON_BYTES)
    # a plug-in's method is registered by the verb that reads the file (calbench.plugins)
    return Calibrator.from_dict(data, where=str(path))


class FewSamplesWarning(UserWarning):
    """A calibrator was fitted on too few samples (or one class) to estimate its parameters."""


def check_not_probabilities(z: np.ndarray, atol: float = ROW_SUM_ATOL, what: str = "fit") -> None:
    """Refuse ``z`` whose rows are all probability vectors (>= 0, summing to 1 within ``atol``)."""
    if float(z.min()) < 0.0:
        return
    sums = z.sum(axis=1, dtype=np.float64)
    if np.all(np.abs(sums - 1.0) <= atol):
        raise ValueError(
            f"{what} got probabilities (every row is >= 0 and sums to 1), but calibrators take logits; "
            "pass logits (e.g. np.log(probs)), or allow_probabilities=True "
            "(calbench fit-calibrator --allow-probabilities) if these rows really are logits"
        )

"""The ``training`` entry of a model spec: one dataclass holds every option, its default and its
check.

Each field of :class:`TrainingConfig` carries its check in the field's metadata (a
:class:`Check`: an integer or number with bounds, a choice, a mapping, ...);
:func:`parse_training` applies them in field order, then the checks that involve several
options. The workflow's config schema (``workflow/schemas/config.schema.yaml``, the model spec's
``training`` block) states the same options; ``tests/training/test_options.py`` checks that its
keys, enums, bounds and defaults agree with the dataclass.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("constant", "cosine", "multistep")
METHODS = ("standard", "interleaved", "metacal")
#: options of ``training.metacal``: :class:`calbench.metacal.MetaCalibration`'s keyword arguments
#: (checked there) and the split's ``split_seed`` and ``valid_size``
METACAL_KEYS = (
    "variant",
    "meta_lr",
    "n_bins",
    "tau_a",
    "tau_b",
    "reduction",
    "clip_norm",
    "m1_beta",
    "meta_grad_to_model",
    "split_seed",
    "valid_size",
)


# ------------------------------------------------------------------ checks of single options
class Check:
    """Validates one option: ``check(value, name)`` returns the stored value or raises a one-line
    ``ValueError`` naming ``training.<name>``; :attr:`schema` gives the JSON-schema keywords the
    check implies (compared with the workflow's config schema by the tests)."""

    schema: dict = {}

    def __call__(self, value, name: str):
        raise NotImplementedError


class Int(Check):
    """An integer ``>= minimum`` (booleans refused); ``optional``: ``None`` is allowed too."""

    def __init__(self, minimum: int, optional: bool = False):
        self.minimum, self.optional = minimum, optional
        self.schema = {
            "type": ["integer", "null"] if optional else "integer",
            "minimum": minimum,
        }

    def __call__(self, value, name: str):
        if value is None and self.optional:
            return None
        return check_int(value, name, self.minimum)


class Number(Check):
    """A finite number ``> 0`` (``positive``) or ``>= 0``, below ``below`` when given;
    ``optional``: ``None`` is allowed too."""

    def __init__(self, positive: bool, below: float | None = None, optional: bool = False):
        self.positive, self.below, self.optional = positive, below, optional
        self.schema = {
            "type": ["number", "null"] if optional else "number",
            ("exclusiveMinimum" if positive else "minimum"): 0,
        }
        if below is not None:
            self.schema["exclusiveMaximum"] = below

    def __call__(self, value, name: str):
        if value is None and self.optional:
            return None
        out = check_float(value, name, positive=self.positive)
        if self.below is not None and out >= self.below:
            raise ValueError(f"training.{name} must be < {self.below:g}, got {out!r}")
        return out


class Choice(Check):
    """One of ``choices``."""

    def __init__(self, choices: tuple):
        self.choices = choices
        self.schema = {"enum": list(choices)}

    def __call__(self, value, name: str):
        if value not in self.choices:
            raise ValueError(f"training.{name} must be one of {list(self.choices)}, got {value!r}")
        return value


class Flag(Check):
    """``true`` or ``false``."""

    schema = {"type": "boolean"}

    def __call__(self, value, name: str):
        if not isinstance(value, bool):
            raise ValueError(f"training.{name} must be true or false, got {value!r}")
        return value


class LossName(Check):
    """A loss name (a string; the loss registry checks the name when the objective is built)."""

    schema = {}

    def __call__(self, value, name: str):
        if not isinstance(value, str):
            raise ValueError(f"training.{name} must be a loss name, got {value!r}")
        return value


class Mapping(Check):
    """A mapping (an empty value stands for ``{}``); ``keys``: the allowed keys (None: any)."""

    def __init__(self, keys: tuple | None = None):
        self.keys = keys
        self.schema = {"type": "object"}

    def __call__(self, value, name: str):
        value = value or {}
        if not isinstance(value, dict):
            raise ValueError(f"training.{name} must be a mapping, got {value!r}")
        if self.keys is not None:
            bad = sorted(set(value) - set(self.keys))
            if bad:
                raise ValueError(
                    f"unknown training.{name} keys {bad}; allowed: {sorted(self.keys)}"
                )
        return dict(value)


class Milestones(Check):
    """Epochs (integers >= 1) in strictly increasing order, stored as a tuple."""

    schema = {"type": "array"}

    def __call__(self, value, name: str):
        value = value or []
        if not isinstance(value, list | tuple):
            raise ValueError(f"training.{name} must be a list of epochs, got {value!r}")
        out = tuple(check_int(m, f"{name}[]", 1) for m in value)
        if list(out) != sorted(set(out)):
            raise ValueError(f"training.{name} must increase strictly, got {list(out)}")
        return out


class Secondary(Check):
    """``None`` or ``{name, beta (>= 0, default 1), kwargs (mapping)}`` (Karandikar et al.
    2021, section 4: the secondary loss weighted by ``beta``)."""

    schema = {"type": "object"}

    def __call__(self, value, name: str):
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            raise ValueError(
                f"training.{name} must be a mapping {{name: sbece, beta: 1.0, kwargs: {{}}}}, "
                f"got {value!r}"
            )
        extra = sorted(set(value) - {"name", "beta", "kwargs"})
        if extra:
            raise ValueError(
                f"training.{name} has unknown keys {extra}; allowed: beta, kwargs, name"
            )
        kwargs = value.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ValueError(f"training.{name}.kwargs must be a mapping, got {kwargs!r}")
        beta = check_float(value.get("beta", 1.0), f"{name}.beta", positive=False)
        return {"name": value["name"], "beta": beta, "kwargs": dict(kwargs)}


def check_int(value, name: str, minimum: int) -> int:
    """``value`` as an int, refused unless an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"training.{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_float(value, name: str, positive: bool) -> float:
    """``value`` as a float, refused unless finite and ``> 0`` (``positive``) or ``>= 0``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"training.{name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"training.{name} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def option(default, check: Check):
    """A :class:`TrainingConfig` field: ``default`` (a callable for a mutable default, e.g.
    ``dict``) and the :class:`Check` that validates it."""
    meta = {"check": check}
    if callable(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


# ------------------------------------------------------------------ the options
@dataclass(frozen=True)
class TrainingConfig:
    """A model spec's ``training`` entry.

    ``train_subset``: use the first ``train_subset`` training images (None: all).
    ``optimizer``: ``sgd`` (with ``momentum``) or ``adam``; ``schedule``: ``constant``,
    ``cosine`` (per-batch cosine decay from ``lr`` to 0) or ``multistep`` (``lr`` times
    ``lr_decay`` at each epoch of ``milestones``, as Meta-Calibration's x0.1 at 150 and 250).

    ``method``:

    * ``standard``: minimise ``loss`` (plus ``beta * secondary`` when ``secondary`` is set:
      ``{name, beta, kwargs}``, Karandikar et al. 2021 section 4);
    * ``interleaved``: Karandikar et al. 2021 appendix B: ``loss`` on a majority split, then
      ``beta * secondary`` on a held-out ``holdout_fraction`` of the training images, each epoch;
    * ``metacal``: Bohdal et al. 2021 Algorithm 1 (:class:`calbench.metacal.MetaCalibration`) on
      their 80 / 10 / 10 training / validation / meta-validation split of the training images;
      ``metacal`` holds the trainer's options (``variant``: metacal | m0 | m1 | m2, ``meta_lr``,
      ``n_bins``, ``tau_a``, ``tau_b``, ``reduction``, ``clip_norm``, ``m1_beta``,
      ``meta_grad_to_model``) and the split's ``split_seed`` (1) and ``valid_size`` (0.1).

    ``val_size``: hold out the last ``val_size`` training images (never trained on) and record
    validation accuracy, NLL, ECE and DECE after every epoch (Meta-Calibration runs use their
    validation split instead). ``amp``: bfloat16 autocast for the forward pass on a GPU
    (``standard`` / ``interleaved``; ignored on the CPU). ``grad_clip``: clip the gradient norm
    (``standard`` / ``interleaved``; Meta-Calibration uses ``metacal.clip_norm``).

    Constructing it directly checks nothing; :func:`parse_training` validates a spec's mapping.
    """

    loss: str = option("ce", LossName())
    loss_kwargs: dict = option(dict, Mapping())
    epochs: int = option(10, Int(1))
    batch_size: int = option(128, Int(1))
    lr: float = option(0.05, Number(positive=True))
    seed: int = option(0, Int(0))
    train_subset: int | None = option(None, Int(1, optional=True))
    optimizer: str = option("sgd", Choice(OPTIMIZERS))
    momentum: float = option(0.9, Number(positive=False))
    weight_decay: float = option(0.0, Number(positive=False))
    schedule: str = option("constant", Choice(SCHEDULES))
    milestones: tuple = option((), Milestones())
    lr_decay: float = option(0.1, Number(positive=True))
    method: str = option("standard", Choice(METHODS))
    secondary: dict | None = option(None, Secondary())
    holdout_fraction: float = option(0.1, Number(positive=True, below=1))
    metacal: dict = option(dict, Mapping(METACAL_KEYS))
    val_size: int = option(0, Int(0))
    amp: bool = option(False, Flag())
    grad_clip: float | None = option(None, Number(positive=True, optional=True))

    def to_dict(self) -> dict:
        return asdict(self)

    def lr_at(self, step: int, total_steps: int, epoch: int) -> float:
        """Learning rate of optimiser step ``step`` (0-based) of ``total_steps``, in ``epoch``
        (1-based)."""
        if self.schedule == "cosine":
            return 0.5 * self.lr * (1.0 + math.cos(math.pi * step / total_steps))
        if self.schedule == "multistep":
            passed = sum(1 for m in self.milestones if epoch > m)
            return self.lr * self.lr_decay**passed
        return self.lr


def defaults() -> dict:
    """``{option: default}`` of every :class:`TrainingConfig` field."""
    out = {}
    for f in fields(TrainingConfig):
        out[f.name] = f.default_factory() if f.default is MISSING else f.default
    return out


def checks() -> dict[str, Check]:
    """``{option: Check}`` of every :class:`TrainingConfig` field."""
    return {f.name: f.metadata["check"] for f in fields(TrainingConfig)}


def _check_combinations(c: dict) -> None:
    """The rules that involve several options (one-line ``ValueError`` naming them)."""
    if c["milestones"] and c["schedule"] != "multistep":
        raise ValueError("training.milestones needs schedule: multistep; add it or drop milestones")
    if c["secondary"] is not None and "secondary" in c["loss_kwargs"]:
        raise ValueError(
            "give the secondary loss once: training.secondary or training.loss_kwargs.secondary"
        )
    if c["method"] == "interleaved" and c["secondary"] is None:
        raise ValueError(
            "training.method interleaved needs training.secondary {name, beta, kwargs}; add it"
        )
    if c["metacal"] and c["method"] != "metacal":
        raise ValueError("training.metacal options need method: metacal; add it or drop them")
    if c["method"] == "metacal" and (
        c["secondary"] is not None or c["loss"] != "ce" or c["loss_kwargs"]
    ):
        raise ValueError(
            "method: metacal trains cross-entropy (its variants are metacal.variant); "
            "use loss: ce without loss_kwargs or secondary"
        )


def parse_training(entry) -> TrainingConfig:
    """Validate a spec's ``training`` mapping and return a :class:`TrainingConfig`: unknown keys
    are refused, each option is checked by its field's :class:`Check` (missing ones take the
    field's default), then the rules combining options."""
    if not isinstance(entry, dict):
        raise ValueError(
            f"training must be a mapping like {{loss: ce, epochs: 10, ...}}, got {entry!r}"
        )
    known = set(TrainingConfig.__dataclass_fields__)
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ValueError(f"unknown training keys {unknown}; allowed: {sorted(known)}")
    base = defaults()
    values = {
        name: check(entry[name] if name in entry else base[name], name)
        for name, check in checks().items()
    }
    _check_combinations(values)
    return TrainingConfig(**values)

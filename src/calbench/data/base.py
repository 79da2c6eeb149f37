"""The dataset interface: what the study's code uses of a dataset, as one abstract base class.

A dataset is an instance of a :class:`Dataset` subclass, registered in
:data:`calbench.data.DATASETS` as ``"module:ATTRIBUTE"``. Its attributes are the dataset's
pinned facts, its methods place, load and preprocess the data:

* ``NAME`` (the config slug), ``NUM_CLASSES``, ``INPUT_SHAPE`` (C, H, W);
* ``DEFAULT_MIRRORS`` (directories searched before any URL), ``URLS`` (download locations; empty
  when the data cannot be downloaded), ``SIZE_MB`` and ``FILES`` (``(file name, MiB), ...``, for
  ``calbench stage --dry-run``);
* :meth:`Dataset.prepare` places and verifies the files and returns the manifest (a JSON-able
  dict with at least ``dataset`` and ``splits: {split: {"n": ...}}``);
* :meth:`Dataset.load_split` returns ``(images uint8 tensor (N, C, H, W), labels int64 tensor
  (N,))`` in the dataset's own sample order, and :meth:`Dataset.preprocessor` maps such a uint8
  batch (on any device) to the float32 input of the model a config entry describes;
* datasets too large for one uint8 tensor (ImageNet) set ``STREAMING = True`` and serve
  :meth:`Dataset.stream_split` instead: a map-style dataset (``ids``, ``labels``, items
  ``(tensor, label)`` transformed by the model's preset);
* :meth:`Dataset.configure` returns a variant with the dataset config entry's overrides of the
  pinned values (``OPTION_KEYS``, e.g. ``datasets.imagenet.path`` or a test-made archive's MD5).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any


class Dataset(ABC):
    """One dataset of the study (see the module docstring for the contract)."""

    NAME: str
    NUM_CLASSES: int
    INPUT_SHAPE: tuple[int, int, int]
    DEFAULT_MIRRORS: tuple[str, ...] = ()
    URLS: tuple[str, ...] = ()
    SIZE_MB: float | None = None
    FILES: tuple[tuple[str, float], ...] = ()
    #: True for datasets served by :meth:`stream_split` rather than :meth:`load_split`.
    STREAMING: bool = False
    #: Dataset config keys :meth:`configure` accepts (empty: the dataset takes no options).
    OPTION_KEYS: tuple[str, ...] = ()

    @abstractmethod
    def prepare(
        self,
        root: str | os.PathLike,
        *,
        mirrors: Iterable[str | os.PathLike] = (),
        urls: Iterable[str] | None = None,
        timeout: float = 60.0,
    ) -> dict:
        """Place and verify the files under ``root`` (mirrors first, then ``urls``, by default
        :attr:`URLS`) and return the manifest."""

    @abstractmethod
    def load_split(self, root: str | os.PathLike, split: str) -> tuple[Any, Any]:
        """``(images uint8 (N, C, H, W), labels int64 (N,))`` tensors of ``split`` under ``root``."""

    def stream_split(self, root: str | os.PathLike, split: str, spec: dict | None = None):
        """Map-style dataset of ``split`` transformed by the model ``spec``'s preset
        (``STREAMING`` datasets only)."""
        raise ValueError(f"{self.NAME}: not a streamed dataset; use load_split")

    @abstractmethod
    def preprocessor(self, spec: dict | None = None) -> Callable:
        """``f(uint8 batch) -> float32 network input`` for the model described by ``spec``."""

    def configure(self, options: dict | None) -> Dataset:
        """This dataset with the config entry's ``options`` replacing pinned values."""
        raise ValueError(
            f"dataset {self.NAME} takes no options, got {sorted(options or {})}; "
            "remove them from its entry"
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} dataset {self.NAME!r}>"


def check_options(name: str, options: dict, allowed: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the keys of ``options`` that are not ``allowed``."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"{name}: unknown dataset option(s) {unknown}; allowed: {list(allowed)}")


__all__ = ["Dataset", "check_options"]

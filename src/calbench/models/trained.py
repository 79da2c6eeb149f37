"""Model source ``train``: networks the workflow trains itself, stored as calbench checkpoints.

A checkpoint is a dict written with ``torch.save`` (atomically) and read back with
``torch.load(..., weights_only=True)``, so loading never runs pickled code. It holds the
``state_dict`` (CPU tensors), the model spec as JSON, the training history, and
``state_sha256``, a content hash of the state dict checked on every load.
"""

from __future__ import annotations

import json
import os
import pickle

from calbench.io import atomic_path, hasher, torch_load_reason
from calbench.models import build_from_spec

FORMAT = "calbench-checkpoint-1"


def state_dict_sha256(state_dict) -> str:
    """SHA-256 of a state dict's names, dtypes, shapes and bytes, in sorted key order."""
    import torch

    h = hasher()
    for key in sorted(state_dict):
        t = state_dict[key]
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"state dict entry {key!r} is not a tensor")
        t = t.detach().to("cpu").contiguous()
        h.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        # reshape first: a 0-dim tensor (BatchNorm's num_batches_tracked) cannot be viewed as bytes
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def save_checkpoint(path: str | os.PathLike, model, spec: dict, history=None) -> str:
    """Write ``model``'s weights with ``spec`` and ``history`` to ``path`` atomically.

    Returns the state dict's SHA-256.
    """
    import torch

    state = {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}
    digest = state_dict_sha256(state)
    payload = {
        "format": FORMAT,
        "state_dict": state,
        "spec_json": json.dumps(spec, sort_keys=True),
        "history_json": json.dumps(history or []),
        "state_sha256": digest,
    }
    # through a file object: torch names the archive's folder "archive" (given a path it uses the
    # temporary file's random stem, and identical runs would write different bytes)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        torch.save(payload, fh)
    return digest


def read_checkpoint(path: str | os.PathLike) -> dict:
    """Read and verify a calbench checkpoint: returns ``state_dict``, ``spec``, ``history``,
    ``state_sha256``. Raises a one-line ``ValueError`` for anything that is not one."""
    import torch

    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint {path} does not exist; run calbench train-model first")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError) as exc:
        raise ValueError(
            f"cannot read checkpoint {path} ({torch_load_reason(exc)}); it is corrupt or not a calbench "
            "checkpoint: delete it and train again"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not a calbench checkpoint (no format {FORMAT!r}); "
            "train it with calbench train-model"
        )
    state = payload["state_dict"]
    digest = state_dict_sha256(state)
    if digest != payload.get("state_sha256"):
        raise ValueError(
            f"checkpoint {path} fails its content hash ({digest[:12]} != "
            f"{str(payload.get('state_sha256'))[:12]}); it is corrupt: delete it and train again"
        )
    return {
        "state_dict": state,
        "spec": json.loads(payload["spec_json"]),
        "history": json.loads(payload["history_json"]),
        "state_sha256": digest,
    }


def load_state_strict(model, state_dict, what: str = "checkpoint") -> None:
    """Load ``state_dict`` into ``model`` after checking keys and shapes match exactly."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    wrong = [
        f"{k} {tuple(state_dict[k].shape)} vs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state_dict and tuple(state_dict[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing keys (e.g. {missing[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected keys (e.g. {unexpected[0]})")
        if wrong:
            parts.append(f"{len(wrong)} shape mismatches (e.g. {wrong[0]})")
        raise ValueError(
            f"{what} does not fit the architecture {type(model).__name__}: {'; '.join(parts)}; "
            "use the spec the checkpoint was trained with"
        )
    model.load_state_dict(state_dict, strict=True)


def load_model(spec: dict, checkpoint=None, device: str = "cpu"):
    """Build ``spec``'s architecture and load the trained weights from ``checkpoint``."""
    if checkpoint is None:
        raise ValueError("a source: train model needs its checkpoint; pass --checkpoint model.pt")
    ckpt = read_checkpoint(checkpoint)
    saved = ckpt["spec"]
    for key in ("dataset", "arch"):
        if key in saved and key in spec and saved[key] != spec[key]:
            raise ValueError(
                f"checkpoint {checkpoint} was trained with {key} {saved[key]!r} but the spec says "
                f"{spec[key]!r}; pass the matching spec or checkpoint"
            )
    model = build_from_spec(spec)
    load_state_strict(model, ckpt["state_dict"], what=f"checkpoint {checkpoint}")
    return model.to(device).eval()

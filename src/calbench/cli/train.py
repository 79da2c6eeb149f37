"""Verb ``train-model``: train one of the workflow's own models and save checkpoint + history.

``calbench train-model --spec '{"dataset": "fashion_mnist", "source": "train", "arch": "lenet5",
"training": {...}}' --data-root resources/datasets/fashion_mnist --out model.pt
--history history.csv`` (``--spec`` also takes a path to a JSON or YAML file).
"""

from __future__ import annotations


def add_threads_arg(p) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's choice; Snakemake passes {threads})",
    )


def set_threads(n) -> None:
    """``--threads``: :func:`calbench._torch.set_threads` (torch's and BLAS's CPU threads)."""
    from calbench._torch import set_threads as _set_threads

    _set_threads(n)


def register(sub) -> None:
    p = sub.add_parser("train-model", help="train a model of the zoo; checkpoint + history CSV")
    p.add_argument("--spec", required=True, help="model config entry as JSON, or a JSON/YAML file")
    p.add_argument("--data-root", required=True, help="dataset root (from download-dataset)")
    p.add_argument("--out", required=True, help="checkpoint to write, e.g. results/.../model.pt")
    p.add_argument("--history", required=True, help="per-epoch history CSV to write")
    p.add_argument("--device", default="auto", help="auto (GPU if available), cpu or cuda")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    add_threads_arg(p)
    p.set_defaults(func=cmd_train_model)


def cmd_train_model(args) -> int:
    import time

    from calbench.models import parse_spec
    from calbench.models.trained import save_checkpoint
    from calbench.training import train_from_spec, write_history

    spec = parse_spec(args.spec)
    if spec.get("source", "train") != "train":
        raise ValueError(
            f"train-model trains source: train models, this spec has source {spec['source']!r}"
        )
    set_threads(args.threads)
    t0 = time.perf_counter()
    model, history, _ = train_from_spec(
        spec, args.data_root, device=args.device, progress=args.progress
    )
    seconds = time.perf_counter() - t0
    # history first: the checkpoint is the rule's main output, written last
    write_history(args.history, history)
    digest = save_checkpoint(args.out, model, spec, history)
    last = history[-1]
    print(
        f"trained {spec.get('arch')} in {seconds:.1f}s: epoch {last['epoch']} loss "
        f"{last['loss']:.4f} accuracy {last['accuracy']:.4f}; {args.out} sha256 {digest[:12]}"
    )
    return 0

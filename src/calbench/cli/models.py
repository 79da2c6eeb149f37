"""Verbs of the models stage (workflow/rules/models.smk): ``train-model`` (train one of the
workflow's own models, :mod:`calbench.training`; checkpoint + per-epoch history CSV) and
``download-checkpoint`` (fetch and verify one model's published weights).

``calbench train-model --spec '{"dataset": "fashion_mnist", "source": "train", "arch": "lenet5",
"training": {...}}' --data-root resources/datasets/fashion_mnist --out model.pt
--history history.csv`` (``--spec`` also takes a path to a JSON or YAML file).

``calbench download-checkpoint --spec JSON --out resources/checkpoints/<dataset>/<model>/checkpoint.pt``
is the workflow's ``download_checkpoint`` rule: the model's own config entry in, one verified
weights file out (plus the pinned torch.hub code for ``source: torchhub``;
:func:`calbench.models.staging.stage_model`). By hand, ``--config C --model M`` reads the entry
from a configuration and writes the same path. Directories given with ``--mirror`` (or
``mirrors:`` in the config) are searched for local copies before any URL.
"""

from __future__ import annotations

import time
from pathlib import Path

from calbench.cli._args import (
    add_download_options,
    add_repin,
    add_threads_arg,
    download_setup,
    name_arg,
    set_threads,
    writes,
)


def register(sub) -> None:
    p = sub.add_parser("train-model", help="train a model of the zoo; checkpoint + history CSV")
    p.add_argument("--spec", required=True, help="model config entry as JSON, or a JSON/YAML file")
    p.add_argument("--data-root", required=True, help="dataset root (from download-dataset)")
    p.add_argument("--out", required=True, help="checkpoint to write, e.g. results/.../model.pt")
    p.add_argument("--history", required=True, help="per-epoch history CSV to write")
    p.add_argument("--device", default="auto", help="auto (GPU if available), cpu or cuda")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    add_threads_arg(p)
    writes(p, "--out", "--history")
    p.set_defaults(func=cmd_train_model)

    p = sub.add_parser("download-checkpoint", help="fetch and verify one model's published weights")
    add_download_options(p, config_required=False)
    add_repin(p)
    p.add_argument("--model", type=name_arg, default=None, help="model name in --config, e.g. c10_resnet18")
    p.add_argument(
        "--spec", default=None, help="the model's config entry as JSON (the workflow's form)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="weights file to write (default resources/checkpoints/<dataset>/<model>/checkpoint.pt)",
    )
    p.add_argument(
        "--file", default=None, help="a copy you downloaded yourself (the file or its archive)"
    )
    writes(p, "--out")
    p.set_defaults(func=cmd_download_checkpoint)


def _model_from_out(out: str) -> str:
    """``resources/checkpoints/<dataset>/<model>/checkpoint.pt`` -> ``<model>``."""
    return Path(out).parent.name or "model"


def cmd_download_checkpoint(args) -> int:
    from calbench.models import parse_spec  # lazy: cli start-up
    from calbench.models.entries import check_entry, get_entry  # lazy: cli start-up
    from calbench.models.staging import stage_model  # lazy: cli start-up

    if args.spec is not None:
        if args.config or args.model:
            raise ValueError("pass either --spec (with --out) or --config with --model, not both")
        if not args.out:
            raise ValueError("--spec needs --out (the checkpoint file to write)")
        entry = parse_spec(args.spec)
        name = _model_from_out(args.out)
        check_entry(name, entry)
        resources = Path(args.resources or "resources")
        mirrors = list(args.mirror)
    elif args.config and args.model:
        doc, resources, mirrors = download_setup(args)
        name = args.model
        entry = get_entry(doc, name)
    else:
        raise ValueError(
            "say which model: --spec JSON --out FILE (workflow) or --config C --model M (by hand)"
        )
    path = stage_model(
        name,
        entry,
        resources,
        mirrors,
        local_file=args.file,
        timeout=args.timeout,
        out=args.out,
        strict=args.strict_checksums,
        repin=args.repin,
    )
    print(path)
    return 0


def cmd_train_model(args) -> int:
    from calbench.models import parse_spec  # lazy: cli start-up
    from calbench.models.trained import save_checkpoint  # lazy: cli start-up
    from calbench.training import train_from_spec, write_history  # lazy: cli start-up

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

"""Verbs ``cache-logits`` (a model's test-set logits to ``.npz``) and ``split`` (the study's
validation/test halves of a dataset's logits)."""

from __future__ import annotations

from calbench.cli.train import add_threads_arg, set_threads


def register(sub) -> None:
    p = sub.add_parser("cache-logits", help="run a model on its test set; logits + labels to .npz")
    p.add_argument("--spec", required=True, help="model config entry as JSON, or a JSON/YAML file")
    p.add_argument("--checkpoint", default=None, help="the model's weights (train: model.pt)")
    p.add_argument("--data-root", required=True, help="dataset root (from download-dataset)")
    p.add_argument("--out", required=True, help="logits file, results/logits/{dataset}/{model}.npz")
    p.add_argument("--name", default=None, help="model name to record (default: the file's stem)")
    p.add_argument("--batch-size", type=int, default=500, help="inference batch size")
    p.add_argument("--device", default="auto", help="auto (GPU if available), cpu or cuda")
    p.add_argument("--limit", type=int, default=None, help="keep only the first N test samples")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--dataset-spec",
        default=None,
        help="the dataset's config entry as JSON (overrides of its pinned files, e.g. path)",
    )
    p.add_argument(
        "--workers", type=int, default=0, help="DataLoader workers for streamed datasets (ImageNet)"
    )
    add_threads_arg(p)
    p.set_defaults(func=cmd_cache_logits)

    p = sub.add_parser("split", help="the study's validation/test split of a dataset's logits")
    p.add_argument(
        "--logits",
        action="append",
        required=True,
        metavar="NPZ",
        help="logits file of a model of the dataset (repeatable; all must agree)",
    )
    p.add_argument("--out", required=True, help="split file, results/split/{dataset}/split.npz")
    p.add_argument("--seed", type=int, default=0, help="RandomState seed (the study: 0)")
    p.set_defaults(func=cmd_split)


#: Keys of a dataset config entry that belong to the workflow, not to the dataset's files.
WORKFLOW_DATASET_KEYS = frozenset(
    {"name", "display", "root", "mirrors", "default_mirrors", "limit", "split", "n_eval"}
)


def dataset_options(entry: dict) -> dict:
    """The part of a dataset config entry its interface takes as ``options`` (see
    :func:`calbench.data.get_dataset`): everything but the workflow's own keys."""
    return {k: v for k, v in entry.items() if k not in WORKFLOW_DATASET_KEYS}


def cmd_cache_logits(args) -> int:
    from calbench.logits import cache_logits
    from calbench.models import parse_spec

    spec = parse_spec(args.spec)
    options = dataset_options(parse_spec(args.dataset_spec)) if args.dataset_spec else None
    set_threads(args.threads)
    summary = cache_logits(
        spec,
        data_root=args.data_root,
        out=args.out,
        checkpoint=args.checkpoint,
        name=args.name,
        batch_size=args.batch_size,
        device=args.device,
        limit=args.limit,
        progress=not args.no_progress,
        dataset_options=options,
        workers=args.workers,
    )
    print(
        f"{args.out}: {summary['n']} x {summary['classes']} logits, accuracy "
        f"{summary['accuracy']:.4f}, order {summary['order_hash'][:12]}"
    )
    return 0


def cmd_split(args) -> int:
    import numpy as np

    from calbench.logits import load_logits
    from calbench.split import check_logits_files_agree, save_split, study_split

    metas = []
    for path in args.logits:
        d = load_logits(path)
        metas.append(
            {
                "path": path,
                "n": d["labels"].shape[0],
                "labels": d["labels"],
                "order_hash": d["order_hash"],
            }
        )
    n = check_logits_files_agree(metas)
    val, test = study_split(n, seed=args.seed)
    digests = save_split(
        args.out,
        val,
        test,
        order_hash=np.str_(metas[0]["order_hash"]),
        n=np.int64(n),
        seed=np.int64(args.seed),
    )
    print(
        f"{args.out}: {len(val)} validation / {len(test)} test of {n}; "
        f"val {digests['val_sorted_sha256'][:16]} test {digests['test_order_sha256'][:16]}"
    )
    return 0

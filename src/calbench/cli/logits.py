"""Verbs of the logits stage (workflow/rules/logits.smk): ``cache-logits`` (a model's test-set
logits to ``.npz``), ``import-logits`` (a model's logits from a published or user-supplied file,
:mod:`calbench.logits_sources`; ``--split-out`` for sources that carry their own split; by hand
``--config C --model M``) and ``split`` (the study's validation/test halves of a dataset's
logits)."""

from __future__ import annotations

from pathlib import Path

from calbench.cli._args import (
    add_fetch_options,
    add_repin,
    add_threads_arg,
    batch_size_arg,
    load_model_registry,
    name_arg,
    set_threads,
    writes,
)


def register(sub) -> None:
    p = sub.add_parser("cache-logits", help="run a model on its test set; logits + labels to .npz")
    p.add_argument("--spec", required=True, help="model config entry as JSON, or a JSON/YAML file")
    p.add_argument("--checkpoint", default=None, help="the model's weights (train: model.pt)")
    p.add_argument("--data-root", required=True, help="dataset root (from download-dataset)")
    p.add_argument("--out", required=True, help="logits file, results/logits/{dataset}/{model}.npz")
    p.add_argument("--name", default=None, help="model name to record (default: the file's stem)")
    p.add_argument("--batch-size", type=batch_size_arg, default=500, help="inference batch size")
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
    writes(p, "--out")
    p.set_defaults(func=cmd_cache_logits)

    p = sub.add_parser("split", help="the study's validation/test split of a dataset")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--dataset",
        type=name_arg,
        default=None,
        help="the dataset to split, read from --data-root (its labels and sample order)",
    )
    src.add_argument(
        "--logits",
        action="append",
        metavar="NPZ",
        help="or: logits file of a model of the dataset (repeatable; all must agree), for a "
        "dataset of imported files only",
    )
    p.add_argument("--data-root", default=None, help="the dataset's folder (with --dataset)")
    p.add_argument("--limit", type=int, default=None, help="keep only the first N test samples")
    p.add_argument(
        "--dataset-spec",
        default=None,
        help="the dataset's config entry as JSON (overrides of its pinned files, e.g. path)",
    )
    p.add_argument("--out", required=True, help="split file, results/split/{dataset}/split.npz")
    p.add_argument("--seed", type=int, default=0, help="RandomState seed (the study: 0)")
    writes(p, "--out")
    p.set_defaults(func=cmd_split)

    p = sub.add_parser(
        "import-logits",
        help="logits + labels of a source: logits model from its file (download, verify, convert)",
        description="Obtain, verify and convert a source: logits model's file into the logits "
        "file cache-logits writes. Several --spec (each per-model option then one value per "
        "model, in the same order) import a batch of models in turn in one process, each "
        "model's files the bytes of a call of its own; an error in one names it and removes "
        "every file of the batch.",
    )
    several = " (several models in one process: one value per --spec, in its order)"
    p.add_argument(
        "--spec",
        nargs="+",
        default=None,
        help="the model's config entry as JSON or @file (workflow form)" + several,
    )
    p.add_argument(
        "--config", default=None, help="workflow configuration YAML (by hand, with --model)"
    )
    p.add_argument("--model", type=name_arg, default=None, help="model name in --config")
    p.add_argument(
        "--out",
        nargs="+",
        default=None,
        help="logits file (default results/logits/{dataset}/{model}.npz)" + several,
    )
    p.add_argument(
        "--split-out",
        nargs="+",
        default=None,
        help="the file's own split, results/split/{dataset}/{model}.npz (split: file sources)"
        + several,
    )
    p.add_argument(
        "--provenance",
        nargs="+",
        default=None,
        help="JSON record of the files used (optional)" + several,
    )
    p.add_argument(
        "--file", default=None, help="a copy you downloaded (file or folder): no fetch; one model"
    )
    p.add_argument("--resources", default="resources", help="resources folder (downloads, lock)")
    add_fetch_options(p)
    add_repin(p)
    writes(p, "--out", "--split-out", "--provenance")
    p.set_defaults(func=cmd_import_logits)


def cmd_cache_logits(args) -> int:
    from calbench.data.prepare import dataset_options  # lazy: cli start-up
    from calbench.logits import cache_logits  # lazy: cli start-up
    from calbench.models import parse_spec  # lazy: cli start-up

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
    from calbench.split import split_dataset, split_logits_files  # lazy: cli start-up

    if args.logits:
        if args.data_root or args.limit is not None or args.dataset_spec:
            raise ValueError(
                "--data-root, --limit and --dataset-spec go with --dataset, not --logits"
            )
        s = split_logits_files(args.logits, args.out, seed=args.seed)
    else:
        if not args.data_root:
            raise ValueError("--dataset needs --data-root (the dataset's folder)")
        options = None
        if args.dataset_spec:
            from calbench.data.prepare import dataset_options  # lazy: cli start-up
            from calbench.models import parse_spec  # lazy: cli start-up

            options = dataset_options(parse_spec(args.dataset_spec))
        s = split_dataset(
            args.dataset,
            args.data_root,
            args.out,
            options=options,
            limit=args.limit,
            seed=args.seed,
        )
    print(
        f"{args.out}: {s['val']} validation / {s['test']} test of {s['n']}; "
        f"val {s['val_sorted_sha256'][:16]} test {s['test_order_sha256'][:16]}"
    )
    return 0


def cmd_import_logits(args) -> int:
    """One model (``--spec`` with ``--out``, or by hand ``--config`` with ``--model``), or a batch
    (several ``--spec``): each model imported in turn, its lines printed as it finishes. An error
    in a model of a batch names it (one line) and removes the files of the batch's earlier
    models too (the workflow deletes a failed job's outputs anyway, and the batch is rerun as a
    whole): nothing of a failed batch is kept. A model's own files are all or none
    (:func:`calbench.logits_sources.import_logits`)."""
    from calbench.logits_sources import import_logits  # lazy: cli start-up

    models, mirrors = _import_batch(args)
    written: list = []
    try:
        for i, m in enumerate(models):
            try:
                s = import_logits(
                    m["name"],
                    m["entry"],
                    m["out"],
                    split_out=m["split_out"],
                    provenance_out=m["provenance"],
                    resources=args.resources,
                    mirrors=mirrors,
                    local_file=args.file,
                    timeout=args.timeout,
                    strict=args.strict_checksums,
                    repin=args.repin,
                )
            except (ValueError, FileNotFoundError, KeyError) as exc:
                if len(models) == 1:
                    raise
                msg = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
                msg = msg.removeprefix(f"model {m['name']}: ")
                raise ValueError(
                    f"model {m['name']} ({i + 1} of {len(models)}, --out {m['out']}): {msg}; "
                    "nothing of this batch was written"
                ) from exc
            written += [p for p in (m["out"], m["split_out"], m["provenance"]) if p is not None]
            _print_import(s, m["out"])
    except BaseException:
        for path in written:
            Path(path).unlink(missing_ok=True)
        raise
    return 0


#: import-logits' per-model options besides --spec: ``(flag, destination)``; each takes one
#: value per --spec (--out always, the others when given)
_IMPORT_PER_MODEL = (("--out", "out"), ("--split-out", "split_out"), ("--provenance", "provenance"))


def _import_batch(args) -> tuple[list[dict], list]:
    """The models of one import-logits call, each ``{name, entry, out, split_out, provenance}``
    (the i-th value of each per-model option for the i-th ``--spec``), and the mirrors."""
    from calbench.logits_sources import is_presplit  # lazy: cli start-up
    from calbench.models import parse_spec  # lazy: cli start-up

    mirrors = list(args.mirror)
    if args.spec is not None:
        if args.config or args.model:
            raise ValueError("pass either --spec (with --out) or --config with --model, not both")
        if not args.out:
            raise ValueError("--spec needs --out (the logits file to write)")
        n = len(args.spec)
        for flag, dest in _IMPORT_PER_MODEL:
            values = getattr(args, dest)
            if values is not None and len(values) != n:
                raise ValueError(
                    f"{flag} has {len(values)} values for {n} --spec; give one value per "
                    "--spec, in the same order"
                )
        if n > 1 and args.file is not None:
            raise ValueError(
                "--file names one model's copy; give it with one --spec (or set each model's "
                "logits.local_path)"
            )
        models = [
            {
                "name": Path(out).stem,
                "entry": parse_spec(spec),
                "out": out,
                "split_out": args.split_out[i] if args.split_out else None,
                "provenance": args.provenance[i] if args.provenance else None,
            }
            for i, (spec, out) in enumerate(zip(args.spec, args.out, strict=True))
        ]
    elif args.config and args.model:
        from calbench.models.pretrained import get_entry  # lazy: cli start-up

        for flag, dest in _IMPORT_PER_MODEL:
            if len(getattr(args, dest) or ()) > 1:
                raise ValueError(f"{flag} takes one value with --config and --model (one model)")
        doc = load_model_registry(args.config)
        mirrors += list(doc.get("mirrors") or [])
        args.strict_checksums = args.strict_checksums or bool(doc.get("strict_checksums"))
        models = [
            {
                "name": args.model,
                "entry": get_entry(doc, args.model),
                "out": args.out[0] if args.out else None,
                "split_out": args.split_out[0] if args.split_out else None,
                "provenance": args.provenance[0] if args.provenance else None,
            }
        ]
    else:
        raise ValueError(
            "say which model: --spec JSON --out FILE (workflow) or --config C --model M (by hand)"
        )
    for m in models:
        entry, name = m["entry"], m["name"]
        if not isinstance(entry.get("dataset"), str):
            raise ValueError(f"model {name}: the entry has no dataset")
        if m["out"] is None:
            m["out"] = f"results/logits/{entry['dataset']}/{name}.npz"
        if m["split_out"] is None and args.spec is None and is_presplit(entry):
            m["split_out"] = f"results/split/{entry['dataset']}/{name}.npz"
    return models, mirrors


def _print_import(s: dict, out) -> None:
    """The lines of one imported model: each file used, then the logits written."""
    for f in s["files"]:
        print(
            f"{f['path']}: sha256 {f['sha256'][:16]} {f['size']} bytes, {f['status']} ({f['origin']})"
        )
    extra = f", own split {s['split']['val']} / {s['split']['test']}" if "split" in s else ""
    print(
        f"{out}: {s['n']} x {s['classes']} logits ({s['format']}), accuracy {s['accuracy']:.4f}{extra}"
    )

"""Verb ``import-logits``: a model's logits from a published or user-supplied file.

``calbench import-logits --spec JSON --out results/logits/{dataset}/{model}.npz`` is the
workflow's ``import_logits`` rule (``--split-out results/split/{dataset}/{model}.npz`` for
sources that carry their own split). By hand: ``--config C --model M`` reads the entry from a
configuration and writes the same paths. See :mod:`calbench.logits_sources`.
"""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "import-logits",
        help="logits + labels of a source: logits model from its file (download, verify, convert)",
    )
    p.add_argument("--spec", default=None, help="the model's config entry as JSON (workflow form)")
    p.add_argument("--config", default=None, help="workflow configuration YAML (by hand, with --model)")
    p.add_argument("--model", default=None, help="model name in --config")
    p.add_argument(
        "--out", default=None, help="logits file (default results/logits/{dataset}/{model}.npz)"
    )
    p.add_argument(
        "--split-out",
        default=None,
        help="the file's own split, results/split/{dataset}/{model}.npz (split: file sources)",
    )
    p.add_argument("--provenance", default=None, help="JSON record of the files used (optional)")
    p.add_argument("--file", default=None, help="a copy you downloaded (file or folder): no fetch")
    p.add_argument("--resources", default="resources", help="resources folder (downloads, lock)")
    p.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="DIR",
        help="directory holding local copies (searched by folder and file name; repeatable)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per download attempt")
    p.add_argument(
        "--strict-checksums",
        action="store_true",
        help="refuse downloadable files without a published sha256 (default: pin them on first "
        "use in <resources>/checksums.lock; config key strict_checksums)",
    )
    p.set_defaults(func=cmd_import_logits)


def cmd_import_logits(args) -> int:
    from calbench.logits_sources import import_logits, is_presplit
    from calbench.models import parse_spec

    mirrors = list(args.mirror)
    if args.spec is not None:
        if args.config or args.model:
            raise ValueError("pass either --spec (with --out) or --config with --model, not both")
        if not args.out:
            raise ValueError("--spec needs --out (the logits file to write)")
        entry = parse_spec(args.spec)
        name = Path(args.out).stem
    elif args.config and args.model:
        from calbench.models.pretrained import get_entry, load_registry

        doc = load_registry(args.config)
        name = args.model
        entry = get_entry(doc, name)
        mirrors += list(doc.get("mirrors") or [])
        args.strict_checksums = args.strict_checksums or bool(doc.get("strict_checksums"))
    else:
        raise ValueError(
            "say which model: --spec JSON --out FILE (workflow) or --config C --model M (by hand)"
        )
    if not isinstance(entry.get("dataset"), str):
        raise ValueError(f"model {name}: the entry has no dataset")
    out = args.out or f"results/logits/{entry['dataset']}/{name}.npz"
    split_out = args.split_out
    if split_out is None and args.spec is None and is_presplit(entry):
        split_out = f"results/split/{entry['dataset']}/{name}.npz"
    s = import_logits(
        name,
        entry,
        out,
        split_out=split_out,
        provenance_out=args.provenance,
        resources=args.resources,
        mirrors=mirrors,
        local_file=args.file,
        timeout=args.timeout,
        strict=args.strict_checksums,
    )
    for f in s["files"]:
        print(f"{f['path']}: sha256 {f['sha256'][:16]} {f['size']} bytes, {f['status']} ({f['origin']})")
    extra = f", own split {s['split']['val']} / {s['split']['test']}" if "split" in s else ""
    print(
        f"{out}: {s['n']} x {s['classes']} logits ({s['format']}), accuracy {s['accuracy']:.4f}{extra}"
    )
    return 0

"""Verb ``download-dataset``: place a dataset's verified files where torchvision loads them.

``calbench download-dataset --dataset fashion_mnist --root resources/datasets/fashion_mnist
--manifest resources/datasets/fashion_mnist/manifest.json`` tries each ``--mirror DIR`` (then the
dataset's default mirrors, such as Debian's ``/usr/share/datasets/fashion-mnist``) before the
upstream URLs, checks every file against its pinned hash and the splits' sizes and label counts,
and writes a JSON manifest with the hashes.
"""

from __future__ import annotations

from calbench.cli._args import writes


def register(sub) -> None:
    p = sub.add_parser(
        "download-dataset",
        help="fetch and verify a dataset (mirror directories first) for torchvision",
    )
    p.add_argument("--dataset", required=True, help="dataset name, e.g. fashion_mnist")
    p.add_argument(
        "--root", required=True, help="dataset root, e.g. resources/datasets/fashion_mnist"
    )
    p.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="DIR",
        help="directory holding the dataset's files (tried before the defaults; repeatable)",
    )
    p.add_argument(
        "--no-default-mirrors",
        action="store_true",
        help="do not search the dataset's default mirror directories",
    )
    p.add_argument(
        "--no-download", action="store_true", help="use mirror directories only, never the network"
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per download attempt")
    p.add_argument(
        "--manifest", default=None, help="manifest JSON to write (default: ROOT/manifest.json)"
    )
    p.add_argument(
        "--spec",
        default=None,
        help="the dataset's config entry as JSON (e.g. datasets.imagenet.path, pinned-file overrides)",
    )
    writes(p, "--manifest")
    p.set_defaults(func=cmd_download_dataset)


def cmd_download_dataset(args) -> int:
    from calbench.data.prepare import prepare_dataset  # lazy: cli start-up
    from calbench.models import parse_spec  # lazy: cli start-up

    entry = parse_spec(args.spec) if args.spec else {}
    manifest = prepare_dataset(
        args.dataset,
        args.root,
        entry=entry,
        mirrors=args.mirror,
        default_mirrors=not args.no_default_mirrors,
        download=not args.no_download,
        timeout=args.timeout,
        manifest=args.manifest,
    )
    sizes = ", ".join(f"{k} {v['n']}" for k, v in manifest["splits"].items())
    print(
        f"{args.dataset}: verified ({sizes}) under {args.root}; manifest {manifest['manifest_path']}"
    )
    return 0

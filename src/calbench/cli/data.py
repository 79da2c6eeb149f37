"""Verb ``download-dataset``: place a dataset's verified files where torchvision loads them.

``calbench download-dataset --dataset fashion_mnist --root resources/datasets/fashion_mnist
--manifest resources/datasets/fashion_mnist/manifest.json`` tries each ``--mirror DIR`` (then the
dataset's default mirrors, such as Debian's ``/usr/share/datasets/fashion-mnist``) before the
upstream URLs, checks every file against its pinned hash and the splits' sizes and label counts,
and writes a JSON manifest with the hashes.
"""

from __future__ import annotations

import json


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
    p.set_defaults(func=cmd_download_dataset)


def cmd_download_dataset(args) -> int:
    from pathlib import Path

    from calbench.data import get_dataset
    from calbench.io import atomic_write_text

    ds = get_dataset(args.dataset)
    mirrors = list(args.mirror)
    if not args.no_default_mirrors:
        mirrors += [m for m in ds.DEFAULT_MIRRORS if m not in mirrors]
    urls = () if args.no_download else ds.URLS
    manifest = ds.prepare(args.root, mirrors=mirrors, urls=urls, timeout=args.timeout)
    manifest["mirrors"] = [str(m) for m in mirrors]
    path = Path(args.manifest) if args.manifest else Path(args.root) / "manifest.json"
    atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    sizes = ", ".join(f"{k} {v['n']}" for k, v in manifest["splits"].items())
    print(f"{args.dataset}: verified ({sizes}) under {args.root}; manifest {path}")
    return 0

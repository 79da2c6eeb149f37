"""Where published logits files are downloaded from, and verified downloads.

* :class:`YandexDisk`: a public Yandex Disk folder through the public REST API (no OAuth):
  ``GET {api}/v1/disk/public/resources?public_key=K&path=P&limit=L&offset=O`` lists a folder
  (children in ``_embedded.items``, each with ``name``, ``path``, ``type``, ``size`` and, for
  files, ``md5`` / ``sha256``), paginated by ``limit``/``offset``;
  ``GET {api}/v1/disk/public/resources/download?public_key=K&path=P`` returns ``{"href": ...}``,
  a short-lived direct link that is then fetched.
* :func:`lfs_candidates`: a Git LFS object of a GitHub repository: the LFS media URL
  (``{media}/{repo}/{ref}/{path}``), then the LFS batch API (``POST {api}/{repo}.git/info/lfs/
  objects/batch`` with ``{"operation": "download", "objects": [{"oid", "size"}]}`` ->
  ``objects[0].actions.download.href`` and its headers).
* :class:`HuggingFace`: a Hugging Face Hub dataset (or model) repository through the Hub's
  public API (huggingface/huggingface_hub ``src/huggingface_hub/hf_api.py``, ``list_repo_tree``
  and ``RepoFile``; ``constants.py``, the resolve URL): ``GET {hub}/api/datasets/{repo}/tree/
  {revision}?recursive=true`` lists the files (``type``, ``path``, ``size``, ``oid``, and for LFS
  files ``lfs`` = ``{"oid": sha256, "size", "pointerSize"}``), paginated by a ``Link: <url>;
  rel="next"`` header; ``GET {hub}/datasets/{repo}/resolve/{revision}/{path}`` downloads a file
  (a redirect to the content server, followed).
* :func:`find_in_tree` resolves a study file by folder name and file name in any listed tree (the
  Yandex folder or a local directory), accepting the Kaggle layout (``cifar10_v1/x.pt``) and the
  layout of the study's zips (``logits/cifar10/v1/x.pt``, ``focal/CIFAR10/x.pt``).
* :func:`fetch_verified` streams candidates in order into a temporary file beside the
  destination, checks size and SHA-256 while reading, and moves it into place only when it
  matches; a failed candidate leaves nothing behind.

Base URLs are parameters (a test points them at a server on 127.0.0.1). Every request has a
timeout and is retried with backoff on transient failures
(:func:`calbench.data.download.with_retries`); a failure names the host and the file.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from calbench.data.download import with_retries
from calbench.io import atomic_path, hasher

YANDEX_API = "https://cloud-api.yandex.net"
LFS_MEDIA = "https://media.githubusercontent.com/media"
LFS_API = "https://github.com"
HF_ENDPOINT = "https://huggingface.co"
_CHUNK = 1 << 20
_UA = {"User-Agent": "calbench"}


class DownloadError(FileNotFoundError):
    """A service did not answer as expected, or no candidate gave a file of the expected size
    and checksum (one line; the CLI prints it as the error)."""


def _request(url: str, *, data: bytes | None = None, headers=None, timeout: float = 60.0):
    req = urllib.request.Request(url, data=data, headers={**_UA, **(headers or {})})
    return urllib.request.urlopen(req, timeout=timeout)


def get_json(url: str, *, data=None, headers=None, timeout: float = 60.0):
    """The JSON answer of ``url``; any failure is a one-line :class:`DownloadError`."""

    def once() -> bytes:
        with _request(url, data=data, headers=headers, timeout=timeout) as resp:
            return resp.read()

    try:
        body = with_retries(once, url.split("?")[0])
    except OSError as exc:  # NetworkError: host and file named, retries spent
        raise DownloadError(
            f"{exc} (address {url.split('?')[0]}; check it, the public key or your network)"
        ) from None
    try:
        return json.loads(body)
    except ValueError:
        raise DownloadError(
            f"{url.split('?')[0]} did not answer with JSON ({body[:60]!r})"
        ) from None


# --------------------------------------------------------------------------- verified fetch


@dataclass
class Candidate:
    """One place to get a file from; ``resolve()`` gives ``(url, headers)`` (it may call an API)."""

    label: str
    resolve: Callable[[], tuple[str, dict]]


def _stream(
    url: str, headers: dict, tmp: Path, size: int | None, timeout: float
) -> tuple[str, int]:
    """Download ``url`` to ``tmp`` (retried on transient failures); ``(sha256, bytes)``."""
    return with_retries(lambda: _stream_once(url, headers, tmp, size, timeout), url.split("?")[0])


def _stream_once(
    url: str, headers: dict, tmp: Path, size: int | None, timeout: float
) -> tuple[str, int]:
    h, n = hasher(), 0
    with _request(url, headers=headers, timeout=timeout) as resp, open(tmp, "wb") as out:
        while block := resp.read(_CHUNK):
            n += len(block)
            if size is not None and n > size:
                raise DownloadError(f"more than the expected {size} bytes")
            h.update(block)
            out.write(block)
    return h.hexdigest(), n


def fetch_verified(
    dest: str | os.PathLike,
    candidates: Iterable[Candidate],
    *,
    sha256: str | None = None,
    size: int | None = None,
    timeout: float = 60.0,
) -> dict:
    """Download the first candidate whose size and SHA-256 match into ``dest``.

    Returns ``{"sha256", "size", "origin"}``. Without ``sha256`` / ``size`` any answer is taken
    (callers pin it afterwards). Raises :class:`DownloadError` (one line, every attempt named)
    when no candidate matches; ``dest`` is then untouched.
    """
    dest = Path(dest)
    errors = []
    for cand in candidates:
        try:
            url, headers = cand.resolve()
            with atomic_path(dest) as tmp:
                digest, n = _stream(url, headers, tmp, size, timeout)
                if size is not None and n != size:
                    raise DownloadError(f"{n} bytes, expected {size}")
                if sha256 and digest != sha256:
                    raise DownloadError(
                        f"sha256 {digest[:12]} does not match the pinned {sha256[:12]}"
                    )
            return {"sha256": digest, "size": n, "origin": cand.label}
        except (OSError, ValueError) as exc:  # HTTP/URL errors, timeouts, mismatches
            errors.append(
                f"{cand.label}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            )
    raise DownloadError(
        f"could not obtain a verified {dest.name} ({'; '.join(errors) or 'no source configured'}); "
        "download it by hand and pass it with local_path or a mirrors: directory"
    )


def url_candidates(urls: Iterable[str]) -> list[Candidate]:
    return [Candidate(u, lambda u=u: (u, {})) for u in urls]


# --------------------------------------------------------------------------- Git LFS


def lfs_candidates(lfs: dict, sha256: str, size: int) -> list[Candidate]:
    """The LFS media URL, then the LFS batch API, for object ``sha256`` of ``size`` bytes."""
    repo, ref, path = lfs["repo"], lfs["ref"], lfs["path"]
    media = lfs.get("media_base") or LFS_MEDIA
    api = lfs.get("api_base") or LFS_API
    media_url = f"{media.rstrip('/')}/{repo}/{ref}/{urllib.parse.quote(path)}"
    batch_url = f"{api.rstrip('/')}/{repo}.git/info/lfs/objects/batch"

    def batch(timeout=60.0):
        body = json.dumps(
            {
                "operation": "download",
                "transfers": ["basic"],
                "objects": [{"oid": sha256, "size": int(size)}],
            }
        ).encode()
        hdr = {
            "Accept": "application/vnd.git-lfs+json",
            "Content-Type": "application/vnd.git-lfs+json",
        }
        answer = get_json(batch_url, data=body, headers=hdr, timeout=timeout)
        try:
            obj = answer["objects"][0]
        except (KeyError, IndexError, TypeError):
            raise OSError("LFS batch answer has no objects") from None
        if obj.get("error"):
            raise OSError(f"LFS batch: {obj['error'].get('message', obj['error'])}")
        try:
            action = obj["actions"]["download"]
        except (KeyError, TypeError):
            raise OSError("LFS batch answer has no download action") from None
        return action["href"], dict(action.get("header") or {})

    return [
        Candidate(media_url, lambda: (media_url, {})),
        Candidate(f"LFS batch API {batch_url}", batch),
    ]


# --------------------------------------------------------------------------- Yandex Disk


@dataclass
class Entry:
    """A file in a listed tree: POSIX ``path`` from the tree's root, ``size``, optional hashes."""

    path: str
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None


class YandexDisk:
    """A public Yandex Disk folder (``public_key``: its public URL or key)."""

    def __init__(self, public_key: str, api_base: str | None = None, *, timeout=60.0, limit=100):
        self.public_key = public_key
        self.api = (api_base or YANDEX_API).rstrip("/")
        self.timeout, self.limit = timeout, limit
        self._tree: list[Entry] | None = None

    def _url(self, endpoint: str, **params) -> str:
        q = urllib.parse.urlencode({"public_key": self.public_key, **params})
        return f"{self.api}/v1/disk/public/resources{endpoint}?{q}"

    def list_dir(self, path: str = "/") -> list[dict]:
        """Every child of folder ``path`` (all pages)."""
        items, offset = [], 0
        while True:
            doc = get_json(
                self._url("", path=path, limit=self.limit, offset=offset), timeout=self.timeout
            )
            emb = doc.get("_embedded") or {}
            page = emb.get("items") or []
            items += page
            offset += len(page)
            total = emb.get("total")
            if not page or (offset >= total if total is not None else len(page) < self.limit):
                return items

    def tree(self, max_depth: int = 5) -> list[Entry]:
        """Every file of the folder, breadth first, at most ``max_depth`` folders deep."""
        if self._tree is not None:
            return self._tree
        files, todo = [], [("/", 0)]
        while todo:
            path, depth = todo.pop(0)
            for it in self.list_dir(path):
                p = _safe_remote_path(it.get("path", ""), path, it.get("name", ""))
                if it.get("type") == "dir":
                    if depth + 1 < max_depth:
                        todo.append((p, depth + 1))
                elif it.get("type") == "file":
                    files.append(
                        Entry(p, it.get("size"), it.get("sha256") or None, it.get("md5") or None)
                    )
        self._tree = files
        return files

    def candidate(self, path: str) -> Candidate:
        """The file at ``path``: a fresh download link from the API, then the link itself."""

        def resolve():
            doc = get_json(self._url("/download", path=path), timeout=self.timeout)
            if not isinstance(doc, dict) or not doc.get("href"):
                raise OSError(f"Yandex Disk gave no download link for {path}")
            return doc["href"], {}

        return Candidate(f"Yandex Disk {path}", resolve)


def _safe_remote_path(path: str, parent: str, name: str) -> str:
    """A listing's ``path`` as a clean POSIX path from the public root (``disk:`` prefixes and
    ``..`` refused)."""
    p = path.split(":", 1)[1] if ":" in path.split("/", 1)[0] else path
    if not p:
        p = f"{parent.rstrip('/')}/{name}"
    parts = PurePosixPath("/" + p.lstrip("/")).parts[1:]
    if any(part in ("..", ".", "") for part in parts):
        raise OSError(f"Yandex Disk listed an unsafe path {path!r}")
    return "/" + "/".join(parts)


def local_tree(root: str | os.PathLike, max_depth: int = 5) -> list[Entry]:
    """Every file under a local directory (``path`` relative to it), at most ``max_depth`` deep."""
    root = Path(root).expanduser()
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if len(rel.parts) >= max_depth:
            dirnames[:] = []
        dirnames.sort()
        for f in sorted(filenames):
            out.append(Entry("/" + (rel / f).as_posix().lstrip("./"), None))
    return out


def _folder_matches(dir_parts: tuple[str, ...], folder: str) -> bool:
    """Does a directory path end in ``folder``, its components joined by ``_`` (case-blind)?
    ``cifar10_v1`` matches ``cifar10_v1`` and ``logits/cifar10/v1``; ``focal_CIFAR10`` matches
    ``focal/CIFAR10``."""
    key = folder.lower()
    low = [p.lower() for p in dir_parts]
    return any("_".join(low[i:]) == key for i in range(len(low)))


def find_in_tree(
    tree: list[Entry], folder: str, name: str, where: str
) -> tuple[Entry, Entry | None]:
    """``(file, targets.txt or None)`` for ``folder/name`` in ``tree`` (see module docstring).

    ``targets.txt`` is looked for in the file's folder, then its parent (the zips' layout keeps
    ``cifar10/targets.txt`` above ``cifar10/v1/``). Several different matches are an error.
    """
    by_path = {e.path: e for e in tree}
    hits = [
        e
        for e in tree
        if PurePosixPath(e.path).name == name
        and _folder_matches(PurePosixPath(e.path).parent.parts[1:], folder)
    ]
    if not hits:
        raise FileNotFoundError(
            f"{where} has no {name} in a folder named {folder} (nor {folder.replace('_', '/')}); "
            "check logits.folder and logits.file"
        )
    if len(hits) > 1:
        digests = {e.sha256 for e in hits}
        if len(digests) > 1 or None in digests:
            raise ValueError(
                f"{where} holds {name} in {len(hits)} folders matching {folder} "
                f"({', '.join(e.path for e in hits[:3])}); name the folder more precisely"
            )
    hit = sorted(hits, key=lambda e: len(e.path))[0]
    parent = PurePosixPath(hit.path).parent
    targets = by_path.get(str(parent / "targets.txt")) or by_path.get(
        str(parent.parent / "targets.txt")
    )
    return hit, targets


# --------------------------------------------------------------------------- Hugging Face Hub


def _next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (RFC 8288), or None."""
    for part in (header or "").split(","):
        url, _, params = part.partition(";")
        if 'rel="next"' in params.replace(" ", "") and url.strip().startswith("<"):
            return url.strip()[1:-1]
    return None


class HuggingFace:
    """Repository ``repo`` (``owner/name``) of the Hugging Face Hub at ``revision`` (a commit
    pins it; a branch follows it, and the lock file then refuses a changed file)."""

    def __init__(
        self,
        repo: str,
        revision: str = "main",
        endpoint: str | None = None,
        *,
        repo_type: str = "dataset",
        timeout: float = 60.0,
    ):
        self.repo, self.revision = repo, revision
        self.endpoint = (endpoint or HF_ENDPOINT).rstrip("/")
        self.prefix = {"dataset": "datasets/", "model": ""}[repo_type]
        self.kind = repo_type + "s"
        self.timeout = timeout
        self._tree: list[Entry] | None = None

    def _page(self, url: str) -> tuple[list, str | None]:
        def once():
            with _request(url, headers={"Accept": "application/json"}, timeout=self.timeout) as r:
                return r.read(), r.headers.get("Link")

        try:
            body, link = with_retries(once, url.split("?")[0])
        except OSError as exc:
            raise DownloadError(
                f"{exc} (Hugging Face repository {self.repo} at {self.revision}; check the "
                "repository, the revision or your network)"
            ) from None
        try:
            doc = json.loads(body)
        except ValueError:
            raise DownloadError(f"{url.split('?')[0]} did not answer with JSON") from None
        if not isinstance(doc, list):
            raise DownloadError(f"{url.split('?')[0]} did not answer with a file list")
        return doc, _next_link(link)

    def tree(self) -> list[Entry]:
        """Every file of the repository (all pages); ``sha256``/``size`` from the LFS pointer."""
        if self._tree is not None:
            return self._tree
        rev = urllib.parse.quote(self.revision, safe="")
        url = f"{self.endpoint}/api/{self.kind}/{self.repo}/tree/{rev}?recursive=true"
        files = []
        while url:
            page, url = self._page(url)
            for it in page:
                if not isinstance(it, dict) or it.get("type") != "file":
                    continue
                p = _safe_remote_path(str(it.get("path", "")), "/", "")
                lfs = it.get("lfs") if isinstance(it.get("lfs"), dict) else {}
                size = lfs.get("size", it.get("size"))
                files.append(Entry(p, size, lfs.get("oid") or None))
        self._tree = files
        return files

    def find(self, name: str, path: str | None = None) -> Entry:
        """The file at ``path`` in the repository, else the one file called ``name``."""
        tree = self.tree()
        where = f"Hugging Face repository {self.repo} at {self.revision}"
        if path:
            hits = [e for e in tree if e.path == "/" + path.lstrip("/")]
        else:
            hits = [e for e in tree if PurePosixPath(e.path).name == name]
        if not hits:
            raise FileNotFoundError(
                f"{where} has no {path or name} ({len(tree)} files listed); check logits.file "
                "and huggingface.path"
            )
        if len(hits) > 1:
            raise ValueError(
                f"{where} holds {name} at {', '.join(e.path for e in hits[:3])}; set "
                "huggingface.path to the one to use"
            )
        return hits[0]

    def candidate(self, path: str) -> Candidate:
        rev = urllib.parse.quote(self.revision, safe="")
        url = (
            f"{self.endpoint}/{self.prefix}{self.repo}/resolve/{rev}/"
            f"{urllib.parse.quote(path.lstrip('/'))}"
        )
        return Candidate(url, lambda: (url, {}))

"""A local HTTP server on 127.0.0.1 imitating the services published logits come from.

* Yandex Disk public REST API: ``GET /v1/disk/public/resources?public_key&path&limit&offset``
  (a Resource with ``_embedded.items``/``total``/``limit``/``offset``; files carry ``size``,
  ``md5``, ``sha256``), ``GET /v1/disk/public/resources/download?public_key&path`` ->
  ``{"href", "method", "templated"}``, then ``GET`` of the href (``/yadl/...``).
* GitHub LFS: ``GET /media/<owner>/<repo>/<ref>/<path>`` (the media URL) and
  ``POST /<owner>/<repo>.git/info/lfs/objects/batch`` -> ``objects[].actions.download.href`` with
  a header the object URL requires.
* Hugging Face Hub (huggingface_hub ``hf_api.list_repo_tree`` / ``RepoFile``, the resolve URL):
  ``GET /api/datasets/<owner>/<repo>/tree/<revision>?recursive=true`` -> a JSON list of
  ``{"type", "oid", "size", "path", "lfs": {"oid", "size", "pointerSize"}}`` (directories too),
  paginated by ``Link: <...&cursor=N>; rel="next"``; ``GET /datasets/<owner>/<repo>/resolve/
  <revision>/<path>`` -> ``302`` to ``/hfcdn/<sha256>`` (the content server).
* A plain mirror: ``GET /mirror/<name>``.

Every request is logged (method, path) so tests can check what was (not) fetched.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self):
        self.public_key = "https://disk.yandex.ru/d/TESTKEY"
        self.disk: dict[str, bytes] = {}  # "/folder/file" -> content
        self.list_sha256 = True  # put sha256 (and md5) in the listing
        self.listed_sha256_override: dict[str, str] = {}
        self.lfs: dict[str, bytes] = {}  # oid -> content
        self.media: dict[str, bytes] = {}  # "owner/repo/ref/path" -> content served there
        self.media_status = 200
        self.batch_enabled = True
        self.mirror: dict[str, bytes] = {}
        self.hf_repo = "probkit/CalArena"
        self.hf_revision = "0123abc"
        self.hf: dict[str, bytes] = {}  # path in the repository -> content
        self.hf_lfs_suffixes = (".h5", ".jsonl", ".json")  # stored with LFS (sha256 listed)
        self.hf_page = 2  # entries per page of the tree listing
        self.hf_delay = 0.0  # seconds the content server waits before answering
        self.log: list[tuple[str, str]] = []


def _dirs_and_files(disk: dict[str, bytes], folder: str):
    folder = folder.rstrip("/") or ""
    prefix = folder + "/"
    children = {}
    for path, data in disk.items():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        head = rest.split("/", 1)[0]
        if "/" in rest:
            children.setdefault(head, ("dir", None))
        else:
            children[head] = ("file", data)
    return children


def make_handler(state: State):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _send(self, code, body: bytes, ctype="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code, obj):
            self._send(code, json.dumps(obj).encode())

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            state.log.append(("GET", u.path))
            if u.path == "/v1/disk/public/resources":
                return self._listing(q)
            if u.path == "/v1/disk/public/resources/download":
                if q.get("public_key") != state.public_key or q.get("path") not in state.disk:
                    return self._json(404, {"error": "DiskNotFoundError"})
                host = f"http://{self.headers['Host']}"
                href = host + "/yadl" + urllib.parse.quote(q["path"]) + "?token=short-lived"
                return self._json(200, {"href": href, "method": "GET", "templated": False})
            if u.path.startswith("/yadl/"):
                path = urllib.parse.unquote(u.path[len("/yadl") :])
                if path in state.disk:
                    return self._send(200, state.disk[path], "application/octet-stream")
                return self._send(404, b"")
            if u.path.startswith("/media/"):
                key = urllib.parse.unquote(u.path[len("/media/") :])
                if state.media_status != 200 or key not in state.media:
                    return self._send(state.media_status if state.media_status != 200 else 404, b"")
                return self._send(200, state.media[key], "application/octet-stream")
            if u.path.startswith("/lfsobj/"):
                if self.headers.get("Authorization") != "RemoteAuth token":
                    return self._send(401, b"")
                oid = u.path[len("/lfsobj/") :]
                if oid in state.lfs:
                    return self._send(200, state.lfs[oid], "application/octet-stream")
                return self._send(404, b"")
            if u.path.startswith(("/api/datasets/", "/datasets/", "/hfcdn/")):
                return self._hub(u, q)
            if u.path.startswith("/mirror/"):
                name = u.path[len("/mirror/") :]
                if name in state.mirror:
                    return self._send(200, state.mirror[name], "application/octet-stream")
                return self._send(404, b"")
            self._send(404, b"")

        def do_POST(self):
            u = urllib.parse.urlsplit(self.path)
            state.log.append(("POST", u.path))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not u.path.endswith(".git/info/lfs/objects/batch") or not state.batch_enabled:
                return self._json(404, {"message": "Not found"})
            if self.headers.get("Accept") != "application/vnd.git-lfs+json":
                return self._json(406, {"message": "bad accept"})
            host = f"http://{self.headers['Host']}"
            out = []
            for obj in body["objects"]:
                if obj["oid"] in state.lfs:
                    out.append(
                        {
                            "oid": obj["oid"],
                            "size": obj["size"],
                            "actions": {
                                "download": {
                                    "href": f"{host}/lfsobj/{obj['oid']}",
                                    "header": {"Authorization": "RemoteAuth token"},
                                    "expires_in": 3600,
                                }
                            },
                        }
                    )
                else:
                    out.append({"oid": obj["oid"], "error": {"code": 404, "message": "Object does not exist"}})
            self._json(200, {"transfer": "basic", "objects": out})

        def _hub(self, u, q):
            repo, rev = state.hf_repo, state.hf_revision
            tree = f"/api/datasets/{repo}/tree/{rev}"
            resolve = f"/datasets/{repo}/resolve/{rev}/"
            if u.path == tree:
                entries, dirs = [], set()
                for path in sorted(state.hf):
                    parts = path.split("/")
                    for i in range(1, len(parts)):
                        dirs.add("/".join(parts[:i]))
                for d in sorted(dirs):
                    entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": d})
                for path, data in sorted(state.hf.items()):
                    e = {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": path}
                    if path.endswith(state.hf_lfs_suffixes):
                        e["size"] = len(data)
                        e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                    entries.append(e)
                start = int(q.get("cursor", 0))
                page = entries[start : start + state.hf_page]
                body = json.dumps(page).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if start + state.hf_page < len(entries):
                    host = f"http://{self.headers['Host']}"
                    nxt = f"{host}{tree}?recursive=true&cursor={start + state.hf_page}"
                    self.send_header("Link", f'<{nxt}>; rel="next"')
                self.end_headers()
                self.wfile.write(body)
                return None
            if u.path.startswith(resolve):
                path = urllib.parse.unquote(u.path[len(resolve) :])
                if path not in state.hf:
                    return self._json(404, {"error": "Entry not found"})
                self.send_response(302)
                self.send_header("Location", "/hfcdn/" + hashlib.sha256(state.hf[path]).hexdigest())
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if u.path.startswith("/hfcdn/"):
                time.sleep(state.hf_delay)
                want = u.path[len("/hfcdn/") :]
                for data in state.hf.values():
                    if hashlib.sha256(data).hexdigest() == want:
                        return self._send(200, data, "application/octet-stream")
            return self._json(404, {"error": "Repository not found"})

        def _listing(self, q):
            if q.get("public_key") != state.public_key:
                return self._json(404, {"error": "DiskNotFoundError"})
            path = q.get("path", "/")
            children = _dirs_and_files(state.disk, path if path != "/" else "")
            if path != "/" and not children:
                return self._json(404, {"error": "DiskNotFoundError"})
            limit, offset = int(q.get("limit", 20)), int(q.get("offset", 0))
            items = []
            for name in sorted(children):
                kind, data = children[name]
                full = (path.rstrip("/") + "/" + name) if path != "/" else "/" + name
                item = {"name": name, "path": full, "type": kind, "public_key": state.public_key}
                if kind == "file":
                    item["size"] = len(data)
                    if state.list_sha256:
                        item["sha256"] = state.listed_sha256_override.get(
                            full, hashlib.sha256(data).hexdigest()
                        )
                        item["md5"] = hashlib.md5(data).hexdigest()
                items.append(item)
            page = items[offset : offset + limit]
            self._json(
                200,
                {
                    "name": path.rsplit("/", 1)[-1],
                    "path": path,
                    "type": "dir",
                    "_embedded": {"items": page, "total": len(items), "limit": limit, "offset": offset, "path": path},
                },
            )

    return H


class FakeServices:
    """Context manager: ``with FakeServices() as fake: fake.base`` is ``http://127.0.0.1:PORT``."""

    def __init__(self):
        self.state = State()

    def __enter__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.state))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

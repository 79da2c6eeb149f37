import hashlib

import pytest

from calbench.data.download import ChecksumError, fetch, verify


def _make(path, content=b"calbench test payload\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return hashlib.sha256(content).hexdigest(), hashlib.md5(content).hexdigest()


def test_fetch_copies_from_first_matching_mirror(tmp_path):
    sha, md5 = _make(tmp_path / "mirror_b" / "w.pt")
    _make(tmp_path / "mirror_a" / "w.pt", b"corrupt")
    dest = tmp_path / "resources" / "w.pt"
    out = fetch(dest, mirrors=[tmp_path / "mirror_a", tmp_path / "mirror_b"], sha256=sha, md5=md5)
    assert out == dest and hashlib.sha256(dest.read_bytes()).hexdigest() == sha


def test_fetch_accepts_a_sha256_prefix_as_torch_hub_names_use(tmp_path):
    sha, _ = _make(tmp_path / "m" / "w.pt")
    assert fetch(tmp_path / "w.pt", mirrors=[tmp_path / "m"], sha256=sha[:8]).exists()


def test_fetch_downloads_from_a_file_url(tmp_path):
    sha, _ = _make(tmp_path / "remote" / "data.bin")
    dest = tmp_path / "out" / "data.bin"
    fetch(dest, urls=[(tmp_path / "remote" / "data.bin").as_uri()], sha256=sha)
    assert dest.read_bytes() == (tmp_path / "remote" / "data.bin").read_bytes()


def test_fetch_refuses_a_corrupt_download_and_leaves_nothing(tmp_path):
    _make(tmp_path / "remote" / "data.bin", b"tampered")
    dest = tmp_path / "out" / "data.bin"
    with pytest.raises(FileNotFoundError, match="does not match the pinned"):
        fetch(dest, urls=[(tmp_path / "remote" / "data.bin").as_uri()], sha256="0" * 64)
    assert not dest.exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_fetch_reports_every_place_tried(tmp_path):
    with pytest.raises(FileNotFoundError, match="tried .*nowhere.*http://127.0.0.1:9/x"):
        fetch(tmp_path / "x", mirrors=[tmp_path / "nowhere"], urls=["http://127.0.0.1:9/x"],
              sha256="a" * 64, timeout=2)


def test_existing_file_is_kept_when_valid_and_refused_when_not(tmp_path):
    sha, _ = _make(tmp_path / "w.pt")
    assert fetch(tmp_path / "w.pt", sha256=sha) == tmp_path / "w.pt"
    with pytest.raises(ChecksumError, match="delete it and download again"):
        fetch(tmp_path / "w.pt", sha256="f" * 64)


def test_verify_refuses_too_short_prefix(tmp_path):
    _make(tmp_path / "f")
    with pytest.raises(ValueError, match="too short"):
        verify(tmp_path / "f", sha256="abc")


# --- file names confined to their folder (issue 33, group 5) ---------------------------------
def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    "name, words",
    [
        ("../../../X/w.zip", "holds '..'"),
        ("/tmp/w.zip", "is an absolute path"),
        ("~/w.zip", "is an absolute path"),
        ("sub/w.zip", "is a path, not a file name"),
        ("..", "holds '..'"),
        (".", "names the folder itself"),
        ("w\nzip", "control character"),
        ("..\\..\\w.zip", "holds '..'"),
    ],
)
def test_confined_refuses_names_that_leave_their_folder(name, words):
    from calbench._paths import confined

    with pytest.raises(ValueError) as exc:
        confined("resources/archives", name, "models.m.checkpoint.filename", plain=True)
    msg = str(exc.value)
    assert msg.startswith("models.m.checkpoint.filename: ") and words in msg and "\n" not in msg
    assert msg.endswith("write the file's name only, e.g. 'weights.zip'")
    assert str(confined("r", "a/b.p", "k")) == "r/a/b.p"


def test_fetch_refuses_a_mirror_name_outside_the_mirror(tmp_path):
    sha, _ = _make(tmp_path / "secret.bin")
    (tmp_path / "mirror").mkdir()
    before = _tree(tmp_path)
    with pytest.raises(ValueError, match=r"^datasets.x.archive: '../secret.bin' holds '..'"):
        fetch(tmp_path / "out" / "a.bin", mirrors=[tmp_path / "mirror"], sha256=sha,
              filename="../secret.bin", name_key="datasets.x.archive")  # fmt: skip
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("member", [True, False])
def test_checkpoint_filename_with_dot_dot_writes_nothing_anywhere(tmp_path, monkeypatch, member):
    """``checkpoint.filename: ../../../X/w.zip`` (as a shared archive, or looked up in a mirror)
    is refused before anything is fetched: nothing outside resources/, nothing left behind."""
    import zipfile

    from calbench.models.staging import download_checkpoint

    remote = tmp_path / "remote" / "w.zip"
    remote.parent.mkdir()
    with zipfile.ZipFile(remote, "w") as zf:
        zf.writestr("w.pt", b"weights")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "w.zip").write_bytes(remote.read_bytes())
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    ckpt = {"urls": [remote.as_uri()], "sha256": None, "filename": "../../../X/w.zip"}
    if member:
        ckpt["archive_member"] = "w.pt"
    entry = {"dataset": "cifar10", "source": "checkpoint", "arch": "huyvnphan_resnet18",
             "num_classes": 10, "checkpoint": ckpt}  # fmt: skip
    before = _tree(tmp_path)
    with pytest.raises(ValueError) as exc:
        download_checkpoint("m", entry, resources="resources", mirrors=[mirror])
    msg = str(exc.value)
    assert msg.startswith("models.m.checkpoint.filename: '../../../X/w.zip' holds '..'"), msg
    assert "\n" not in msg and "write the file's name only" in msg
    assert _tree(tmp_path) == before  # nothing written, nothing left behind
    assert not (tmp_path / "X").exists()


def test_registry_refuses_a_checkpoint_filename_with_a_folder(tmp_path):
    from calbench.models.entries import load_registry

    reg = tmp_path / "reg.yaml"
    reg.write_text(
        "models:\n  m:\n    dataset: cifar10\n    source: checkpoint\n    arch: a\n"
        "    num_classes: 10\n    checkpoint: {urls: [], filename: ../../x.zip}\n"
    )
    with pytest.raises(ValueError, match=r"^models.m.checkpoint.filename: '../../x.zip' holds"):
        load_registry(reg)

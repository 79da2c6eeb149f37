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

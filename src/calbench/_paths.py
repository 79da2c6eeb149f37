"""File names from a config, a registry or a download, confined to their folder.

A name that reaches a path (``checkpoint.filename``, a logits file, a file looked up in a mirror
directory, a path listed by a remote folder) is joined to its folder only through
:func:`confined`: ``../../../X/w.zip``, ``/etc/passwd``, ``~/x`` or a NUL byte is a one-line
``ValueError`` naming the config key and the fix, raised before anything is read or written,
so nothing lands outside the folder and nothing is left behind.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath


def confined(folder: str | os.PathLike, name: str, key: str, *, plain: bool = False) -> Path:
    """``folder / name``, refused unless it stays inside ``folder``.

    ``name`` is relative, holds no ``..`` and no control character, and names more than the
    folder itself; ``plain=True`` also refuses sub-folders (one file name). ``key`` names where the
    name came from (``models.resnet.checkpoint.filename``) in the error. The check is on the
    name itself, not on the file system: a symlink placed in the folder on purpose still works,
    and the answer is the same whether or not the file exists yet."""
    text = str(name) if isinstance(name, str | os.PathLike) else None
    fix = "write the file's name only, e.g. 'weights.zip'" if plain else (
        "write a path relative to the folder, without '..'"
    )
    bad = None
    if text is None:
        bad = f"must be a string, got {type(name).__name__}"
    elif not text or text != text.strip():
        bad = "is empty or has leading/trailing spaces"
    elif any(ord(c) < 32 or ord(c) == 127 for c in text):
        bad = "holds a control character"
    else:
        posix = text.replace("\\", "/")
        parts = PurePosixPath(posix).parts
        if posix.startswith(("/", "~")) or (len(posix) > 1 and posix[1] == ":"):
            bad = f"is an absolute path (it would leave {folder})"
        elif ".." in parts:
            bad = f"holds '..' (it could leave {folder})"
        elif not [p for p in parts if p != "."]:
            bad = "names the folder itself, not a file"
        elif plain and len(parts) != 1:
            bad = f"is a path, not a file name (it would write below {folder})"
    if bad:
        raise ValueError(f"{key}: {name!r} {bad}; {fix}")
    return Path(folder) / os.path.normpath(text)

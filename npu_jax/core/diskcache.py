"""Small results kept on disk across processes: the tiling chooser's picks, beside the compiled programs.

:func:`npu_jax.enable_persistent_cache` points it at ``<cache dir>/npu-jax-results`` (the ``npu-jax``
command and the notebooks turn it on; a library call never does by itself, and the test suite runs with
it off). An entry is one JSON file named by the SHA-256 of its key, and it stores the key's text too: a
file whose text differs (a hash collision, a hand edit) or that does not parse is a miss and is written
again. The key includes :func:`code_version`, a hash of the package's own source, so a result computed by
another version of the cost model is never read back; the directory may be deleted at any time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import tempfile

_SUBDIR = "npu-jax-results"
_dir: list[str | None] = [None]  # where entries go; None: off


def set_dir(path: str | os.PathLike | None) -> str | None:
    """Keep results under ``path`` (created when first written), or stop (None). Returns the directory."""
    _dir[0] = None if path is None else os.path.join(os.fspath(path), _SUBDIR)
    return _dir[0]


def directory() -> str | None:
    """The directory results go to, or None when off."""
    return _dir[0]


@functools.cache
def code_version() -> str:
    """SHA-256 of every ``.py`` file of the installed ``npu_jax`` package (paths and contents)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _text(kind: str, key) -> str | None:
    """The key's text, or None when its repr is not reproducible across processes (an object address)."""
    text = f"{kind}|{code_version()}|{key!r}"
    return None if " at 0x" in text else text


def _path(text: str) -> str:
    return os.path.join(_dir[0], hashlib.sha256(text.encode()).hexdigest() + ".json")


def load(kind: str, key) -> dict | None:
    """The value stored for ``(kind, key)``, or None (off, absent, unreadable or another key's)."""
    text = _text(kind, key) if _dir[0] is not None else None
    if text is None:
        return None
    try:
        with open(_path(text), encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != text or not isinstance(entry.get("value"), dict):
        return None
    return entry["value"]


def store(kind: str, key, value: dict) -> None:
    """Keep ``value`` (JSON-able) for ``(kind, key)``; written whole or not at all (a failed write is
    ignored: the cache only ever saves work)."""
    text = _text(kind, key) if _dir[0] is not None else None
    if text is None:
        return
    tmp = None
    try:
        os.makedirs(_dir[0], exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=_dir[0], suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"key": text, "value": value}, f)
        os.replace(tmp, _path(text))
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


__all__ = ["code_version", "directory", "load", "set_dir", "store"]

"""Compiled programs, kept and reused: a bounded cache, least recently used out.

A launch with concrete inputs is compiled as one XLA program. The kernel closure is rebuilt on every
call, so ``jax.jit`` of it would trace and compile again each time; instead each launch names a
hashable *key* that determines its program completely (the kernel's plan, the
:class:`~npu_jax.core.state.Context` with hardware, buffers, policy and checks, the launch's name and
extents, the L2 residency), and the program compiled for the first call with that key serves every
later one with new data of the same shapes: no tracing, no compile. What the sanitizers need to
decode findings (the site table) is built at trace time and travels in the Report's static part, so
it is stored with the program.

The cache holds at most :func:`set_program_cache_size` programs (default 64, or the environment
variable ``NPU_JAX_PROGRAM_CACHE``); the least recently used is dropped first. Once as many have
been dropped as are kept, the cache and JAX's own caches are cleared and freed memory is returned to
the OS (``_Cache.purge``: a dropped program alone does not give its memory back), so a long sweep or
a notebook run many times stays bounded in memory. :func:`program_cache_info` reports hits, misses,
evictions and purges.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import gc
import os
from collections.abc import Callable, Hashable

import jax

from npu_jax.core import diskcache
from npu_jax.errors import ConfigError, check_int

_DEFAULT_SIZE = 64


def _size_from_env() -> int:
    raw = os.environ.get("NPU_JAX_PROGRAM_CACHE", "")
    if not raw:
        return _DEFAULT_SIZE
    try:
        n = int(raw)
    except ValueError:
        raise ConfigError(
            f"NPU_JAX_PROGRAM_CACHE={raw!r} is not an integer; set it to the number of compiled "
            f"programs to keep (default {_DEFAULT_SIZE}, 0 keeps none)."
        ) from None
    if n < 0:
        raise ConfigError(f"NPU_JAX_PROGRAM_CACHE={n} must be >= 0 (0 keeps no compiled program).")
    return n


@dataclasses.dataclass
class _Cache:
    maxsize: int
    entries: collections.OrderedDict = dataclasses.field(default_factory=collections.OrderedDict)
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    since_purge: int = 0
    purges: int = 0

    def get(self, key: Hashable, fn: Callable, fast_compile: bool = False) -> Callable:
        jitted = self.entries.get(key)
        if jitted is not None:
            self.hits += 1
            self.entries.move_to_end(key)
            return jitted
        self.misses += 1
        jitted = jit(fn, fast_compile)
        if self.maxsize > 0:
            self.entries[key] = jitted
            self.trim()
        return jitted

    def trim(self) -> None:
        while len(self.entries) > self.maxsize:
            self.entries.popitem(last=False)
            self.evictions += 1
            self.since_purge += 1
        if self.since_purge and self.since_purge >= max(self.maxsize, 8):
            self.purge()

    def purge(self) -> None:
        """Drop every kept program and JAX's own caches, and hand freed memory back to the OS.

        A program dropped from this cache is not all freed: JAX's global caches (traced jaxprs,
        lowerings) keep entries of it, and glibc keeps the freed pages. Measured on the tiny preset's
        GEMMs with 2 programs kept: RSS grew 11 MB a compile; with ``malloc_trim`` 3 MB; with
        ``jax.clear_caches`` too, 0.3 MB. So once as many programs were dropped as are kept, all go
        (each is compiled again on its next use; other jitted code in the process too)."""
        self.entries.clear()
        self.since_purge = 0
        self.purges += 1
        jax.clear_caches()
        gc.collect()
        _malloc_trim()


def _malloc_trim() -> None:
    """glibc's ``malloc_trim(0)``: return freed heap pages to the OS (nothing elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


_CACHE = _Cache(maxsize=_size_from_env())


# XLA:CPU's backend (LLVM) optimisation off: what a program that runs once wants
_FAST_COMPILE = {"xla_backend_optimization_level": 0}


def jit(fn: Callable, fast_compile: bool = False) -> Callable:
    """``jax.jit(fn)``; with ``fast_compile``, compiled with LLVM's optimisations off.

    For the timing-only kernels (no data, a scalar recurrence over the instructions), which run
    once per key (their reports are kept): on the ResNet-50 conv2_x layer (910B, every sanitizer
    on) the kernel's trace and compile fell from 4.8 s to 3.4 s and its run rose from 11 ms to
    44 ms at batch 1 (0.1 s to 0.33 s at batch 8)."""
    return jax.jit(fn, compiler_options=_FAST_COMPILE) if fast_compile else jax.jit(fn)


def call(key: Hashable, fn: Callable, *args, fast_compile: bool = False):
    """``fn(*args)`` as a compiled program, the one cached under ``key`` when there is one.

    ``key`` must determine ``fn`` completely (everything ``fn`` closes over that shapes what it
    traces); arguments are the data (their shapes and dtypes are part of what JAX keys on). Only for
    concrete arguments: inside a trace, call ``fn`` directly. ``fast_compile``: see :func:`jit`."""
    return _CACHE.get(key, fn, fast_compile)(*args)


def set_program_cache_size(n: int) -> None:
    """Keep at most ``n`` compiled programs (least recently used dropped first); 0 keeps none.

    Each kept program holds its XLA executable and what JAX keeps with it: measured 10-15 MB of
    resident memory each for the tiny preset's kernels (``benchmarks/session_memory.py``), so the
    default, 64, peaks under about 1 GB before a purge (see :class:`_Cache`)."""
    _CACHE.maxsize = check_int("set_program_cache_size", "n", n, 0, fix="0 keeps no compiled program")
    _CACHE.trim()


def clear_program_cache() -> None:
    """Drop every kept compiled program (counters stay)."""
    _CACHE.entries.clear()
    _CACHE.since_purge = 0


def program_cache_info() -> dict:
    """{"size", "maxsize", "hits", "misses", "evictions", "purges"} of the compiled-program cache."""
    c = _CACHE
    return {
        "size": len(c.entries),
        "maxsize": c.maxsize,
        "hits": c.hits,
        "misses": c.misses,
        "evictions": c.evictions,
        "purges": c.purges,
    }


# ---- across processes: JAX's persistent compilation cache -------------------------------------------
_OFF = ("", "0", "off", "none", "false")


def default_cache_dir() -> str | None:
    """Where :func:`enable_persistent_cache` writes by default: ``NPU_JAX_CACHE_DIR`` if set (one of
    ``0``, ``off``, ``none``, ``false`` or empty turns the cache off: None), else
    ``$XDG_CACHE_HOME/npu-jax/xla`` (``~/.cache/npu-jax/xla``)."""
    raw = os.environ.get("NPU_JAX_CACHE_DIR")
    if raw is not None:
        return None if raw.strip().lower() in _OFF else os.path.expanduser(raw)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "npu-jax", "xla")


def enable_persistent_cache(
    path: str | os.PathLike | None = None, min_compile_secs: float = 0.2
) -> str | None:
    """Keep compiled programs on disk, so the next process (a CLI run, a notebook restarted) loads them
    instead of compiling again, and the tiling chooser's picks (``<path>/npu-jax-results``, keyed on
    the layer, hardware, formats and the package's source: :mod:`npu_jax.core.diskcache`), so a layer
    priced once is not searched again: JAX's persistent compilation cache, pointed at ``path`` (default
    :func:`default_cache_dir`; None there: nothing is enabled). Programs that compiled in under
    ``min_compile_secs`` are not written. Returns the directory used, or None.

    The ``npu-jax`` command and the notebooks turn it on; a library call never does by itself
    (``benchmarks/persistent_cache.py`` measures what it saves). Entries are keyed by JAX on the
    program, the backend, the XLA flags and the JAX version, so a stale entry is never used; the
    directory may be deleted at any time."""
    if path is None:
        path = default_cache_dir()
        if path is None:
            return None
    path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise ConfigError(f"enable_persistent_cache: path must be a directory name, got {path!r}.")
    if (
        isinstance(min_compile_secs, bool)
        or not isinstance(min_compile_secs, (int, float))
        or min_compile_secs < 0
    ):
        raise ConfigError(
            f"enable_persistent_cache: min_compile_secs must be a number >= 0, got {min_compile_secs!r}."
        )
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(
            f"enable_persistent_cache: {path!r} exists and is not a directory; give a directory."
        )
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_secs))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    diskcache.set_dir(path)  # and the tiling chooser's picks (npu_jax/core/diskcache.py)
    return path


__all__ = [
    "call",
    "clear_program_cache",
    "default_cache_dir",
    "enable_persistent_cache",
    "program_cache_info",
    "set_program_cache_size",
]

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
a notebook run many times stays bounded in memory.

Programs are bounded by bytes as well (:func:`set_program_cache_bytes`, default 1 GiB, or
``NPU_JAX_PROGRAM_CACHE_MB``): before each compile, the memory the process gained since the last
purge is measured, and past the bound everything is purged first. Counting programs alone did not
bound memory: a program's cost ranges from a few MB (a small GEMM) to hundreds (a large layer with
every sanitizer on), and JAX's own caches (the jit caches of ``kernels/values.py``, traced jaxprs,
lowerings) hold as much again as the kept programs, out of this cache's sight; 50 distinct small
calls grew a process by 1.2 GB before the count bound acted. :func:`program_cache_info` reports
hits, misses, evictions, purges and the bytes held.
"""

from __future__ import annotations

import collections
import concurrent.futures
import ctypes
import dataclasses
import gc
import os
from collections.abc import Callable, Hashable

import jax

from npu_jax.core import diskcache
from npu_jax.errors import ConfigError, check_int

_DEFAULT_SIZE = 64
# The byte bound's default, 1 GiB. Why: a 12 GB Colab VM (and an 8 GB laptop) runs jax and npu_jax in
# ~0.3 GB (~0.6 GB once XLA has compiled); with 1 GiB for compiled programs the process peaks near
# 1.7 GB (one compile can overshoot the bound: it is checked before each compile), leaving > 10 GB
# on Colab for the user's arrays -- 1,000 small calls measured 1.64 GB peak, a sawtooth between
# ~0.7 and ~1.6 GB with no drift (benchmarks/session_memory.py, 2-core box). At the tiny
# preset's ~16 MB a program (RSS, measured there) it keeps ~60 programs, as many as the count
# bound, so a session that reuses a few shapes never purges; only a stream of new shapes does,
# every ~50 calls, and pays recompiles of the hot programs then (seconds each), not an OOM kill.
_DEFAULT_MB = 1024
# Where the process's resident memory cannot be read (no /proc: macOS, Windows), each program
# compiled since the last purge is counted at this estimate: the tiny preset's GEMMs and Conv2Ds
# cost 15-16 MB of RSS each, with JAX's caches (benchmarks/session_memory.py, Linux).
_PROGRAM_BYTES_ESTIMATE = 16 << 20


def _bytes_from_env() -> int | None:
    raw = os.environ.get("NPU_JAX_PROGRAM_CACHE_MB", "").strip()
    if not raw:
        return _DEFAULT_MB << 20
    if raw.lower() in ("none", "off", "unbounded"):
        return None
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not 0 <= mb < 2**40:
        raise ConfigError(
            f"NPU_JAX_PROGRAM_CACHE_MB={raw!r} is not a size; set it to the MB of memory compiled programs "
            f"may hold (default {_DEFAULT_MB}; 0 keeps only the newest; 'none' for no byte bound)."
        )
    return int(mb * 2**20)


def _rss_bytes() -> int | None:
    """The process's resident memory now (Linux ``/proc/self/statm``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


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
    """Kept programs: at most ``maxsize`` of them, and at most ``max_bytes`` of memory gained since
    the last purge (None: no byte bound), measured by ``rss`` (bytes, or None where unknown)."""

    maxsize: int
    max_bytes: int | None = None
    rss: Callable[[], int | None] = _rss_bytes
    entries: collections.OrderedDict = dataclasses.field(default_factory=collections.OrderedDict)
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    since_purge: int = 0
    purges: int = 0
    compiled_since_purge: int = 0
    baseline: int | None = None  # RSS just after the last purge (or before the first compile)

    def held_bytes(self) -> int:
        """Memory compiled programs hold now: what the process gained since the last purge.

        Measured, not estimated per program, because that is what a session pays: the kept programs'
        executables, what JAX's caches keep of them and of every other jit the kernels use, and the
        pages freed but not yet returned (glibc keeps them until ``malloc_trim``) -- an executable's
        own size (``Compiled.memory_analysis``) misses most of that. The gain includes the caller's
        new arrays too, so a session whose data grows purges once per bound's worth of growth (the
        baseline then moves up). Where RSS cannot be read: programs compiled since then x 16 MB."""
        now = self.rss()
        if now is None:
            return self.compiled_since_purge * _PROGRAM_BYTES_ESTIMATE
        if self.baseline is None:
            self.baseline = now
        return max(0, now - self.baseline)

    def get(self, key: Hashable, fn: Callable, fast_compile: bool = False) -> Callable:
        jitted = self.entries.get(key)
        if jitted is not None:
            self.hits += 1
            self.entries.move_to_end(key)
            return jitted
        self.misses += 1
        if self.since_purge >= max(self.maxsize, 8) or (
            self.max_bytes is not None and self.held_bytes() > self.max_bytes
        ):
            # before this compile, so the program compiled now is kept: the byte bound holds with
            # one program's overshoot at most, and the call after this one finds its program
            self.purge()
        self.compiled_since_purge += 1
        jitted = jit(fn, fast_compile)
        if self.maxsize > 0:
            self.entries[key] = jitted
            self.trim()
        return jitted

    def trim(self) -> None:
        """Drop the least recently used programs past ``maxsize``; once as many were dropped as are
        kept, the next compile purges first (:meth:`get`)."""
        while len(self.entries) > self.maxsize:
            self.entries.popitem(last=False)
            self.evictions += 1
            self.since_purge += 1

    def purge(self) -> None:
        """Drop every kept program and JAX's own caches, and hand freed memory back to the OS.

        A program dropped from this cache is not all freed: JAX's global caches (traced jaxprs,
        lowerings) keep entries of it, and glibc keeps the freed pages. Measured on the tiny preset's
        GEMMs with 2 programs kept: RSS grew 11 MB a compile; with ``malloc_trim`` 3 MB; with
        ``jax.clear_caches`` too, 0.3 MB. So once as many programs were dropped as are kept, all go
        (each is compiled again on its next use; other jitted code in the process too)."""
        self.entries.clear()
        _LATER.clear()
        self.since_purge = 0
        self.compiled_since_purge = 0
        self.purges += 1
        jax.clear_caches()
        gc.collect()
        _malloc_trim()
        self.baseline = self.rss()


def _malloc_trim() -> None:
    """glibc's ``malloc_trim(0)``: return freed heap pages to the OS (nothing elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


_CACHE = _Cache(maxsize=_size_from_env(), max_bytes=_bytes_from_env())


# XLA:CPU's backend (LLVM) optimisation off: what a program that runs once wants
_FAST_COMPILE = {"xla_backend_optimization_level": 0}


def jit(fn: Callable, fast_compile: bool = False, **jit_kwargs) -> Callable:
    """``jax.jit(fn, **jit_kwargs)``; with ``fast_compile``, compiled with LLVM's optimisations off.

    For the timing-only kernels (no data, a scalar recurrence over the instructions), which run
    once per key (their reports are kept): on the ResNet-50 conv2_x layer (910B, every sanitizer
    on) the kernel's trace and compile fell from 4.8 s to 3.4 s and its run rose from 11 ms to
    44 ms at batch 1 (0.1 s to 0.33 s at batch 8)."""
    if fast_compile:
        jit_kwargs["compiler_options"] = _FAST_COMPILE
    return jax.jit(fn, **jit_kwargs)


def call(key: Hashable, fn: Callable, *args, fast_compile: bool = False):
    """``fn(*args)`` as a compiled program, the one cached under ``key`` when there is one.

    ``key`` must determine ``fn`` completely (everything ``fn`` closes over that shapes what it
    traces); arguments are the data (their shapes and dtypes are part of what JAX keys on). Only for
    concrete arguments: inside a trace, call ``fn`` directly. ``fast_compile``: see :func:`jit`."""
    return _CACHE.get(key, fn, fast_compile)(*args)


# Programs compiled in the background (``compile_later``): key -> Future of the compiled program, the
# last 64; one thread compiles them (XLA's compile releases the GIL: it runs beside the caller)
_LATER: collections.OrderedDict = collections.OrderedDict()
_LATER_KEPT = 64
_COMPILER: list = []


def compile_later(key: Hashable, fn: Callable, *args) -> concurrent.futures.Future:
    """``jax.jit(fn)`` compiled for the shapes and dtypes of ``args`` in a background thread, kept under
    ``key`` (the last 64; dropped with the rest of the cache): the Future of the compiled program,
    the same one for every later call with ``key`` (``fn`` is traced only the first time).

    ``fn`` is traced in that thread too: it must not read another thread's trace-time state
    (npu_jax's own is per thread: the asc runtime's, the sanitizers' site tables)."""
    fut = _LATER.get(key)
    if fut is None:
        shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), args)
        if not _COMPILER:
            _COMPILER.append(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="npu_jax-compile"))
        fut = _LATER[key] = _COMPILER[0].submit(lambda: jax.jit(fn).lower(*shapes).compile())
        while len(_LATER) > _LATER_KEPT:
            _LATER.popitem(last=False)
    else:
        _LATER.move_to_end(key)
    return fut


def wait_compiled(timeout: float | None = None) -> None:
    """Wait until every program compiling in the background (:func:`compile_later`) is done (for
    benchmarks and tests that time or check the calls after them)."""
    concurrent.futures.wait(list(_LATER.values()), timeout)


def set_program_cache_size(n: int) -> None:
    """Keep at most ``n`` compiled programs (least recently used dropped first); 0 keeps none.

    Each kept program holds its XLA executable and what JAX keeps with it: measured 10-15 MB of
    resident memory each for the tiny preset's kernels (``benchmarks/session_memory.py``), so the
    default, 64, peaks under about 1 GB before a purge (see :class:`_Cache`)."""
    _CACHE.maxsize = check_int("set_program_cache_size", "n", n, 0, fix="0 keeps no compiled program")
    _CACHE.trim()


def set_program_cache_bytes(n: int | None) -> None:
    """Let compiled programs hold at most ``n`` bytes of memory (None: no byte bound); past it, every
    kept program and JAX's caches are dropped before the next compile and the memory returned to
    the OS (then the bound counts again from there).

    What is bounded is the process's resident memory gained since the last such purge, read before
    each compile (:meth:`_Cache.held_bytes` says why that measure and not an executable's size).
    The default, 1 GiB (or ``NPU_JAX_PROGRAM_CACHE_MB`` in MB, ``none`` for no bound), keeps a
    12 GB Colab session, or an 8 GB laptop, alive through any number of distinct calls: jax and
    npu_jax take ~0.3-0.6 GB, so the process peaks near 1.7 GB (1,000 distinct small calls:
    ``benchmarks/session_memory.py``), and at ~16 MB a small program the bound still keeps about
    as many programs as the count bound (64), so reused shapes stay compiled.

    Example:
        >>> import npu_jax
        >>> npu_jax.set_program_cache_bytes(512 << 20)  # a 4 GB machine
        >>> npu_jax.program_cache_info()["max_bytes"]
        536870912
    """
    if n is not None:
        n = check_int("set_program_cache_bytes", "n", n, 0, fix="None for no byte bound")
    _CACHE.max_bytes = n


def clear_program_cache() -> None:
    """Drop every kept compiled program (counters stay)."""
    _CACHE.entries.clear()
    _LATER.clear()
    _CACHE.since_purge = 0


def program_cache_info() -> dict:
    """{"size", "maxsize", "hits", "misses", "evictions", "purges", "bytes", "max_bytes"} of the
    compiled-program cache; ``bytes``: the memory compiled programs hold now, as the byte bound
    (``max_bytes``, None: none) measures it (:func:`set_program_cache_bytes`)."""
    c = _CACHE
    return {
        "size": len(c.entries),
        "maxsize": c.maxsize,
        "hits": c.hits,
        "misses": c.misses,
        "evictions": c.evictions,
        "purges": c.purges,
        "bytes": c.held_bytes(),
        "max_bytes": c.max_bytes,
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
    "set_program_cache_bytes",
    "set_program_cache_size",
]

"""Sweeps: a grid of independent estimates (or any function of a point) on an existing executor.

    df = npu_jax.sweep({"hw": ["910b", "310p"], "network": ["resnet18"], "batch": [1, 8],
                        "policy": ["fp16", "int8"]}, out="rows.parquet")
    df = npu_jax.sweep(grid, executor=distributed.Client(addr).get_executor())   # Dask, scale-out
    df = npu_jax.sweep(grid, fn=my_point)                                       # your own figures

Each grid point is one row: its key columns, then the figures the point function returns, ``error``
(empty, or the exception's type and message: a failing point does not stop the sweep) and
``seconds`` (the point's wall time on its worker). Rows are appended to a journal beside ``out``
(``out + ".jsonl"``, one JSON line per finished point, flushed as it arrives) and ``out`` (``.parquet``,
needing pyarrow, or ``.csv``) is written from it at the end; a rerun with the same ``out`` reads the
journal and runs only the points not in it (and, with ``retry_errors=True``, those that failed).

Scheduling, retries and transport are the executor's: any :class:`concurrent.futures.Executor`. The
default is a local process pool (spawned workers, each long-lived, so a worker's compiled programs and
chosen tilings serve its later points); Dask's ``Client.get_executor()`` is the scale-out path (it
reschedules the point of a worker that dies), Ray's through :class:`RayExecutor`. Workers pin XLA to
one thread each unless ``XLA_FLAGS`` is already set, so N workers use N cores.

Pictures: ``npu_jax.sweep.plot(df, x="l2_mib", y="images_per_second", hue="hw")`` (a Pareto front) or
``value=`` for a heat map of a two-key grid; ``npu_jax.sweep.pareto(df, x, y)`` the front's rows.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import itertools
import json
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from npu_jax.sweeps import plot as _plot

_PIN = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def points(grid: Mapping) -> list[dict]:
    """The grid's points, in order: the product of its lists (a value that is not a list or tuple is
    one value), the first key varying slowest."""
    if not isinstance(grid, Mapping) or not grid:
        raise TypeError(f"grid must be a non-empty dict of name -> list of values, got {grid!r}.")
    names, axes = [], []
    for name, values in grid.items():
        if not isinstance(name, str):
            raise TypeError(f"grid keys must be strings (column names), got {name!r}.")
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        if not values:
            raise ValueError(f"grid[{name!r}] is empty: give at least one value.")
        names.append(name)
        axes.append(values)
    return [dict(zip(names, combo)) for combo in itertools.product(*axes)]


def point_key(point: Mapping) -> str:
    """A point's identity in the journal: its values as canonical JSON (dict values sorted by key)."""
    return json.dumps(point, sort_keys=True, default=str, separators=(",", ":"))


def _pin_threads() -> None:
    if "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = _PIN


def _run_point(fn: Callable, point: dict) -> dict:
    """On the worker: the point's figures, or its error, and its time. Never raises for fn's errors."""
    _pin_threads()
    t0 = time.perf_counter()
    try:
        figures = fn(point)
        if not isinstance(figures, Mapping):
            raise TypeError(
                f"the point function must return a dict of figures, got {type(figures).__name__}."
            )
        figures, error = dict(figures), ""
    except Exception as e:  # the row records it; the sweep goes on
        figures, error = {}, f"{type(e).__name__}: {e}"
        traceback.print_exc()
    clash = set(figures) & (set(point) | {"error", "seconds"})
    if clash:
        figures, error = (
            {},
            f"ValueError: figures {sorted(clash)} clash with the grid's keys or error/seconds",
        )
    return {**figures, "error": error, "seconds": time.perf_counter() - t0}


class _Journal:
    """Finished rows, one JSON line each (``key``, ``point``, ``row``), appended and flushed as they come."""

    def __init__(self, path: Path | None):
        self.path = path
        self.rows: dict[str, dict] = {}
        if path is not None and path.exists():
            text = path.read_text()
            whole = []
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash: that point runs again
                self.rows[rec["key"]] = rec["row"]
                whole.append(line)
            if text and not text.endswith("\n") or len(whole) < len(text.splitlines()):
                tmp = path.with_name(path.name + ".tmp")  # the whole lines only, so appends start clean
                tmp.write_text("".join(line + "\n" for line in whole))
                os.replace(tmp, path)

    def add(self, key: str, point: dict, row: dict) -> None:
        line = json.dumps({"key": key, "point": point, "row": row}, default=_plain)
        self.rows[key] = json.loads(line)["row"]  # as a resumed sweep reads it: the same types
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())


def _plain(v):
    """A figure JSON does not know: a numpy scalar as its Python value, anything else as its text."""
    return v.item() if hasattr(v, "item") and getattr(v, "ndim", 1) == 0 else str(v)


def _frame(pts: list[dict], rows: dict[str, dict]):
    recs = [{**p, **rows[point_key(p)]} for p in pts if point_key(p) in rows]
    df = pd.DataFrame.from_records(recs)
    for name in pts[0] if pts else ():  # a dict-valued key (an hw override) shown as its JSON
        if name in df and df[name].map(lambda v: isinstance(v, (dict, list))).any():
            df[name] = df[name].map(
                lambda v: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
            )
    return df


def _write(df, out: Path) -> None:
    tmp = out.with_name(out.name + ".tmp")
    if out.suffix == ".parquet":
        df.to_parquet(tmp, index=False)
    else:
        df.to_csv(tmp, index=False)
    os.replace(tmp, out)  # whole or not at all


def _local_pool(workers: int | None) -> cf.Executor:
    return cf.ProcessPoolExecutor(
        max_workers=workers or os.cpu_count() or 1,
        mp_context=multiprocessing.get_context("spawn"),  # JAX's threads do not survive fork
    )  # each point pins XLA's threads before it runs (_run_point), on this pool as on Dask's or Ray's


def _stop(ex: cf.ProcessPoolExecutor) -> None:
    """Stop a local pool at once: its queued points cancelled, its workers (each maybe deep in a point,
    and holding points already passed to it) terminated and reaped. What finished is in the journal."""
    # the pool's own map of its worker processes (Python 3.14's terminate_workers() reads the same)
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def sweep(
    grid: Mapping,
    *,
    out: str | os.PathLike | None = None,
    executor: cf.Executor | None = None,
    progress: bool = True,
    fn: Callable[[dict], Mapping] | None = None,
    workers: int | None = None,
    retry_errors: bool = False,
):
    """Evaluate every point of ``grid`` (see :func:`points`) and return a ``pandas.DataFrame``, one row
    per point in grid order. ``fn(point) -> dict`` gives a point's figures (default
    :func:`npu_jax.sweeps.network.network_point`, imported when used: it needs onnx); it must be
    picklable (a module-level function) for a process pool, while Dask and Ray pickle closures too.
    ``executor``: any ``concurrent.futures.Executor`` (it stays open); default, a pool of ``workers``
    spawned processes (default: one per core). ``out``: a ``.parquet`` or ``.csv`` path, resumable
    through its journal ``out + ".jsonl"``."""
    if fn is None:  # the network estimate (npu_jax.model, an optional dependency: onnx)
        fn = importlib.import_module("npu_jax.sweeps.network").network_point
    if not callable(fn):
        raise TypeError(f"fn must be a function of a point (a dict) returning a dict, got {fn!r}.")
    pts = points(grid)
    keys = [point_key(p) for p in pts]
    if len(set(keys)) != len(keys):
        raise ValueError("grid has repeated points (a value listed twice); give each value once.")
    path = None
    if out is not None:
        path = Path(out)
        if path.suffix not in (".parquet", ".csv"):
            raise ValueError(f"out must end in .parquet or .csv, got {str(out)!r}.")
        if path.suffix == ".parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError as e:
                raise ImportError(
                    f'out={str(out)!r} needs pyarrow: pip install "npu-jax[distributed]", or use a .csv'
                ) from e
    journal = _Journal(None if path is None else path.with_name(path.name + ".jsonl"))
    todo = [
        (k, p)
        for k, p in zip(keys, pts)
        if k not in journal.rows or (retry_errors and journal.rows[k]["error"])
    ]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pts), initial=len(pts) - len(todo), desc="sweep", unit="point")
    own = executor is None
    attempts = dict.fromkeys((k for k, _ in todo), 0)
    try:
        while todo:
            ex = _local_pool(workers) if own else executor
            futures = {}
            try:
                futures = {ex.submit(_run_point, fn, p): (k, p) for k, p in todo}
                for fut in cf.as_completed(futures):
                    k, p = futures[fut]
                    try:
                        row = fut.result()
                    except cf.process.BrokenProcessPool:
                        if own and attempts[k] < 2:
                            continue  # the pool is rebuilt below and the point runs again
                        row = {
                            "error": "BrokenProcessPool: its worker died on three tries",
                            "seconds": float("nan"),
                        }
                    except Exception as e:  # the executor's own failure (e.g. Dask's KilledWorker)
                        row = {"error": f"{type(e).__name__}: {e}", "seconds": float("nan")}
                    journal.add(k, p, row)
                    if bar is not None:
                        bar.update(1)
            except BaseException:  # interrupted (Ctrl-C) or failed: the own pool's workers stop now
                if own:
                    _stop(ex)
                else:  # a cluster's: its points not yet started are withdrawn
                    for fut in futures:
                        fut.cancel()
                raise
            if own:
                ex.shutdown(wait=True, cancel_futures=True)
            left = [(k, p) for k, p in todo if k not in journal.rows]
            for k, _ in left:
                attempts[k] += 1
            todo = left
    finally:
        if bar is not None:
            bar.close()
    df = _frame(pts, journal.rows)
    if path is not None:
        _write(df, path)
    return df


sweep.plot = _plot.plot  # npu_jax.sweep.plot(df, x, y, value=None, hue=None, path=None)
sweep.pareto = _plot.pareto  # npu_jax.sweep.pareto(df, x, y): the rows no other beats


class RayExecutor(cf.Executor):
    """A ``concurrent.futures.Executor`` over Ray tasks (``ray.init`` first, or pass ``address``):
    each ``submit`` is a ``ray.remote`` task and its future Ray's own (``ObjectRef.future()``), so
    Ray's scheduling and retries serve a sweep unchanged."""

    def __init__(self, address: str | None = None, **remote_options):
        import ray

        if not ray.is_initialized():
            ray.init(address=address)
        self._call = ray.remote(**remote_options)(_call) if remote_options else ray.remote(_call)

    def submit(self, fn, /, *args, **kwargs):
        return self._call.remote(fn, args, kwargs).future()


def _call(fn, args, kwargs):
    return fn(*args, **kwargs)


__all__ = ["RayExecutor", "point_key", "points", "sweep"]

"""``npu-jax sweep SPEC.toml --out FILE``: a grid of network estimates, resumable, on local processes or Dask.

SPEC.toml holds a ``[grid]`` table of name -> list, as :func:`npu_jax.sweep` takes it::

    [grid]
    hw = ["910b", "310p", {preset = "910b", l2_bytes = 33554432}]
    network = ["resnet18", "mobilenet_v2"]
    batch = [1, 8]
    policy = ["fp16", "int8"]

Rows stream to ``FILE + ".jsonl"`` as points finish; ``FILE`` (.parquet or .csv) is written at the
end. Run it again with the same ``--out`` and only the points not yet done run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from npu_jax.sweeps import sweep

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("spec", type=Path, help="a TOML file with a [grid] table (name = [values])")
    parser.add_argument("--out", required=True, help="where the rows go: a .parquet or .csv path (resumable)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=int, default=None, help="local worker processes (default: one per core)"
    )
    where.add_argument("--scheduler", default=None, help="a Dask scheduler's address (tcp://host:8786)")
    parser.add_argument("--retry-errors", action="store_true", help="run again the points that failed before")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _grid(path: Path) -> dict:
    if tomllib is None:
        raise SystemExit("npu-jax sweep reads TOML with tomllib: use Python >= 3.11.")
    if not path.is_file():
        raise SystemExit(f"npu-jax sweep: no spec file {str(path)!r}.")
    try:
        spec = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise SystemExit(f"npu-jax sweep: {path} is not TOML: {e}") from None
    grid = spec.get("grid")
    if not isinstance(grid, dict) or not grid:
        raise SystemExit(
            f"npu-jax sweep: {path} needs a [grid] table of name = [values], e.g. batch = [1, 8]."
        )
    return grid


def run(args: argparse.Namespace) -> int:
    grid = _grid(args.spec)
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"npu-jax sweep: --workers must be >= 1, got {args.workers}.")
    executor = client = None
    if args.scheduler is not None:
        try:
            import distributed
        except ImportError as e:
            raise SystemExit(
                'npu-jax sweep --scheduler needs Dask: pip install "npu-jax[distributed]"'
            ) from e
        client = distributed.Client(args.scheduler)
        executor = client.get_executor()
    try:
        df = sweep(
            grid,
            out=args.out,
            executor=executor,
            workers=args.workers,
            progress=not args.no_progress,
            retry_errors=args.retry_errors,
        )
    finally:
        if client is not None:
            client.close()
    failed = int((df["error"] != "").sum()) if "error" in df else 0
    print(f"{len(df)} points in {args.out} ({failed} failed{': see its error column' if failed else ''})")
    return 1 if failed else 0

"""What the ``npu-jax`` commands write: tables on the terminal, ``--json`` and ``--csv``, output files.

* :func:`table` is the one table formatter of the commands (left-aligned text, right-aligned numbers).
* ``--json [PATH]`` and ``--csv [PATH]`` (:func:`add_results_arguments`) write the results to standard
  output (no PATH, or ``-``) or to a file; :func:`write_results` does both. CSV has one row per result
  and one column per field, nested fields flattened to ``a.b`` (lists as JSON text).
* Every output file flag (:func:`add_output_argument`: ``--trace``, ``--plot``, ``--json PATH``, ...) is
  checked before any work: the path's type (:func:`npu_jax.cli.types.output_path`) while parsing, and
  :func:`check_outputs` after it: an existing file is overwritten only with ``--force``, two flags may
  not name the same file, and only one may write to standard output.

Example:
    >>> print(table(["layer", "cycles"], [["conv1", 1234567], ["conv2_x", 89]]))
    layer       cycles
    -------  ---------
    conv1    1,234,567
    conv2_x         89
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence

from npu_jax.cli.types import output_or_stdout, output_path


# ---- tables --------------------------------------------------------------------------------------------
def _cell(x) -> str:
    if isinstance(x, bool) or x is None:
        return "-" if x is None else str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,g}"
    return str(x)


# text that reads as a number (a caller's own format: "0.25", "1.50x", "12%", "1,024") aligns as one
_NUMBER = re.compile(r"^[-+]?(\d[\d,]*)?\.?\d+(e[-+]?\d+)?[%x]?$")


def _numeric(x) -> bool:
    if isinstance(x, str):
        return bool(_NUMBER.match(x))
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A text table: a header, a rule, one line per row; numbers right-aligned (ints with thousands
    separators, floats to 6 significant digits: round them, or pass them formatted as text, which
    aligns as a number too), text left-aligned, None as ``-``."""
    cells = [[_cell(x) for x in row] for row in rows]
    right = [bool(rows) and all(_numeric(r[i]) or r[i] is None for r in rows) for i in range(len(columns))]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            s.rjust(w) if r else s.ljust(w) for s, w, r in zip(row, widths, right, strict=True)
        ).rstrip()

    return "\n".join(
        [line([str(c) for c in columns]), line(["-" * w for w in widths])] + [line(r) for r in cells]
    )


# ---- --json / --csv ------------------------------------------------------------------------------------
def flatten(record: Mapping, prefix: str = "") -> dict:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": "[1, 2]"}``: one CSV row."""
    out = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def csv_text(rows: Sequence[Mapping]) -> str:
    """Rows (flattened with :func:`flatten`) as CSV; the columns are every key, in first-seen order."""
    flat = [flatten(r) for r in rows]
    columns = list(dict.fromkeys(k for r in flat for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    return buf.getvalue()


def add_output_argument(parser: argparse.ArgumentParser, flag: str, help: str, stdout: bool = False) -> None:
    """An output file flag (``--trace``), checked before any work (a parser with one gets ``--force``:
    :meth:`npu_jax.cli.base.CommandParser.load`).
    ``stdout=True``: the PATH is optional and ``-`` or none means standard output (``--json [PATH]``)."""
    kw = dict(nargs="?", const="-", type=output_or_stdout) if stdout else dict(type=output_path)
    action = parser.add_argument(flag, metavar="PATH", help=help, **kw)
    parser.set_defaults(output_dests=(*(parser.get_default("output_dests") or ()), action.dest))


def add_results_arguments(parser: argparse.ArgumentParser, what: str = "the results") -> None:
    """``--json [PATH]`` and ``--csv [PATH]``."""
    add_output_argument(parser, "--json", f"write {what} as JSON to PATH (default: standard output)", True)
    add_output_argument(parser, "--csv", f"write {what} as CSV to PATH (default: standard output)", True)


def check_outputs(args: argparse.Namespace) -> None:
    """Before any work: no existing file without ``--force``, no file named twice, one flag on stdout."""
    dests = getattr(args, "output_dests", None) or ()
    given = [(d, getattr(args, d)) for d in dests if getattr(args, d, None) is not None]
    flag = {d: "--" + d.replace("_", "-") for d, _ in given}
    on_stdout = [d for d, v in given if v == "-"]
    if len(on_stdout) > 1:
        args.parser.error(
            f"argument {flag[on_stdout[1]]}: {flag[on_stdout[0]]} already writes to standard output; "
            f"give one of them a PATH"
        )
    seen: dict[str, str] = {}
    for d, path in given:
        if path == "-":
            continue
        key = os.path.realpath(path)
        if key in seen:
            args.parser.error(f"argument {flag[d]}: {path!r} is also the file of {flag[seen[key]]}")
        seen[key] = d
        if os.path.exists(path) and not args.force:
            args.parser.error(f"argument {flag[d]}: {path!r} exists; pass --force to overwrite it")


def write_text(dest: str, text: str) -> None:
    """``text`` to standard output (``dest == "-"``) or to the file ``dest``, ending in a newline."""
    text = text if text.endswith("\n") else text + "\n"
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with open(dest, "w", encoding="utf-8") as f:
            f.write(text)


def write_results(args: argparse.Namespace, data, rows: Sequence[Mapping] | None = None) -> bool:
    """``--json``: ``data`` as JSON; ``--csv``: ``rows`` (default ``[data]``) as CSV. Returns True when
    either went to standard output (the command then prints nothing else there)."""
    json_dest, csv_dest = getattr(args, "json", None), getattr(args, "csv", None)
    if json_dest is not None:
        write_text(json_dest, json.dumps(data, indent=2))
    if csv_dest is not None:
        write_text(csv_dest, csv_text(rows if rows is not None else [data]))
    return "-" in (json_dest, csv_dest)


def print_written(args: argparse.Namespace) -> None:
    """Say which result files ``--json PATH`` / ``--csv PATH`` wrote (after the text output)."""
    for name in ("json", "csv"):
        if getattr(args, name, None) not in (None, "-"):
            print(f"  {name.upper()} written to {getattr(args, name)}")


__all__ = [
    "add_output_argument",
    "add_results_arguments",
    "check_outputs",
    "csv_text",
    "flatten",
    "table",
    "write_results",
    "print_written",
    "write_text",
]

"""A list of Conv2D layers from a CSV or YAML file: ``npu-jax conv2d --layers FILE`` (and ``search``).

The columns (CSV header, or the keys of each YAML mapping), in any order:

=========  ========  ===========================================================
column     default   meaning
=========  ========  ===========================================================
name       derived   the row's label (default ``HxWxC KHxKW->K``)
n          1         batch
c          required  input channels
h, w       required  input height, width
k          required  output channels (filters)
kh, kw     required  kernel height, width
stride     1         S or SH,SW (YAML: an int or a list of two)
padding    0         P, PH,PW, SAME or VALID
dilation   1         D or DH,DW
=========  ========  ===========================================================

A CSV file (``.csv``) has a header row; a YAML file (``.yaml`` / ``.yml``) is a list of mappings, or a
mapping whose ``layers`` key holds that list. Every row is checked when the file is read (before any
work): an unknown column, a missing one, a bad value or a layer the Conv2D cannot take is one error
naming the file, the row and the column.

Example (``layers.csv``)::

    name,c,h,w,k,kh,kw,stride,padding
    conv2_x,64,56,56,64,3,3,1,1
    conv3_x down,64,56,56,128,1,1,2,0
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
from typing import NamedTuple

import yaml

from npu_jax.cli.types import int_or_pair, padding, positive_int
from npu_jax.workload.conv import canonicalize
from npu_jax.workload.resnet50 import ConvLayer

REQUIRED = ("c", "h", "w", "k", "kh", "kw")
# column -> (parser of its text, default)
COLUMNS = {
    "name": (str, None),
    "n": (positive_int, 1),
    **{c: (positive_int, None) for c in REQUIRED},
    "stride": (int_or_pair(1), 1),
    "padding": (padding, 0),
    "dilation": (int_or_pair(1), 1),
}


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """One layer of the file: a :class:`ConvLayer` (name, shapes, stride, padding) and its dilation."""

    layer: ConvLayer
    dilation: int | tuple[int, int] = 1

    @property
    def name(self) -> str:
        return self.layer.name

    def geometry(self):
        """The canonical :class:`~npu_jax.workload.conv.ConvGeometry`."""
        lay = self.layer
        return canonicalize(lay.x_shape, lay.w_shape, lay.stride, lay.padding, self.dilation)


def _text(value) -> str:
    """A YAML value as the text the flags take: [1, 2] -> "1,2"."""
    if isinstance(value, bool):
        raise argparse.ArgumentTypeError(f"must be a number, got {value!r}")
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value).strip()


def _records(path: str) -> list[dict]:
    ext = os.path.splitext(path)[1].lower()
    with open(path, encoding="utf-8", newline="") as f:
        if ext == ".csv":
            return [dict(r) for r in csv.DictReader(f)]
        if ext not in (".yaml", ".yml"):
            raise argparse.ArgumentTypeError(f"{path!r}: expected a .csv, .yaml or .yml file")
        try:
            doc = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise argparse.ArgumentTypeError(
                f"{path!r} is not valid YAML: {' '.join(str(e).split())}"
            ) from None
    if isinstance(doc, dict) and "layers" in doc:
        doc = doc["layers"]
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        raise argparse.ArgumentTypeError(
            f"{path!r}: expected a list of layers (mappings of column: value), got {type(doc).__name__}"
        )
    return doc


def _row(path: str, i: int, record: dict) -> LayerSpec:
    where = f"{path!r} row {i}"
    unknown = sorted(str(k) for k in record if k not in COLUMNS)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"{where}: unknown column {unknown[0]!r}; columns are {', '.join(COLUMNS)}"
        )
    values = {}
    for col, (parse, default) in COLUMNS.items():
        raw = record.get(col)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            if default is None and col != "name":
                raise argparse.ArgumentTypeError(
                    f"{where}: column {col!r} is missing (required: {', '.join(REQUIRED)})"
                )
            values[col] = default
            continue
        try:
            values[col] = parse(_text(raw))
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{where}: column {col!r}: {e}") from None
    v = values
    name = v["name"] or f"{v['h']}x{v['w']}x{v['c']} {v['kh']}x{v['kw']}->{v['k']}"
    spec = LayerSpec(
        ConvLayer(name, v["n"], v["c"], v["h"], v["w"], v["k"], v["kh"], v["kw"], v["stride"], v["padding"]),
        v["dilation"],
    )
    try:
        spec.geometry()
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"{where} ({name}): {' '.join(str(e).split())}") from None
    return spec


def read_layers(path: str) -> tuple[LayerSpec, ...]:
    """Every layer of the CSV / YAML file at ``path``, checked (rows count from 1, after the header)."""
    records = _records(path)
    if not records:
        raise argparse.ArgumentTypeError(f"{path!r} holds no layers")
    return tuple(_row(path, i, r) for i, r in enumerate(records, 1))


class LayerFile(NamedTuple):
    """What ``--layers FILE`` gives: the path and its layers."""

    path: str
    layers: tuple[LayerSpec, ...]


def layer_file(text: str) -> LayerFile:
    """The argparse type of ``--layers FILE``."""
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(
            f"file {text!r} {'is a folder' if os.path.isdir(text) else 'does not exist'}"
        )
    try:
        return LayerFile(text, read_layers(text))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: {e}") from None


# The one layer's flags (conv2d, search): (flag, default, what); ResNet-50's conv2_x by default.
SHAPE_FLAGS = (
    ("n", 1, "batch"),
    ("c", 64, "input channels"),
    ("h", 56, "input height"),
    ("w", 56, "input width"),
    ("k", 64, "output channels (filters)"),
    ("kh", 3, "kernel height"),
    ("kw", 3, "kernel width"),
    ("stride", 1, "stride: S or SH,SW"),
    ("padding", 1, "padding: P, PH,PW, SAME or VALID"),
    ("dilation", 1, "dilation: D or DH,DW"),
)


def add_layer_arguments(parser: argparse.ArgumentParser) -> None:
    """The one layer's flags (:data:`SHAPE_FLAGS`, no argparse default: :func:`layers_from_args` fills
    them in, so that it can tell them given) and ``--layers FILE``."""
    kinds = {"stride": int_or_pair(1), "padding": padding, "dilation": int_or_pair(1)}
    for dim, default, what in SHAPE_FLAGS:
        parser.add_argument(
            f"--{dim}",
            type=kinds.get(dim, positive_int),
            metavar=dim[0].upper() if dim in kinds else dim.upper(),
            help=f"{what} (default {default})",
        )
    parser.add_argument(
        "--layers", type=layer_file, metavar="FILE", help=LAYERS_HELP + "; not with the shape flags"
    )


def layers_from_args(args: argparse.Namespace, instead: str | None = None) -> tuple[LayerSpec, ...]:
    """The layers to run: ``--layers``' file, or the one layer of the shape flags. ``instead`` names
    another flag that gives the layers (``--resnet50``) when it was given; a shape flag given with it or
    with ``--layers`` is a usage error."""
    given = [d for d, _, _ in SHAPE_FLAGS if getattr(args, d) is not None]
    other = instead or ("--layers" if args.layers is not None else None)
    if given and other:
        args.parser.error(f"argument --{given[0]}: not with {other} (it gives every layer's shape)")
    if args.layers is not None:
        return args.layers.layers
    v = {d: getattr(args, d) if getattr(args, d) is not None else default for d, default, _ in SHAPE_FLAGS}
    name = f"{v['h']}x{v['w']}x{v['c']} {v['kh']}x{v['kw']}->{v['k']}"
    layer = ConvLayer(name, *(v[d] for d in ("n", "c", "h", "w", "k", "kh", "kw", "stride", "padding")))
    return (LayerSpec(layer, v["dilation"]),)


COLUMNS_HELP = (
    "one layer per row, columns name, n, c, h, w, k, kh, kw, stride, padding, dilation (c h w k kh kw "
    "required; see npu_jax/cli/layers.py and the README)"
)
LAYERS_HELP = "a CSV or YAML file of layers: " + COLUMNS_HELP

__all__ = [
    "COLUMNS",
    "COLUMNS_HELP",
    "LAYERS_HELP",
    "REQUIRED",
    "SHAPE_FLAGS",
    "add_layer_arguments",
    "layers_from_args",
    "LayerFile",
    "LayerSpec",
    "layer_file",
    "read_layers",
]

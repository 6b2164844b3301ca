"""``printf`` and ``DumpTensor``: the vendor's kernel-side debugging, once per block, jitted
(``jax.debug.print``) or with ``jit=False`` (Python's print)."""

from __future__ import annotations

import re

import jax

from npu_jax.asc import runtime
from npu_jax.asc.blockidx import BlockValue
from npu_jax.asc.ops import _count, _local, get_block_idx
from npu_jax.asc.tensors import LocalTensor
from npu_jax.core.isa.data import view_block


def _printf_format(fmt: str) -> str:
    return re.sub(r"%[-+ #0]*\d*(?:\.\d+)?[diufFeEgGxXs]", "{}", fmt.replace("{", "{{").replace("}", "}}"))


def printf(fmt: str, *args) -> None:
    """``printf(fmt, ...)`` (C format: %d %f %s ...), once per block, prefixed with the block's index.
    Works jitted (``jax.debug.print``) and with ``jit=False`` (Python's print)."""
    run = runtime.current()
    if run.planning:
        return
    text = "[block {}] " + _printf_format(fmt)
    blk = _value(get_block_idx())
    args = [_value(a) for a in args]
    if run.eager:
        print(text.format(blk, *[jax.device_get(a) for a in args]), end="" if fmt.endswith("\n") else "\n")
    else:
        jax.debug.print(text.rstrip("\n"), blk, *args, ordered=False)


def _value(a):
    """A block-index value as the array it is (printed as a number)."""
    return a.__jax_array__() if isinstance(a, BlockValue) else a


def dump_tensor(t: LocalTensor, desc: int = 0, count: int | None = None) -> None:
    """``DumpTensor(tensor, desc, count)``: print a local tensor's first ``count`` elements with ``desc``."""
    run = runtime.current()
    count = t.length if count is None else _count(count, "dump_tensor")
    view = _local(t, count, "dump_tensor", "tensor")
    if view is None:
        return
    vals = view_block(run.core, view)
    text = f"[block {{}}] DumpTensor desc={desc} {t.position.name} {t.dtype} [{count}]: {{}}"
    if run.eager:
        print(text.format(get_block_idx(), jax.device_get(vals)))
    else:
        jax.debug.print(text, _value(get_block_idx()), vals, ordered=False)

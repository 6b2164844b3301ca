"""Bytes per element of every number format the machine stores or computes in.

One table, read by the allocator (``core/buffers.py``), the fractal geometry (C0 = K0 =
``cube_k_bytes / itemsize``), the instructions' byte counts and the cost model.
"""

from __future__ import annotations

FORMAT_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "int32": 4, "int8": 1}
# the vector unit's integer and bit types (Ascend C's int16_t, uint8_t, uint16_t, uint32_t): masks of
# Compare, offsets of Gather, operands of the logic ops; UB only, never an operand of the Cube
FORMAT_BYTES.update({"int16": 2, "uint8": 1, "uint16": 2, "uint32": 4})


def itemsize(fmt: str) -> int:
    """Bytes of one element of ``fmt`` (``"fp16"``, ``"bf16"``, ``"fp32"``, ``"int32"``, ``"int8"``, and the
    vector unit's ``"int16"``, ``"uint8"``, ``"uint16"``, ``"uint32"``)."""
    try:
        return FORMAT_BYTES[fmt]
    except (KeyError, TypeError):
        raise ValueError(f"format must be one of {sorted(FORMAT_BYTES)}, got {fmt!r}.") from None


def acc_format(operand: str) -> str:
    """The L0C accumulator's format for Cube operands of ``operand``: int8 x int8 sums exactly into
    int32 (the Cube's int8 path), every float format into fp32."""
    return "int32" if operand == "int8" else "fp32"

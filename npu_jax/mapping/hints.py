"""Error hints shared by the mappings: which tiling fields size the allocation that overflowed."""

from __future__ import annotations


def tiling_hint(err, sized_by: dict, tiling) -> Exception:
    """A CapacityError / AlignmentError from the allocator, with the tiling fields that size the
    allocation it names (``sized_by``: allocation name -> field names) and their values."""
    msg = str(err)
    for alloc, fields in sized_by.items():
        if f"'{alloc}'" in msg:
            vals = ", ".join(f"{f}={getattr(tiling, f)!r}" for f in fields)
            return type(err)(
                f"{msg} The allocation is sized by {type(tiling).__name__}({vals}): lower "
                f"{' or '.join(fields)}."
            )
    return err

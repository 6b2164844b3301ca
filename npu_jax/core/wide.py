"""Exact wide integers for cycles, bytes and FLOPs, built from int32 only.

int32 overflows at ~2.1e9 and float32 stops counting integers at 2^24, while a network on one
core easily spends 1e10 FLOPs. JAX's int64 needs the global ``jax_enable_x64`` switch, which
would change every user's dtypes, so counters here are two int32 limbs, ``value = hi * 2^30 + lo``
with ``0 <= lo < 2^30``: exact up to 2^61, and every operation stays in int32.

A wide array has shape ``(..., 2)``; ``[..., 0]`` is ``hi`` and ``[..., 1]`` is ``lo``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

BITS = 30
BASE = 1 << BITS
MASK = BASE - 1


def zeros(shape: tuple[int, ...] = ()) -> jnp.ndarray:
    return jnp.zeros(tuple(shape) + (2,), jnp.int32)


def from_int(x) -> jnp.ndarray:
    """Widen a non-negative int32 (traced or not, any shape) or a Python int < 2^61."""
    if isinstance(x, (int, np.integer)):
        x = int(x)
        if not 0 <= x < (1 << 61):
            raise ValueError(f"wide integers hold 0 <= x < 2^61, got {x}.")
        return jnp.array([x >> BITS, x & MASK], jnp.int32)
    x = jnp.asarray(x, jnp.int32)
    return jnp.stack([x >> BITS, x & MASK], axis=-1)


def add(a, b) -> jnp.ndarray:
    """a + b for wide a and b (broadcasting); carries lo into hi (lo limbs may be < 2^31)."""
    lo = a[..., 1] + b[..., 1]
    hi = a[..., 0] + b[..., 0] + (lo >> BITS)
    return jnp.stack([hi, lo & MASK], axis=-1)


def add_int(a, x) -> jnp.ndarray:
    """a + x for wide a and a non-negative int32 x (< 2^31): ``add(a, from_int(x))`` in fewer
    operations (every instruction adds to its pipe's clocks and its counters)."""
    if isinstance(x, (int, np.integer)) and not 0 <= x < (1 << 31):
        return add(a, from_int(x))  # (a Python int past int32, or a negative one refused there)
    x = jnp.asarray(x, jnp.int32)
    lo = a[..., 1] + (x & MASK)
    hi = a[..., 0] + (x >> BITS) + (lo >> BITS)
    return jnp.stack([hi, lo & MASK], axis=-1)


def mul(a, b) -> jnp.ndarray:
    """a * b exactly, for non-negative int32 a, b < 2^30 (traced or not), as a wide integer."""
    a, b = jnp.asarray(a, jnp.int32), jnp.asarray(b, jnp.int32)
    m = (1 << 15) - 1
    a1, a0, b1, b0 = a >> 15, a & m, b >> 15, b & m
    cross = a1 * b0 + a0 * b1  # < 2^31
    lo = ((cross & m) << 15) + a0 * b0  # < 2^31
    hi = a1 * b1 + (cross >> 15)
    return add(jnp.stack([hi, jnp.zeros_like(hi)], -1), jnp.stack([jnp.zeros_like(lo), lo], -1))


def greater(a, b) -> jnp.ndarray:
    return (a[..., 0] > b[..., 0]) | ((a[..., 0] == b[..., 0]) & (a[..., 1] > b[..., 1]))


def maximum(a, b) -> jnp.ndarray:
    return jnp.where(greater(a, b)[..., None], a, b)


def max_over(a, axis: int) -> jnp.ndarray:
    """Maximum along ``axis`` (an axis of the value, not of the limb pair)."""
    axis = axis % (a.ndim - 1)
    moved = jnp.moveaxis(a, axis, 0)
    out = moved[0]
    for i in range(1, moved.shape[0]):
        out = maximum(out, moved[i])
    return out


def sum_over(a, axis: int) -> jnp.ndarray:
    axis = axis % (a.ndim - 1)
    moved = jnp.moveaxis(a, axis, 0)
    out = moved[0]
    for i in range(1, moved.shape[0]):
        out = add(out, moved[i])
    return out


def to_numpy(a) -> np.ndarray:
    """Concrete wide array -> numpy int64 of the value shape."""
    a = np.asarray(a).astype(np.int64)
    return a[..., 0] * BASE + a[..., 1]


def to_int(a) -> int:
    return int(to_numpy(a))

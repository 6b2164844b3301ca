"""Two-limb int32 wide integers against Python's unbounded ints, eager and under jit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_jax.core import wide

LIMIT = 1 << 61  # wide values hold 0 <= x < 2^61
# Values that matter: around the int32 limit, the limb boundary 2^30, 2^40, and large ones.
EDGES = [
    0,
    1,
    (1 << 30) - 1,
    1 << 30,
    (1 << 31) - 1,
    1 << 31,
    (1 << 31) + 1,
    (1 << 40) - 1,
    1 << 40,
    (1 << 40) + 12345,
    (1 << 60) - 1,
]
vals = st.one_of(st.sampled_from(EDGES), st.integers(0, (1 << 60) - 1), st.integers(0, 1 << 33))
int32s = st.integers(0, (1 << 31) - 1)

SETTINGS = settings(max_examples=25, deadline=None)


N = 8  # every jitted call sees (N, 2) operands: one compile per function, not one per example


def W(xs) -> jnp.ndarray:
    return jnp.asarray(np.array([[int(x) >> 30, int(x) & ((1 << 30) - 1)] for x in xs], np.int32))


def padded(xs, fill=0):
    return list(xs) + [fill] * (N - len(xs))


add_jit = jax.jit(wide.add)
add_int_jit = jax.jit(wide.add_int)
maximum_jit = jax.jit(wide.maximum)
max_over_jit = jax.jit(wide.max_over, static_argnums=1)
sum_over_jit = jax.jit(wide.sum_over, static_argnums=1)


def test_from_int_to_int_roundtrip():
    for x in EDGES:
        w = wide.from_int(x)
        assert w.dtype == jnp.int32 and w.shape == (2,)
        assert 0 <= int(w[1]) < (1 << 30)
        assert wide.to_int(w) == x


def test_from_int_rejects_out_of_range():
    with pytest.raises(ValueError, match="2\\^61"):
        wide.from_int(LIMIT)
    with pytest.raises(ValueError):
        wide.from_int(-1)


def test_from_traced_int32():
    x = np.array([0, 5, (1 << 30) + 7, (1 << 31) - 1], np.int32)
    w = jax.jit(wide.from_int)(x)
    assert w.shape == (4, 2)
    np.testing.assert_array_equal(wide.to_numpy(w), x.astype(np.int64))


@SETTINGS
@given(a=st.lists(vals, min_size=N, max_size=N), data=st.data())
def test_add_exact(a, data):
    b = data.draw(st.lists(st.integers(0, LIMIT - 1 - max(a)), min_size=N, max_size=N))
    want = [x + y for x, y in zip(a, b)]
    for f in (wide.add, add_jit):
        got = wide.to_numpy(f(W(a), W(b)))
        assert [int(g) for g in got] == want


@SETTINGS
@given(a=st.lists(st.integers(0, (1 << 60)), min_size=N, max_size=N), data=st.data())
def test_add_int_exact(a, data):
    x = data.draw(st.lists(int32s, min_size=N, max_size=N))
    xs = jnp.asarray(np.array(x, np.int32))
    want = [p + q for p, q in zip(a, x)]
    for f in (wide.add_int, add_int_jit):
        assert [int(g) for g in wide.to_numpy(f(W(a), xs))] == want


def test_add_int_repeated_past_int32():
    # 3000 additions of ~2^21 reach ~6.3e9 > 2^32: an int32 counter would have wrapped twice.
    step = (1 << 21) + 3
    w = jax.lax.fori_loop(0, 3000, lambda i, w: wide.add_int(w, step), wide.zeros(()))
    assert wide.to_int(w) == 3000 * step


@SETTINGS
@given(a=st.lists(vals, min_size=N, max_size=N), b=st.lists(vals, min_size=N, max_size=N))
def test_maximum_and_greater(a, b):
    b = [x if i % 3 == 0 else y for i, (x, y) in enumerate(zip(a, b))]  # some equal pairs too
    for f in (wide.maximum, maximum_jit):
        assert [int(g) for g in wide.to_numpy(f(W(a), W(b)))] == [max(x, y) for x, y in zip(a, b)]
    assert list(np.asarray(wide.greater(W(a), W(b)))) == [x > y for x, y in zip(a, b)]


@SETTINGS
@given(data=st.data())
def test_max_over_and_sum_over(data):
    rows, cols = 3, 5
    # < 2^58 each so that a sum of 5 stays below 2^61
    small = [e for e in EDGES if e < (1 << 58)]
    flat = data.draw(
        st.lists(
            st.one_of(st.sampled_from(small), st.integers(0, (1 << 58) - 1)),
            min_size=rows * cols,
            max_size=rows * cols,
        )
    )
    x = np.array(flat, dtype=object).reshape(rows, cols)
    w = W(flat).reshape(rows, cols, 2)
    for axis in (0, 1, -1):
        ax = axis % 2
        want_max = [int(v) for v in np.max(x, axis=ax)]
        want_sum = [int(v) for v in np.sum(x, axis=ax)]
        for jit in (False, True):
            mo = max_over_jit if jit else wide.max_over
            so = sum_over_jit if jit else wide.sum_over
            assert [int(g) for g in wide.to_numpy(mo(w, axis))] == want_max
            assert [int(g) for g in wide.to_numpy(so(w, axis))] == want_sum


def test_sum_over_past_2_40(rng):
    # 64 per-core cycle counts of ~2^34 each sum past 2^40; float32 would be off by thousands.
    xs = [int(v) for v in rng.integers((1 << 34), (1 << 35), size=64)]
    w = jax.jit(wide.sum_over, static_argnums=1)(W(xs), 0)
    assert wide.to_int(w) == sum(xs) and sum(xs) > (1 << 40)


def test_to_int_scalar_only():
    assert wide.to_int(wide.from_int((1 << 40) + 1)) == (1 << 40) + 1
    with pytest.raises(TypeError):
        wide.to_int(W([1, 2]))

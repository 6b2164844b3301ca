"""npu_jax.asc's launch: arguments, the two passes, asc.loop, timing-only runs and kept programs.

The vendor samples, the rules and the findings have their own files (test_asc_vector.py,
test_asc_rules.py, test_asc_cube.py); this one holds the launch's own contract.
"""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.core import programs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
from add_custom import add_custom  # noqa: E402

HW = npu_jax.presets.ascend910b()


def _data(rng, cols=2048):
    x = rng.uniform(-100, 100, (8, cols)).astype(np.float16)
    y = rng.uniform(-100, 100, (8, cols)).astype(np.float16)
    return x, y, rng.uniform(-1, 1, (8, cols)).astype(np.float16)


def test_outs_are_every_gm_argument_in_order_with_shape_and_dtype(rng):
    x, y, z = _data(rng)
    outs, rep = add_custom[8](x, y, z, 2048, 8, 2, hw=HW)
    assert [o.shape for o in outs] == [(8, 2048)] * 3 and all(o.dtype == np.float16 for o in outs)
    np.testing.assert_array_equal(outs[0], x)  # inputs come back as they were
    np.testing.assert_array_equal(outs[2], (x + y).astype(np.float16))  # the golden rule: bit-exact
    assert rep.n_cores == 8 and rep.cycles > 0


def test_unwritten_gm_keeps_its_input(rng):
    x, y, z = _data(rng)
    # 4 blocks cover only the first half of the rows: the rest of z is what was passed in
    outs, _ = add_custom[4](x, y, z, 2048, 8, 2, hw=HW)
    np.testing.assert_array_equal(outs[2][:4], (x + y)[:4])
    np.testing.assert_array_equal(outs[2][4:], z[4:])


def test_repeat_with_new_data_compiles_nothing(rng):
    """A checked launch's program is kept and run again (unchecked, its outputs' program: test_values_apart)."""
    x, y, z = _data(rng)
    add_custom[8](x, y, z, 2048, 8, 2, hw=HW, checks="all")
    before = programs.program_cache_info()
    x2, y2, _ = _data(rng)
    outs, _ = add_custom[8](x2, y2, z, 2048, 8, 2, hw=HW, checks="all")
    after = programs.program_cache_info()
    assert after["misses"] == before["misses"] and after["hits"] == before["hits"] + 1
    np.testing.assert_array_equal(outs[2], (x2 + y2).astype(np.float16))


def test_timing_only_takes_shapes_and_gives_the_same_report(rng):
    x, y, z = _data(rng)
    _, full = add_custom[8](x, y, z, 2048, 8, 2, hw=HW)
    s = jax.ShapeDtypeStruct((8, 2048), np.float16)
    outs, timed = add_custom[8](s, s, s, 2048, 8, 2, hw=HW, timing_only=True)
    assert outs == [None, None, None]
    assert timed.cycles == full.cycles and timed.bytes == full.bytes and timed.pipe_busy == full.pipe_busy
    with pytest.raises(asc.AscError, match="timing_only=True"):
        add_custom[8](s, s, s, 2048, 8, 2, hw=HW)


@asc.kernel
def _unbalanced(x, n: int):
    g = asc.GlobalTensor()
    g.set_global_buffer(x)
    pipe = asc.TPipe()
    q = asc.TQue(asc.TPosition.VECIN, 2)
    pipe.init_buffer(q, 2, 64)

    @asc.loop(n)
    def _(i):
        t = q.alloc_tensor(asc.half)
        asc.data_copy(t, g[i * 32 :], 32)
        q.enque(t)  # never dequeued: the queue fills one more buffer each iteration


def test_an_unbalanced_loop_is_refused_with_the_queue_named(rng):
    x = rng.uniform(-1, 1, 256).astype(np.float16)
    with pytest.raises(asc.AscError, match=r"one iteration changes TQue\(VECIN"):
        _unbalanced[1](x, 4, hw=HW)


def test_calls_outside_a_launch_and_bad_launches_say_how_to_launch(rng):
    with pytest.raises(asc.AscError, match=r"kernel\[num_blocks\]"):
        asc.get_block_num()
    x, y, z = _data(rng)
    with pytest.raises(TypeError, match=r"add_custom\[num_blocks\]"):
        add_custom(x, y, z, 2048, 8, 2)
    for bad in (0, 65536, 2.0, True):
        with pytest.raises(asc.AscError, match=r"num_blocks must be an int in \[1, 65535\]"):
            add_custom[bad](x, y, z, 2048, 8, 2, hw=HW)
    with pytest.raises(TypeError, match="takes 6 argument"):
        add_custom[8](x, y, hw=HW)
    with pytest.raises(TypeError, match="neither an array"):
        add_custom[8](x, y, z, [2048], 8, 2, hw=HW)
    with pytest.raises(TypeError, match="float64"):
        add_custom[8](x.astype(np.float64), y, z, 2048, 8, 2, hw=HW)


@asc.kernel
def _transpose_ext(x):
    pipe = asc.TPipe()
    buf = asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(buf, 1024)
    t = buf.get(asc.half)
    asc.transpose(t, t[256:], t, None)  # the enhanced form (TransposeParamsExt)


def test_an_unsupported_use_names_the_guide(rng):
    with pytest.raises(NotImplementedError, match="docs/kernels.md"):
        _transpose_ext[1](rng.uniform(-1, 1, 16).astype(np.float16), hw=HW)

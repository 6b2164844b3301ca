"""The compiled-program cache (``npu_jax/core/programs.py``): a repeated call never traces or compiles,
new data through a kept program gives the right answer, findings are still raised, the cache is bounded."""

from __future__ import annotations

import functools
import warnings

import jax
import numpy as np
import pytest
from jax import lax

import npu_jax
from npu_jax import presets
from npu_jax.core import programs
from npu_jax.core.buffers import Plan
from npu_jax.core.policy import Policy
from npu_jax.core.run import launch
from npu_jax.core.sanitize import Checks
from npu_jax.core.state import Context, GmSpec
from npu_jax.errors import InputError, InputTypeError, SanitizerWarning

_EVENTS: list[str] = []
jax.monitoring.register_event_duration_secs_listener(lambda name, *a, **k: _EVENTS.append(name))


def _work(fn):
    """(fn's result, how many jaxprs it traced, how many programs XLA compiled)."""
    _EVENTS.clear()
    out = fn()
    jax.block_until_ready(out)
    traced = sum(e.endswith("jaxpr_trace_duration") for e in _EVENTS)
    compiled = sum(e.endswith("backend_compile_duration") for e in _EVENTS)
    return out, traced, compiled


@pytest.fixture
def quiet_cache():
    """The program cache as a fresh session has it: empty, and no byte bound, so no purge can fall
    between a test's two calls (in a long worker the memory other tests gained, or the programs they
    had dropped, would purge it at the first call's second compile)."""
    old_bytes = programs.program_cache_info()["max_bytes"]
    npu_jax.clear_program_cache()
    npu_jax.set_program_cache_bytes(None)
    yield
    npu_jax.set_program_cache_bytes(old_bytes)


def _ref_conv(x, w):
    return lax.conv_general_dilated(
        np.asarray(x, np.float32),
        np.asarray(w, np.float32),
        (1, 1),
        ((1, 1), (1, 1)),
        precision=lax.Precision.HIGHEST,
    )


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["img2col", "relayout"])
def test_second_identical_conv_neither_traces_nor_compiles_and_new_data_is_right(strategy, quiet_cache, rng):
    hw = presets.tiny()
    policy = Policy(output="fp32")
    t = npu_jax.ConvTiling(ho=4, wo=8, n=16, cin1=1, k_l0=16)  # chosen here: the chooser is not timed

    def call(x, w):
        return npu_jax.conv2d(
            x, w, padding=1, hw=hw, strategy=strategy, tiling=t, policy=policy, checks="all"
        )

    shapes = ((2, 16, 8, 8), (32, 16, 3, 3))
    x1, w1 = (rng.standard_normal(s).astype(np.float16) for s in shapes)
    (_, rep1), _, _ = _work(lambda: call(x1, w1))
    x2, w2 = (rng.standard_normal(s).astype(np.float16) for s in shapes)
    (y2, rep2), traced, compiled = _work(lambda: call(x2, w2))
    assert (traced, compiled) == (0, 0), "an identical call must reuse its compiled program"
    # the kept program computes with the new data (fp16 products, fp32 accumulation: tight)
    np.testing.assert_allclose(np.asarray(y2), _ref_conv(x2, w2), rtol=2e-3, atol=2e-3)
    assert rep2.cycles == rep1.cycles and rep2.pipe_busy == rep1.pipe_busy
    assert rep2.findings() == []


def test_second_identical_matmul_reuses_its_program(quiet_cache, rng):
    hw = presets.tiny()
    a, b = rng.standard_normal((96, 48)).astype(np.float16), rng.standard_normal((48, 80)).astype(np.float16)
    _work(lambda: npu_jax.matmul(a, b, hw=hw, policy=Policy(output="fp32")))
    a2 = rng.standard_normal((96, 48)).astype(np.float16)
    (c, _), traced, compiled = _work(lambda: npu_jax.matmul(a2, b, hw=hw, policy=Policy(output="fp32")))
    assert (traced, compiled) == (0, 0)
    np.testing.assert_allclose(
        np.asarray(c), a2.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3
    )


def test_a_different_shape_compiles_its_own_program(rng):
    hw = presets.tiny()
    a, b = rng.standard_normal((64, 32)).astype(np.float16), rng.standard_normal((32, 48)).astype(np.float16)
    npu_jax.matmul(a, b, hw=hw)
    _, _, compiled = _work(lambda: npu_jax.matmul(a[:48], b, hw=hw))
    assert compiled >= 1


def _racy(plan):
    """A DMA into L1 and a load out of it with no flag between them: a RAW race every time."""
    x1 = plan.alloc("L1", "x_l1", (1, 16, 16), fmt="NZ")
    a0 = plan.alloc("L0A", "a_l0", (16, 16), fmt="ZZ")

    def kernel(core, b):
        core = core.data_copy(dst=x1[0], src=core.gm_window("x", (0, 0), (16, 16)), layout="nz")
        return core.load2d(dst=a0[0], src=x1[0])

    return kernel


def test_findings_are_raised_by_every_call_through_a_kept_program(rng):
    hw = presets.tiny()
    plan = Plan(hw)
    kernel = _racy(plan)
    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=(GmSpec("x", (16, 16), (16, 16), "fp16"),),
        policy=Policy(),
        checks=Checks.parse("all", action="warn"),
    )
    for i in range(2):
        gm = {"x": rng.standard_normal((16, 16)).astype(np.float16)}
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            (_, rep), traced, compiled = _work(
                lambda gm=gm: launch(kernel, ctx, gm, name="racy", key=("test_programs.racy",))
            )
        msgs = [str(w.message) for w in rec if issubclass(w.category, SanitizerWarning)]
        assert len(msgs) == 1 and "racecheck" in msgs[0] and "LoadData2D" in msgs[0], msgs
        if i:
            assert (traced, compiled) == (0, 0)


@pytest.mark.slow
def test_the_cache_is_bounded_least_recently_used_out(rng):
    hw = presets.tiny()
    old, old_bytes = programs.program_cache_info()["maxsize"], programs.program_cache_info()["max_bytes"]
    npu_jax.clear_program_cache()  # what earlier tests kept would be dropped here, and count
    npu_jax.set_program_cache_size(2)
    npu_jax.set_program_cache_bytes(None)  # the count bound alone (a byte purge would empty the cache)
    try:
        mats = [
            (
                rng.standard_normal((m, 32)).astype(np.float16),
                rng.standard_normal((32, 16)).astype(np.float16),
            )
            for m in (16, 32, 48)
        ]
        before = programs.program_cache_info()
        for a, b in mats:
            npu_jax.matmul(a, b, hw=hw, data_path="instructions")  # the program cache itself
        info = programs.program_cache_info()
        assert info["size"] == 2 and info["evictions"] - before["evictions"] >= 1
        # the two most recent are kept; the first was dropped and compiles again
        _, _, compiled = _work(lambda: npu_jax.matmul(*mats[2], hw=hw, data_path="instructions"))
        assert compiled == 0
        _, _, compiled = _work(lambda: npu_jax.matmul(*mats[0], hw=hw, data_path="instructions"))
        assert compiled >= 1
    finally:
        npu_jax.set_program_cache_size(old)
        npu_jax.set_program_cache_bytes(old_bytes)
    assert programs.program_cache_info()["maxsize"] == old


def test_cache_size_zero_keeps_nothing_and_still_runs(rng):
    hw = presets.tiny()
    old = programs.program_cache_info()["maxsize"]
    npu_jax.set_program_cache_size(0)
    try:
        a, b = (
            rng.standard_normal((16, 16)).astype(np.float16),
            rng.standard_normal((16, 16)).astype(np.float16),
        )
        c, _ = npu_jax.matmul(a, b, hw=hw, policy=Policy(output="fp32"))
        assert programs.program_cache_info()["size"] == 0
        np.testing.assert_allclose(
            np.asarray(c), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3
        )
    finally:
        npu_jax.set_program_cache_size(old)


@pytest.mark.parametrize(
    "value, error",
    [(-1, InputError), (True, InputTypeError), (2.0, InputTypeError), ("64", InputTypeError)],
)
def test_cache_size_is_validated(value, error):
    with pytest.raises(error, match="set_program_cache_size: n"):
        npu_jax.set_program_cache_size(value)


def test_bad_environment_size_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("NPU_JAX_PROGRAM_CACHE", "lots")
    with pytest.raises(npu_jax.errors.ConfigError, match="NPU_JAX_PROGRAM_CACHE"):
        programs._size_from_env()


def test_dropping_as_many_programs_as_are_kept_purges_and_the_cache_still_serves():
    cache = programs._Cache(maxsize=2)
    fns = [functools.partial(lambda i, x: x * i + 1, i) for i in range(11)]
    for i, f in enumerate(fns):
        assert int(cache.get(("k", i), f)(np.int32(3))) == 3 * i + 1
    # the 8th program dropped (max(maxsize, 8)) purged the cache: only the last one is kept since
    assert cache.evictions == 8 and cache.purges == 1 and len(cache.entries) == 1
    hits = cache.hits
    assert int(cache.get(("k", 10), fns[10])(np.int32(2))) == 21 and cache.hits == hits + 1

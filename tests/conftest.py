"""Shared fixtures and helpers for the npu-jax tests.

* ``rng``: a ``np.random.Generator`` with a fresh seed per test. The seed is printed (pytest shows
  captured output of failing tests); set ``NPU_JAX_TEST_SEED`` to replay one.
* ``make_core``: a one-core :class:`~npu_jax.core.state.Core` from a :class:`Plan`.
* ``assert_same_core``: two cores hold bit-identical data *and* identical clocks, flags, counters.
* All sanitizers are on for every test (``NPU_JAX_CHECKS`` overrides; see npu_jax/core/sanitize.py).
* Hypothesis's examples come from a fixed seed (``HYPOTHESIS_PROFILE=explore``: fresh ones).
* ``NPU_JAX_TEST_SHUFFLE=SEED`` runs the tests in an order shuffled by SEED (a check that no test
  depends on another's leftovers: caches, process defaults, compiled programs).
"""

from __future__ import annotations

import os
import random
import secrets

# The suite's time is almost all XLA compiles of emulator kernels (a few seconds each), rarely their
# execution. LLVM at optimisation level 0 compiles them about 30% faster; floating-point semantics do
# not depend on it (no fast-math either way): the golden precision baselines, recorded at the default
# level, still hold bit for bit. Set before JAX creates its CPU client; an explicit setting wins, and
# NPU_JAX_TEST_XLA_OPT=default keeps XLA's default.
if os.environ.get(
    "NPU_JAX_TEST_XLA_OPT", "0"
) != "default" and "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"])
    )

# The persistent compilation cache (npu_jax.enable_persistent_cache, on in the CLI and the notebooks) is
# off for the suite and every process it starts, so that a test never reads a program compiled by an
# earlier run; tests/test_programs.py turns it on in a temporary directory to test it.
os.environ["NPU_JAX_CACHE_DIR"] = "off"

import jax

# One exception, for CI: NPU_JAX_TEST_XLA_CACHE=DIR shares compiled programs between the test
# processes of one run (the xdist workers, the default run and the slow studies after it) through
# JAX's own persistent cache in DIR -- a fresh directory per CI run (.ci/run), so nothing compiled by
# another version of the code is read (JAX keys entries on the program and the flags anyway).
if os.environ.get("NPU_JAX_TEST_XLA_CACHE"):
    jax.config.update("jax_compilation_cache_dir", os.environ["NPU_JAX_TEST_XLA_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # a size bound turns on JAX's file lock around each read and write (filelock, in the dev extra):
    # concurrent workers never read an entry another is still writing
    jax.config.update("jax_compilation_cache_max_size", 4 << 30)
import hypothesis
import numpy as np
import pytest

from npu_jax.core import run, sanitize, wide
from npu_jax.core.pipes import COUNTER_INDEX
from npu_jax.core.policy import Policy
from npu_jax.core.state import Context, GmSpec, init_core

# Hypothesis draws its examples from a fixed seed (derandomize): a run that passes here passes on every
# machine, and a failure replays. HYPOTHESIS_PROFILE=explore draws fresh examples instead.
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
hypothesis.settings.register_profile("explore", derandomize=False)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Every test runs with all four sanitizers on (racecheck, memcheck, initcheck, synccheck): a shipped
# kernel that races, reads out of range or leaves a flag set fails the test that runs it.
# NPU_JAX_CHECKS=none turns them off (to time the suite without them).
sanitize.set_default_checks(os.environ.get("NPU_JAX_CHECKS", "all"))

pytest_plugins = ["precision.pytest_plugin"]  # the assert_precision fixture (precision lab)


# XLA:CPU keeps every compiled executable (and its JIT code mappings) alive in JAX's caches. A suite
# that compiles thousands of kernels in one process reaches Linux's vm.max_map_count (65530) and
# XLA then crashes with a segmentation fault inside a compile. launch() already drops the caches at
# 60% of the limit; between tests the suite drops them earlier, at 30% (~20,000 mappings), so tests
# that share a compiled kernel keep sharing it until then.
@pytest.fixture(autouse=True)
def _bounded_compile_cache():
    yield
    run.release_compiled_if_near_limit(fraction=0.3)


# The slow set's longest tests (a minute to four each on 2 cores, 2026-12-06): started first, so that no
# worker is left with one of them after the others have run out of tests (the run's tail).
LONGEST_FIRST = (
    "tests/test_vendor_kernels.py::test_the_matmul_ladder_at_the_published_size",
    "tests/test_notebooks.py::test_notebook_executes[04_tile_search.ipynb]",
    "tests/test_model.py::test_small_cnn_matches_onnxruntime_and_its_estimate",
    "tests/test_notebooks.py::test_notebook_executes[05_onnx_model.ipynb]",
    "tests/test_model_vs_emulator.py::test_model_equals_emulator_on_random_hardware",
    "tests/test_vendor_kernels.py::test_the_basic_api_matmul_port_computes_the_product",
)


def pytest_collection_modifyitems(config, items):
    seed = os.environ.get("NPU_JAX_TEST_SHUFFLE")
    if seed:
        random.Random(int(seed)).shuffle(items)
        print(f"test order shuffled with NPU_JAX_TEST_SHUFFLE={seed}")
        return

    def rank(item):
        return next((i for i, p in enumerate(LONGEST_FIRST) if item.nodeid.startswith(p)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture
def rng():
    env = os.environ.get("NPU_JAX_TEST_SEED")
    seed = int(env) if env else secrets.randbits(63)
    print(f"rng seed: {seed} (replay with NPU_JAX_TEST_SEED={seed})")
    return np.random.default_rng(seed)


def gm_spec(name, shape, dtype="fp16", *, padded=None, output=False) -> GmSpec:
    shape = tuple(int(s) for s in shape)
    return GmSpec(name, shape, tuple(padded) if padded is not None else shape, dtype, output)


def make_core(hw, plan, gm_specs=(), gm=None, *, policy=None, trace_capacity=0):
    """A fresh one-core Core for ``plan``'s allocations and the GM tensors ``gm_specs``."""
    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=tuple(gm_specs),
        policy=Policy() if policy is None else policy,
        trace_capacity=trace_capacity,
    )
    return init_core(ctx, dict(gm or {}))


def bits(x) -> np.ndarray:
    """The raw bit pattern of an array (so NaN payloads and -0.0 compare exactly)."""
    a = np.asarray(x)
    if a.dtype == np.bool_:
        return a
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else a


def assert_bits_equal(x, y, what=""):
    bx, by = bits(x), bits(y)
    assert bx.shape == by.shape, f"{what}: shape {bx.shape} != {by.shape}"
    assert np.array_equal(bx, by), f"{what}: {int(np.sum(bx != by))} elements differ bitwise"


def assert_same_core(c1, c2):
    """Bit-identical buffers and GM, identical pipe clocks, busy cycles, flags, counters, trace."""
    assert set(c1.buf) == set(c2.buf) and set(c1.gm) == set(c2.gm)
    for k in c1.buf:
        assert_bits_equal(c1.buf[k], c2.buf[k], f"buf[{k!r}]")
    for k in c1.gm:
        assert_bits_equal(c1.gm[k], c2.gm[k], f"gm[{k!r}]")
    for k in c1.gm_written:
        assert_bits_equal(c1.gm_written[k], c2.gm_written[k], f"gm_written[{k!r}]")
    for f in ("pipe_free", "pipe_busy", "counters", "flag_time"):
        np.testing.assert_array_equal(wide.to_numpy(getattr(c1, f)), wide.to_numpy(getattr(c2, f)), err_msg=f)
    np.testing.assert_array_equal(np.asarray(c1.n_instr), np.asarray(c2.n_instr), err_msg="n_instr")
    np.testing.assert_array_equal(np.asarray(c1.flag_set), np.asarray(c2.flag_set), err_msg="flag_set")
    for k in c1.trace:
        np.testing.assert_array_equal(
            np.asarray(c1.trace[k]), np.asarray(c2.trace[k]), err_msg=f"trace[{k!r}]"
        )


def run_both(fn, *args):
    """``fn(*args)`` eagerly and under ``jax.jit``; asserts the two cores agree; returns the eager one."""
    eager = fn(*args)
    jitted = jax.jit(fn)(*args)
    assert_same_core(eager, jitted)
    return eager


def busy(core, pipe: str) -> int:
    from npu_jax.core.pipes import PIPE_INDEX

    return int(wide.to_numpy(core.pipe_busy)[PIPE_INDEX[pipe]])


def free_at(core, pipe: str) -> int:
    from npu_jax.core.pipes import PIPE_INDEX

    return int(wide.to_numpy(core.pipe_free)[PIPE_INDEX[pipe]])


def counter(core, name: str) -> int:
    return int(wide.to_numpy(core.counters)[COUNTER_INDEX[name]])


def assert_prediction_is_report(pr, rep, where: str = ""):
    """A vector-side kernel's closed form (``cost.board.KernelPrediction``) equals the emulator's
    report in every figure the Report gives: cycles, core end, bytes per path, busy per lane, HBM
    bytes and cycles, bottleneck, vector bytes and cores."""
    assert (pr.cycles, pr.core_end) == (rep.cycles, rep.core_end), where
    assert pr.bytes == {k: v for k, v in rep.bytes.items() if v}, where
    assert pr.pipe_busy == dict(rep.pipe_busy), where
    assert (pr.hbm_bytes, pr.hbm_cycles, pr.bottleneck) == (rep.hbm_bytes, rep.hbm_cycles, rep.bottleneck), (
        where
    )
    assert (pr.vector_bytes, pr.n_cores) == (counter_of(rep, "vector_bytes"), rep.n_cores), where


def counter_of(rep, name: str) -> int:
    """A report's counter ``name``, summed over its cores."""
    return int(wide.to_numpy(rep.counters)[:, COUNTER_INDEX[name]].sum())

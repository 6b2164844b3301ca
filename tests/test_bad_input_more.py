"""Bad inputs, by kind, across every public entry point: one named row each.

Each row is (name, call, expected error type, the parameter the message must name). ``call`` takes a
scratch directory (for the file cases). Every row fails in the validation layer, before anything is
compiled, so the table runs in seconds. The kinds (docs/errors.md): strings or ints where a bool is
asked, bools or floats where an int is, numpy object / complex / string arrays, policy as a string,
wrong types for steps / seed / max_evals / epilogue / trace, seeds past 63 bits, calls that would
allocate past the limit, configurations whose costs leave the exact range, empty or non-file ini
paths, metrics and baselines that would lie, and layers larger than their bound.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import fusion
import npu_jax
import precision
from npu_jax import Assumed, ConvTiling, HardwareConfig, MatmulTiling, Policy, cli
from npu_jax.errors import (
    ConfigError,
    InputError,
    InputTypeError,
    NpuError,
    SizeError,
    TilingError,
)
from npu_jax.hw import presets
from npu_jax.workload.conv import canonicalize

HW = presets.tiny()
X = np.ones((1, 16, 8, 8), np.float32)
W = np.ones((16, 16, 3, 3), np.float32)
A = np.ones((32, 32), np.float32)
T = ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16)
G = canonicalize(X.shape, W.shape, 1, 1)
OBJ = np.array([[1.0, None]], dtype=object)
CPLX = np.ones((32, 32), np.complex64)
STRS = np.array([["a", "b"]])


def conv(**kw):
    args = dict(x=X, w=W, hw=HW, tiling=T, padding=1)
    args.update(kw)
    return lambda tmp: npu_jax.conv2d(args.pop("x"), args.pop("w"), **args)


def bounded(**kw):
    args = dict(x=X, w=W, g=G, bound=G, strategy="img2col", tiling=T, hw=HW)
    args.update(kw)
    return lambda tmp: npu_jax.conv2d_bounded(args.pop("x"), args.pop("w"), args.pop("g"), **args)


def mm(a=A, b=A, **kw):
    return lambda tmp: npu_jax.matmul(a, b, **{"hw": HW, **kw})


def fused(epilogue=("relu",), **kw):
    args = dict(x=X, w=W, hw=HW, tiling=T, padding=1)
    args.update(kw)
    return lambda tmp: fusion.conv2d_fused(args.pop("x"), args.pop("w"), epilogue, **args)


def relu(**kw):
    args = dict(x=X, w=W, hw=HW, tiling=T, padding=1)
    args.update(kw)
    return lambda tmp: fusion.conv_relu(args.pop("x"), args.pop("w"), **args)


def fused_bounded(**kw):
    args = dict(x=X, w=W, g=G, bound=G, epilogue=("relu",), tiling=T, hw=HW)
    args.update(kw)
    return lambda tmp: fusion.conv2d_fused_bounded(args.pop("x"), args.pop("w"), args.pop("g"), **args)


def search(**kw):
    args = dict(x_shape=(1, 16, 8, 8), w_shape=(16, 16, 3, 3), stride=1, padding=1, hw=HW, verify=False)
    args.update(kw)
    return lambda tmp: npu_jax.search.tile_search(**args)


def hwc(**kw):
    return lambda tmp: HardwareConfig(**kw)


def assumed(**kw):
    return lambda tmp: Assumed(**kw)


def ini(text: str | bytes | None):
    def call(tmp):
        p = tmp / "chip.ini"
        if isinstance(text, bytes):
            p.write_bytes(text)
        elif text is not None:
            p.write_text(text)
        else:
            p.write_text("")
        return HardwareConfig.from_ini(p)

    return call


def rnd(x=A, fmt="fp16", **kw):
    return lambda tmp: precision.round_to(x, fmt, **kw)


def cmp(out=A, ref=A, **kw):
    return lambda tmp: precision.compare(out, ref, **kw)


def baseline_file(content: str | bytes, name="b", **kw):
    def call(tmp):
        p = tmp / f"{name}.json"
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        m = precision.compare(A + 1e-3, A)
        return precision.assert_precision(m, baseline=name, directory=tmp, **kw)

    return call


def ap(result=None, baseline="b", **kw):
    def call(tmp):
        r = precision.compare(A + 1e-3, A) if result is None else result
        return precision.assert_precision(r, baseline=baseline, directory=tmp, **kw)

    return call


# (name, call(tmp), error type, the parameter the message must name)
CASES = [
    # ---- conv2d: bools, ints, arrays, strings, sizes -----------------------------------------------
    ("conv timing_only 'no'", conv(timing_only="no"), InputTypeError, "timing_only"),
    ("conv timing_only 1", conv(timing_only=1), InputTypeError, "timing_only"),
    ("conv timing_only None", conv(timing_only=None), InputTypeError, "timing_only"),
    ("conv timing_only 0.0", conv(timing_only=0.0), InputTypeError, "timing_only"),
    ("conv trace 'no'", conv(trace="no"), InputTypeError, "trace"),
    ("conv trace 'yes'", conv(trace="yes"), InputTypeError, "trace"),
    ("conv trace 1.5", conv(trace=1.5), InputTypeError, "trace"),
    ("conv trace None", conv(trace=None), InputTypeError, "trace"),
    ("conv trace -5", conv(trace=-5), InputError, "trace"),
    ("conv trace 2**40", conv(trace=2**40), InputError, "trace"),
    ("conv trace 1e9 events", conv(trace=10**9), SizeError, "trace"),
    ("conv x object array", conv(x=OBJ), InputTypeError, "x"),
    ("conv w object array", conv(w=OBJ), InputTypeError, "w"),
    ("conv x string array", conv(x=STRS), InputTypeError, "x"),
    ("conv x complex", conv(x=X.astype(np.complex64)), InputTypeError, "x"),
    ("conv x bool array", conv(x=X.astype(bool)), InputTypeError, "x"),
    ("conv x ragged list", conv(x=[[1.0], [1.0, 2.0]]), InputTypeError, "x"),
    ("conv x dict", conv(x={"x": X}), InputTypeError, "x"),
    ("conv x bytes", conv(x=b"abc"), InputTypeError, "x"),
    ("conv w None", conv(w=None), InputTypeError, "w"),
    ("conv w int8", conv(w=W.astype(np.int8)), InputTypeError, "w"),
    ("conv strategy int", conv(strategy=3), InputTypeError, "strategy"),
    ("conv strategy None", conv(strategy=None), InputTypeError, "strategy"),
    ("conv strategy unknown", conv(strategy="winograd"), InputError, "strategy"),
    ("conv policy as a string", conv(policy="fp16"), InputTypeError, "policy"),
    ("conv policy as a dict", conv(policy={"operand": "fp16"}), InputTypeError, "policy"),
    ("conv policy seed past 63 bits", conv(policy=Policy(seed=2**64)), InputError, "policy.seed"),
    ("conv policy seed negative", conv(policy=Policy(seed=-1)), InputError, "policy.seed"),
    ("conv hw as an int", conv(hw=910), InputTypeError, "hw"),
    ("conv hw as a dict", conv(hw={"num_cores": 2}), InputTypeError, "hw"),
    ("conv checks int", conv(checks=5), InputTypeError, "checks"),
    ("conv checks unknown", conv(checks="memchek"), InputError, "checks"),
    ("conv tiling string", conv(tiling="auto"), InputTypeError, "tiling"),
    ("conv tiling MatmulTiling", conv(tiling=MatmulTiling()), InputTypeError, "tiling"),
    ("conv stride string", conv(stride="1"), InputTypeError, "stride"),
    ("conv stride bool", conv(stride=True), InputTypeError, "stride"),
    ("conv stride float pair", conv(stride=(1.0, 1.0)), InputTypeError, "stride"),
    ("conv stride negative", conv(stride=-1), InputError, "stride"),
    ("conv dilation string", conv(dilation="2"), InputTypeError, "dilation"),
    ("conv dilation negative", conv(dilation=(-1, 1)), InputError, "dilation"),
    ("conv padding bool", conv(padding=True), InputTypeError, "padding"),
    ("conv padding None", conv(padding=None), InputTypeError, "padding"),
    ("conv padding float pair", conv(padding=(1.0, 1.0)), InputTypeError, "padding"),
    ("conv padding lower-case mode typo", conv(padding="same-ish"), InputError, "padding"),
    ("conv groups string", conv(groups="1"), InputTypeError, "groups"),
    ("conv groups True", conv(groups=True), InputTypeError, "groups"),
    ("conv x 5-D", conv(x=X[None]), InputError, "x"),
    ("conv x scalar", conv(x=1.0), InputError, "x"),
    # ---- conv2d_bounded ----------------------------------------------------------------------------
    (
        "bounded layer larger than bound",
        bounded(x=np.ones((1, 16, 6, 6), np.float32), bound=canonicalize((1, 16, 6, 6), W.shape, 1, 1)),
        InputError,
        "bound",
    ),
    (
        "bounded more channels than bound",
        bounded(g=canonicalize((1, 32, 8, 8), (16, 32, 3, 3), 1, 1)),
        InputError,
        "bound",
    ),
    (
        "bounded more output channels than bound",
        bounded(g=canonicalize((1, 16, 8, 8), (32, 16, 3, 3), 1, 1)),
        InputError,
        "bound",
    ),
    ("bounded g a tuple", bounded(g=(1, 16, 8, 8)), InputTypeError, "g"),
    ("bounded bound a dict", bounded(bound={"n": 1}), InputTypeError, "bound"),
    ("bounded x off the bound's shape", bounded(x=np.ones((1, 16, 9, 9), np.float32)), InputError, "x"),
    ("bounded tiling None", bounded(tiling=None), InputTypeError, "tiling"),
    ("bounded strategy unknown", bounded(strategy="fft"), InputError, "strategy"),
    ("bounded timing_only 'no'", bounded(timing_only="no"), InputTypeError, "timing_only"),
    ("bounded x complex", bounded(x=X.astype(np.complex64)), InputTypeError, "x"),
    ("bounded policy string", bounded(policy="bf16"), InputTypeError, "policy"),
    # ---- matmul ------------------------------------------------------------------------------------
    ("matmul a object array", mm(a=np.array([[None] * 32] * 32)), InputTypeError, "a"),
    ("matmul b complex", mm(b=CPLX), InputTypeError, "b"),
    ("matmul a string array", mm(a=STRS), InputTypeError, "a"),
    ("matmul a string", mm(a="A"), InputTypeError, "a"),
    ("matmul b dict", mm(b={}), InputTypeError, "b"),
    ("matmul a bool array", mm(a=A.astype(bool)), InputTypeError, "a"),
    ("matmul a ragged list", mm(a=[[1.0, 2.0], [3.0]]), InputTypeError, "a"),
    ("matmul a 3-D", mm(a=A[None]), InputError, "a"),
    ("matmul b empty", mm(b=np.ones((32, 0), np.float32)), InputError, "b"),
    ("matmul trace 'no'", mm(trace="no"), InputTypeError, "trace"),
    ("matmul trace float", mm(trace=4096.0), InputTypeError, "trace"),
    ("matmul trace 1e9 events", mm(trace=10**9), SizeError, "trace"),
    ("matmul trace over int32", mm(trace=2**31), InputError, "trace"),
    ("matmul policy string", mm(policy="fp32"), InputTypeError, "policy"),
    ("matmul policy seed huge", mm(policy=Policy(seed=2**70)), InputError, "policy.seed"),
    ("matmul hw string", mm(hw="tiny"), InputTypeError, "hw"),
    ("matmul tiling tuple", mm(tiling=(16, 16)), InputTypeError, "tiling"),
    ("matmul tiling ConvTiling", mm(tiling=T), InputTypeError, "tiling"),
    ("matmul checks float", mm(checks=1.0), InputTypeError, "checks"),
    ("matmul checks unknown", mm(checks=("racecheck", "leakcheck")), InputError, "checks"),
    (
        "matmul checks log past the limit",
        mm(checks=npu_jax.Checks(frozenset({"racecheck"}), capacity=2**31)),
        SizeError,
        "sanitizer log",
    ),
    ("MatmulTiling cores True", lambda tmp: MatmulTiling(cores=True), TilingError, "cores"),
    ("MatmulTiling l1_stages True", lambda tmp: MatmulTiling(l1_stages=True), TilingError, "l1_stages"),
    ("MatmulTiling m True", lambda tmp: MatmulTiling(m=True), TilingError, "m"),
    ("MatmulTiling n float", lambda tmp: MatmulTiling(n=32.0), TilingError, "n"),
    (
        "ConvTiling cores True",
        lambda tmp: ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, cores=True),
        TilingError,
        "cores",
    ),
    (
        "ConvTiling l0_stages True",
        lambda tmp: ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, l0_stages=True),
        TilingError,
        "l0_stages",
    ),
    # ---- fusion calls ------------------------------------------------------------------------------
    ("fused epilogue int", fused(epilogue=5), InputTypeError, "epilogue"),
    ("fused epilogue dict", fused(epilogue={"relu": 1}), InputTypeError, "epilogue"),
    ("fused epilogue unknown step", fused(epilogue=["gelu"]), InputError, "epilogue"),
    ("fused epilogue step int", fused(epilogue=["relu", 3]), InputError, "epilogue"),
    ("fused epilogue slope string", fused(epilogue=[("leaky_relu", "x")]), InputError, "epilogue"),
    ("fused epilogue cast not last", fused(epilogue=[("cast", "bf16"), "relu"]), InputError, "epilogue"),
    ("fused epilogue bias twice", fused(epilogue=["bias", "bias"], bias=np.ones(16)), InputError, "epilogue"),
    ("fused epilogue clip nan", fused(epilogue=[("clipped_relu", math.nan)]), InputError, "epilogue"),
    ("fused bias missing", fused(epilogue=["bias", "relu"]), InputError, "bias"),
    ("fused bias without a step", fused(bias=np.ones(16)), InputError, "bias"),
    ("fused bias wrong shape", fused(epilogue=["bias"], bias=np.ones(8)), InputError, "bias"),
    ("fused bias complex", fused(epilogue=["bias"], bias=np.ones(16, complex)), InputTypeError, "bias"),
    ("fused bias object", fused(epilogue=["bias"], bias=np.array([None] * 16)), InputTypeError, "bias"),
    ("fused bias string", fused(epilogue=["bias"], bias="ones"), InputTypeError, "bias"),
    ("fused residual wrong shape", fused(epilogue=["residual"], residual=X[:, :8]), InputError, "residual"),
    ("fused residual int", fused(epilogue=["residual"], residual=X.astype(int)), InputTypeError, "residual"),
    ("fused fused 'no'", fused(fused="no"), InputTypeError, "fused"),
    ("fused fused 0", fused(fused=0), InputTypeError, "fused"),
    ("fused timing_only 'yes'", fused(timing_only="yes"), InputTypeError, "timing_only"),
    ("fused trace 'yes'", fused(trace="yes"), InputTypeError, "trace"),
    ("fused trace 1e9", fused(trace=10**9), SizeError, "trace"),
    ("fused trace -1", fused(trace=-1), InputError, "trace"),
    ("fused strategy unknown", fused(strategy="direct"), InputError, "strategy"),
    ("fused hw string", fused(hw="910b"), InputTypeError, "hw"),
    ("fused policy string", fused(policy="fp16"), InputTypeError, "policy"),
    ("fused tiling tuple", fused(tiling=(4, 4)), InputTypeError, "tiling"),
    ("fused checks int", fused(checks=3), InputTypeError, "checks"),
    ("fused x object", fused(x=OBJ), InputTypeError, "x"),
    ("fused w complex", fused(w=W.astype(np.complex128)), InputTypeError, "w"),
    ("conv_relu fused 'no'", relu(fused="no"), InputTypeError, "fused"),
    ("conv_relu bias complex", relu(bias=np.ones(16, np.complex64)), InputTypeError, "bias"),
    ("conv_relu trace 'no'", relu(trace="no"), InputTypeError, "trace"),
    ("conv_relu timing_only 1", relu(timing_only=1), InputTypeError, "timing_only"),
    (
        "fused bounded layer larger than bound",
        fused_bounded(x=np.ones((1, 16, 6, 6), np.float32), bound=canonicalize((1, 16, 6, 6), W.shape, 1, 1)),
        InputError,
        "bound",
    ),
    (
        "fused bounded x off the bound's shape",
        fused_bounded(x=np.ones((1, 16, 9, 9), np.float32)),
        InputError,
        "x",
    ),
    ("fused bounded tiling None", fused_bounded(tiling=None), InputTypeError, "tiling"),
    ("fused bounded fused 'no'", fused_bounded(fused="no"), InputTypeError, "fused"),
    ("fused bounded hw None string", fused_bounded(hw="tiny"), InputTypeError, "hw"),
    # ---- HardwareConfig / Assumed ------------------------------------------------------------------
    ("hw num_cores True", hwc(num_cores=True), ValueError, "num_cores"),
    ("hw num_cores string", hwc(num_cores="2"), ValueError, "num_cores"),
    ("hw num_cores float", hwc(num_cores=2.0), ValueError, "num_cores"),
    ("hw l1_bytes negative", hwc(l1_bytes=-1024), ValueError, "l1_bytes"),
    ("hw gm rate string", hwc(gm_bytes_per_cycle="32"), ValueError, "gm_bytes_per_cycle"),
    ("hw gm rate bool", hwc(gm_bytes_per_cycle=True), ValueError, "gm_bytes_per_cycle"),
    ("hw gm rate so low one DMA overflows", hwc(gm_bytes_per_cycle=1e-6), ConfigError, "gm_bytes_per_cycle"),
    (
        "hw chip rate so low a share overflows",
        hwc(chip_gm_bytes_per_cycle=1e-4, num_cores=8),
        ConfigError,
        "gm_bytes_per_cycle",
    ),
    (
        "hw L1->L0A rate too low",
        hwc(l1_to_l0a_bytes_per_cycle=1e-6),
        ConfigError,
        "l1_to_l0a_bytes_per_cycle",
    ),
    (
        "hw L1->L0B rate too low",
        hwc(l1_to_l0b_bytes_per_cycle=1e-6),
        ConfigError,
        "l1_to_l0b_bytes_per_cycle",
    ),
    (
        "hw L0C->UB rate too low",
        hwc(l0c_to_ub_bytes_per_cycle=1e-6),
        ConfigError,
        "l0c_to_ub_bytes_per_cycle",
    ),
    ("hw UB->GM rate too low", hwc(ub_to_gm_bytes_per_cycle=1e-6), ConfigError, "ub_to_gm_bytes_per_cycle"),
    ("hw L1->UB rate too low", hwc(l1_to_ub_bytes_per_cycle=1e-6), ConfigError, "l1_to_ub_bytes_per_cycle"),
    (
        "hw fixpipe rate too low",
        hwc(assumed=Assumed(fixpipe_bytes_per_cycle=1e-4)),
        ConfigError,
        "fixpipe_bytes_per_cycle",
    ),
    ("hw chip rate past float32", hwc(chip_gm_bytes_per_cycle=1e300), ConfigError, "chip_gm_bytes_per_cycle"),
    (
        "hw L1->L0A rate past 2**24",
        hwc(l1_to_l0a_bytes_per_cycle=2.0**30),
        ConfigError,
        "l1_to_l0a_bytes_per_cycle",
    ),
    ("hw cube_k_bytes divides to zero", hwc(cube_k_bytes=2), ConfigError, "cube_k_bytes"),
    ("hw cube_k_bytes odd", hwc(cube_k_bytes=6), ConfigError, "cube_k_bytes"),
    (
        "hw Mmad past int32",
        hwc(cube_m=1, cube_n=1, l0c_bytes=2**28, l0a_bytes=2**24, l0b_bytes=2**24),
        ConfigError,
        "Mmad",
    ),
    ("hw coupled 1", hwc(coupled=1), TypeError, "coupled"),
    ("hw coupled 'no'", hwc(coupled="no"), TypeError, "coupled"),
    ("hw overflow_mode int", hwc(overflow_mode=0), ValueError, "overflow_mode"),
    ("hw assumed dict", hwc(assumed={"mte2_startup": 1}), TypeError, "assumed"),
    ("hw vector_cores True", hwc(vector_cores=True), ValueError, "vector_cores"),
    ("hw name int", hwc(name=5), TypeError, "name"),
    ("Assumed startup fractional", assumed(mte2_startup=1.5), ConfigError, "mte2_startup"),
    ("Assumed startup past 2**20", assumed(mmad_startup=2**40), ConfigError, "mmad_startup"),
    ("Assumed burst overhead huge", assumed(gm_burst_overhead=10**9), ConfigError, "gm_burst_overhead"),
    ("Assumed launch_us nan", assumed(launch_us=math.nan), ConfigError, "launch_us"),
    ("hw launch past int32", hwc(assumed=Assumed(launch_us=1e9)), ConfigError, "launch_us"),
    ("hw L2 read rate too low", hwc(l2_read_bytes_per_cycle=1e-6), ConfigError, "l2_read_bytes_per_cycle"),
    ("hw L2 write rate too low", hwc(l2_write_bytes_per_cycle=1e-6), ConfigError, "l2_write_bytes_per_cycle"),
    ("Assumed startup negative", assumed(vector_startup=-1), ValueError, "vector_startup"),
    ("Assumed startup string", assumed(mte3_startup="64"), ValueError, "mte3_startup"),
    ("Assumed startup bool", assumed(mte1_startup=True), ValueError, "mte1_startup"),
    ("Assumed rate zero", assumed(ub_to_gm_bytes_per_cycle=0), ValueError, "ub_to_gm_bytes_per_cycle"),
    # ---- from_ini ----------------------------------------------------------------------------------
    ("ini empty file", ini(None), ConfigError, "no AI Core figure"),
    ("ini only comments", ini("; nothing here\n"), ConfigError, "no AI Core figure"),
    ("ini unrelated section", ini("[CPUCache]\nsize=1\n"), ConfigError, "no AI Core figure"),
    ("ini only ignored keys", ini("[AICoreSpec]\nub_block_size=32\n"), ConfigError, "no AI Core figure"),
    ("ini a directory", lambda tmp: HardwareConfig.from_ini(tmp), ConfigError, "path"),
    ("ini path an int", lambda tmp: HardwareConfig.from_ini(5), InputTypeError, "path"),
    ("ini path None", lambda tmp: HardwareConfig.from_ini(None), InputTypeError, "path"),
    ("ini binary file", ini(b"\xff\xfe\x00\x81binary"), ConfigError, "chip.ini"),
    ("ini rate too low", ini("[AICoreMemoryRates]\nddr_rate=0.000001\n"), ConfigError, "ddr_rate"),
    ("ini rate nan", ini("[AICoreMemoryRates]\nddr_rate=nan\n"), ValueError, "ddr_rate"),
    ("ini cores float", ini("[SoCInfo]\nai_core_cnt=2.5\n"), ConfigError, "ai_core_cnt"),
    ("ini duplicate section", ini("[SoCInfo]\nai_core_cnt=2\n[SoCInfo]\nai_core_cnt=3\n"), ValueError, "ini"),
    (
        "ini base wrong type",
        lambda tmp: HardwareConfig.from_ini(_ok_ini(tmp), base="910b"),
        TypeError,
        "base",
    ),
    # ---- round_to ----------------------------------------------------------------------------------
    ("round_to complex", rnd(x=np.array([1 + 2j])), InputTypeError, "x"),
    ("round_to complex scalar", rnd(x=1 + 2j), InputTypeError, "x"),
    ("round_to object array", rnd(x=OBJ), InputTypeError, "x"),
    ("round_to string", rnd(x="1.0"), InputTypeError, "x"),
    ("round_to None", rnd(x=None), InputTypeError, "x"),
    ("round_to string array", rnd(x=STRS), InputTypeError, "x"),
    ("round_to fmt unknown", rnd(fmt="fp17"), InputError, "fmt"),
    ("round_to fmt int", rnd(fmt=16), InputError, "fmt"),
    ("round_to mode unknown", rnd(mode="nearest"), InputError, "mode"),
    ("round_to mode int", rnd(mode=0), InputTypeError, "mode"),
    ("round_to overflow unknown", rnd(overflow="wrap"), InputError, "overflow"),
    ("round_to subnormals 'no'", rnd(subnormals="no"), InputTypeError, "subnormals"),
    ("round_to subnormals 0", rnd(subnormals=0), InputTypeError, "subnormals"),
    ("round_to stochastic without key", rnd(mode="stochastic"), InputError, "key"),
    # ---- compare -----------------------------------------------------------------------------------
    ("compare shapes differ", cmp(ref=A[:16]), InputError, "ref"),
    ("compare empty", cmp(out=A[:0], ref=A[:0]), InputError, "empty"),
    ("compare out complex", cmp(out=CPLX), InputTypeError, "out"),
    ("compare ref object", cmp(ref=np.array([[None] * 32] * 32)), InputTypeError, "ref"),
    ("compare out None", cmp(out=None), InputTypeError, "out"),
    ("compare ref string", cmp(ref="A"), InputTypeError, "ref"),
    ("compare out ragged list", cmp(out=[[1.0], [1.0, 2.0]], ref=[1.0, 2.0]), InputTypeError, "out"),
    ("compare floor zero", cmp(floor=0), InputError, "floor"),
    ("compare floor negative", cmp(floor=-1e-3), InputError, "floor"),
    ("compare floor nan", cmp(floor=math.nan), InputError, "floor"),
    ("compare floor inf", cmp(floor=math.inf), InputError, "floor"),
    ("compare floor above 1", cmp(floor=2.0), InputError, "floor"),
    ("compare floor string", cmp(floor="1e-3"), InputTypeError, "floor"),
    ("compare floor bool", cmp(floor=True), InputTypeError, "floor"),
    ("compare fmt unknown", cmp(fmt="fp17"), InputError, "fmt"),
    ("compare abs_ref shape", cmp(abs_ref=A[:1]), InputError, "abs_ref"),
    ("compare abs_ref complex", cmp(abs_ref=CPLX), InputTypeError, "abs_ref"),
    # ---- assert_precision and baseline files -------------------------------------------------------
    ("baseline not JSON", baseline_file("not json {"), InputError, "b.json"),
    ("baseline binary", baseline_file(b"\xff\xfe\x00\x81"), InputError, "b.json"),
    ("baseline a JSON list", baseline_file("[1, 2]"), InputError, "metrics"),
    ("baseline no metrics key", baseline_file('{"name": "b"}'), InputError, "metrics"),
    ("baseline metrics a list", baseline_file('{"metrics": [1]}'), InputError, "metrics"),
    ("baseline metrics unknown keys", baseline_file('{"metrics": {"speed": 1}}'), InputError, "metrics"),
    ("baseline metric a string", baseline_file('{"metrics": {"rel_l2": "small"}}'), InputError, "rel_l2"),
    ("baseline metric a bool", baseline_file('{"metrics": {"n_nan": true}}'), InputError, "n_nan"),
    ("baseline name with ..", ap(baseline="../escape"), InputError, "baseline"),
    ("baseline name with a slash", ap(baseline="sub/b"), InputError, "baseline"),
    ("baseline name absolute", ap(baseline="/etc/passwd"), InputError, "baseline"),
    ("baseline name int", ap(baseline=5), InputError, "baseline"),
    ("baseline name empty", ap(baseline=""), InputError, "baseline"),
    ("baseline missing", ap(baseline="nope"), FileNotFoundError, "nope"),
    (
        "assert_precision result None",
        lambda tmp: precision.assert_precision(None, "b"),
        InputTypeError,
        "result",
    ),
    ("assert_precision result a string", ap(result="m"), InputTypeError, "result"),
    ("assert_precision result 1-tuple", ap(result=(A,)), InputTypeError, "result"),
    ("assert_precision rtol negative", ap(rtol=-0.1), InputError, "rtol"),
    ("assert_precision rtol string", ap(rtol="5%"), InputTypeError, "rtol"),
    ("assert_precision update 'yes'", ap(update="yes"), InputTypeError, "update"),
    (
        "assert_precision directory a file",
        lambda tmp: precision.assert_precision(precision.compare(A, A), "b", directory=_ok_ini(tmp)),
        InputError,
        "directory",
    ),
    (
        "Budget limit a string",
        lambda tmp: precision.Budget("b", max_={"rel_l2": "1e-3"}),
        InputError,
        "rel_l2",
    ),
    ("Budget limit nan", lambda tmp: precision.Budget("b", min_={"cosine": math.nan}), InputError, "cosine"),
    ("Budget unknown metric", lambda tmp: precision.Budget("b", max_={"speed": 1}), InputError, "speed"),
    (
        "assert_within_budget unknown name",
        lambda tmp: precision.assert_within_budget(precision.compare(A, A), "nope"),
        InputError,
        "budget",
    ),
    (
        "assert_within_budget metrics a tuple",
        lambda tmp: precision.assert_within_budget((A, A), "nope"),
        InputTypeError,
        "metrics",
    ),
    # ---- tile_search -------------------------------------------------------------------------------
    ("search steps string", search(steps="3"), InputTypeError, "steps"),
    ("search steps float", search(steps=3.0), InputTypeError, "steps"),
    ("search steps True", search(steps=True), InputTypeError, "steps"),
    ("search steps zero", search(steps=0), InputError, "steps"),
    ("search steps huge", search(steps=10**9), InputError, "steps"),
    ("search seed past 63 bits", search(seed=2**64), InputError, "seed"),
    ("search seed 2**70", search(seed=2**70), InputError, "seed"),
    ("search seed negative", search(seed=-1), InputError, "seed"),
    ("search seed string", search(seed="0"), InputTypeError, "seed"),
    ("search seed float", search(seed=1.5), InputTypeError, "seed"),
    ("search seed None", search(seed=None), InputTypeError, "seed"),
    ("search max_evals zero", search(max_evals=0), InputError, "max_evals"),
    ("search max_evals string", search(max_evals="100"), InputTypeError, "max_evals"),
    ("search max_evals True", search(max_evals=True), InputTypeError, "max_evals"),
    ("search max_evals 2**40", search(max_evals=2**40), InputError, "max_evals"),
    ("search max_evals float", search(max_evals=100.0), InputTypeError, "max_evals"),
    ("search starts zero", search(starts=0), InputError, "starts"),
    ("search starts string", search(starts="8"), InputTypeError, "starts"),
    ("search round_every zero", search(round_every=0), InputError, "round_every"),
    ("search finalists negative", search(finalists=-1), InputError, "finalists"),
    ("search finalists string", search(finalists="2"), InputTypeError, "finalists"),
    ("search width zero", search(width=0), InputError, "width"),
    ("search budget zero", search(budget=0), InputError, "budget"),
    ("search budget above 1", search(budget=2.0), InputError, "budget"),
    ("search budget nan", search(budget=math.nan), InputError, "budget"),
    ("search budget string", search(budget="1%"), InputTypeError, "budget"),
    ("search learning_rate zero", search(learning_rate=0.0), InputError, "learning_rate"),
    ("search learning_rate inf", search(learning_rate=math.inf), InputError, "learning_rate"),
    ("search objective unknown", search(objective="energy"), InputError, "objective"),
    ("search objective int", search(objective=1), InputTypeError, "objective"),
    ("search fused 'no'", search(fused="no"), InputTypeError, "fused"),
    ("search verify 1", search(verify=1), InputTypeError, "verify"),
    ("search optimizer string", search(optimizer="adam"), InputTypeError, "optimizer"),
    ("search hw string", search(hw="910b"), InputTypeError, "hw"),
    ("search x_shape strings", search(x_shape=("1", "16", "8", "8")), InputTypeError, "x shape"),
    ("search x_shape int", search(x_shape=5), InputTypeError, "x shape"),
    ("search w_shape floats", search(w_shape=(16.0, 16, 3, 3)), InputTypeError, "w shape"),
    ("search padding string", search(padding="FULL"), InputError, "padding"),
    # ---- the allocation limit ----------------------------------------------------------------------
    ("set_max_bytes zero", lambda tmp: npu_jax.set_max_bytes(0), InputError, "n"),
    ("set_max_bytes string", lambda tmp: npu_jax.set_max_bytes("8GB"), InputTypeError, "n"),
    ("set_max_bytes float", lambda tmp: npu_jax.set_max_bytes(1e9), InputTypeError, "n"),
    ("matmul over a lowered limit", lambda tmp: _under_limit(mm(), 1024)(tmp), SizeError, "set_max_bytes"),
    (
        "conv over a lowered limit",
        lambda tmp: _under_limit(conv(), 1024)(tmp),
        SizeError,
        "NPU_JAX_MAX_BYTES",
    ),
    # ---- found by a second reader: one row per kind ----------------------
    # sizes estimated before anything is materialised: a broadcast view of tens of GB is refused, not copied
    (
        "conv x a 25 GB view",
        conv(x=np.broadcast_to(np.float32(1), (1, 16, 20000, 20000))),
        SizeError,
        "x (1, 16",
    ),
    ("matmul a 40 GB view", mm(a=np.broadcast_to(np.float32(1), (10**5, 10**5))), SizeError, "a (100000"),
    (
        "conv_fused bias 8 GB view",
        fused(("bias",), bias=np.broadcast_to(np.float32(1), (2 * 10**9,))),
        SizeError,
        "bias",
    ),
    (
        "analyze a 128 TiB layer",
        lambda tmp: fusion.analyze((2**20, 16, 2**10, 2**10), (16, 16, 3, 3)),
        SizeError,
        "analyze",
    ),
    (
        "tile_search a space of 1e10 tilings",
        search(x_shape=(1, 2**14, 2**12, 2**12), w_shape=(2**14, 2**14, 3, 3)),
        SizeError,
        "candidate tilings",
    ),
    (
        "run_experiments depth 1e8",
        lambda tmp: precision.run_experiments(depths=(10**8,)),
        SizeError,
        "layers",
    ),
    # bools and numbers: a string or a bool where the other is asked
    (
        "ConvTiling weights_resident 'no'",
        lambda tmp: ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, weights_resident="no"),
        TilingError,
        "weights_resident",
    ),
    (
        "ConvTiling weights_resident 2",
        lambda tmp: ConvTiling(ho=4, wo=4, n=16, cin1=1, k_l0=16, weights_resident=2),
        TilingError,
        "weights_resident",
    ),
    ("epilogue leaky slope True", fused([("leaky_relu", True)]), InputError, "slope"),
    ("epilogue clipped ceiling True", fused([("clipped_relu", True)]), InputError, "ceiling"),
    ("epilogue leaky slope '0.1'", fused([("leaky_relu", "0.1")]), InputError, "slope"),
    (
        "run_experiments depths 2.5",
        lambda tmp: precision.run_experiments(depths=(2.5,)),
        InputTypeError,
        "depths",
    ),
    (
        "run_experiments depths True",
        lambda tmp: precision.run_experiments(depths=(True,)),
        InputTypeError,
        "depths",
    ),
    (
        "run_experiments depths '4'",
        lambda tmp: precision.run_experiments(depths="4"),
        InputTypeError,
        "depths",
    ),
    # every public call checks its own arguments (no AttributeError / KeyError from inside)
    (
        "analyze hw string",
        lambda tmp: fusion.analyze((1, 16, 8, 8), (16, 16, 3, 3), hw="tiny"),
        InputTypeError,
        "hw",
    ),
    (
        "analyze policy string",
        lambda tmp: fusion.analyze((1, 16, 8, 8), (16, 16, 3, 3), policy="fp16"),
        InputTypeError,
        "policy",
    ),
    (
        "analyze unknown strategy",
        lambda tmp: fusion.analyze((1, 16, 8, 8), (16, 16, 3, 3), strategy="x"),
        InputError,
        "strategy",
    ),
    (
        "analyze unknown epilogue",
        lambda tmp: fusion.analyze((1, 16, 8, 8), (16, 16, 3, 3), ["nope"]),
        InputError,
        "epilogue",
    ),
    (
        "analyze name int",
        lambda tmp: fusion.analyze((1, 16, 8, 8), (16, 16, 3, 3), name=5),
        InputTypeError,
        "name",
    ),
    (
        "analyze trace string",
        lambda tmp: fusion.analyze((1, 16, 8, 8), (16, 16, 3, 3), trace="x"),
        InputTypeError,
        "trace",
    ),
    ("reference_table hws string", lambda tmp: fusion.reference_table("tiny"), InputTypeError, "hws"),
    ("reference_table hws of strings", lambda tmp: fusion.reference_table(("tiny",)), InputTypeError, "hw"),
    ("format_table rows of ints", lambda tmp: fusion.format_table([1]), InputTypeError, "rows"),
    ("cost.cycles g tuple", lambda tmp: npu_jax.cost.cycles((1, 2), T, HW), InputTypeError, "g"),
    ("cost.cycles t tuple", lambda tmp: npu_jax.cost.cycles(G, (4, 4), HW), InputTypeError, "t must"),
    ("cost.cycles hw string", lambda tmp: npu_jax.cost.cycles(G, T, "tiny"), InputTypeError, "hw"),
    ("cost.cycles unknown strategy", lambda tmp: npu_jax.cost.cycles(G, T, HW, "x"), InputError, "strategy"),
    (
        "cost.cycles operand fp64",
        lambda tmp: npu_jax.cost.cycles(G, T, HW, operand="fp64"),
        InputError,
        "operand",
    ),
    ("cost.predict a string", lambda tmp: npu_jax.cost.predict("plan"), InputTypeError, "p must"),
    ("round_to key int", rnd(mode="stochastic", key=5), InputTypeError, "key"),
    ("round_to key string", rnd(mode="stochastic", key="k"), InputTypeError, "key"),
    ("round_to key float array", rnd(mode="stochastic", key=np.zeros(2, np.float32)), InputTypeError, "key"),
    ("compare abs_ref negative", cmp(abs_ref=-np.ones((32, 32))), InputError, "abs_ref"),
    ("compare abs_ref NaN", cmp(abs_ref=np.full((32, 32), np.nan)), InputError, "abs_ref"),
    (
        "baseline metric 1e400 int",
        baseline_file('{"metrics": {"rel_l2": 1' + "0" * 400 + "}}"),
        InputError,
        "rel_l2",
    ),
    (
        "baseline metric of 5000 digits",
        baseline_file('{"metrics": {"rel_l2": 1' + "0" * 5000 + "}}"),
        InputError,
        "5001 digits",
    ),
    ("baseline nested 1e5 deep", baseline_file("[" * 100000 + "]" * 100000), InputError, "update-baselines"),
    ("set_default_checks unknown name", lambda tmp: npu_jax.set_default_checks("bogus"), InputError, "bogus"),
    ("set_default_checks an int", lambda tmp: npu_jax.set_default_checks(5), InputTypeError, "checks"),
    ("StackSpec depth True", lambda tmp: precision.StackSpec(depth=True), InputTypeError, "depth"),
    ("StackSpec channels 0", lambda tmp: precision.StackSpec(channels=0), InputError, "channels"),
    ("StackSpec gain NaN", lambda tmp: precision.StackSpec(gain=math.nan), InputError, "gain"),
    ("StackSpec seed past 63 bits", lambda tmp: precision.StackSpec(seed=2**70), InputError, "seed"),
    (
        "run_experiments unknown strategy",
        lambda tmp: precision.run_experiments((2,), ("x",)),
        InputError,
        "strategies",
    ),
    (
        "run_experiments unknown scenario",
        lambda tmp: precision.run_experiments((2,), scenarios=("x",)),
        InputError,
        "scenarios",
    ),
    (
        "run_strategy spec a string",
        lambda tmp: precision.run_strategy("fp16", "spec"),
        InputTypeError,
        "spec",
    ),
    (
        "run_strategy period 0",
        lambda tmp: precision.run_strategy("fp16", precision.StackSpec(depth=2), period=0),
        InputError,
        "period",
    ),
    (
        "run_strategy iterations True",
        lambda tmp: precision.run_strategy("fp16", precision.StackSpec(depth=2), iterations=True),
        InputTypeError,
        "iterations",
    ),
    ("layer_bounds K negative", lambda tmp: precision.layer_bounds(-5), InputError, "K"),
    ("layer_bounds K string", lambda tmp: precision.layer_bounds("576"), InputTypeError, "K"),
    ("layer_bounds policy string", lambda tmp: precision.layer_bounds(576, "fp16"), InputTypeError, "policy"),
    (
        "layer_budget unknown kind",
        lambda tmp: precision.layer_budget("x", precision.layer_bounds(576), kind="x"),
        InputError,
        "kind",
    ),
    ("layer_budget bounds a float", lambda tmp: precision.layer_budget("x", 0.1), InputTypeError, "bounds"),
    ("NPU_JAX_MAX_BYTES inf", lambda tmp: _env_limit("inf", mm()), InputError, "NPU_JAX_MAX_BYTES"),
]


def _ok_ini(tmp):
    p = tmp / "ok.ini"
    p.write_text("[SoCInfo]\nai_core_cnt=2\n")
    return p


def _env_limit(value, call):
    """``call`` with NPU_JAX_MAX_BYTES set to ``value`` for that call only."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NPU_JAX_MAX_BYTES", value)
        return call(None)


def _under_limit(call, n):
    def run(tmp):
        with npu_jax.set_max_bytes(n):
            return call(tmp)

    return run


def test_at_least_150_named_cases():
    assert len(CASES) >= 150 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_more(case, tmp_path):
    name, call, err, param = case
    with pytest.raises(err) as info:
        call(tmp_path)
    assert param in str(info.value), f"{name}: the message does not name {param!r}: {info.value}"
    # the package's own types wherever the validation layer raised
    if err in (InputError, InputTypeError, SizeError, ConfigError, TilingError):
        assert isinstance(info.value, NpuError)


def test_numpy_bools_and_ints_are_accepted():
    """What the checks must not refuse: numpy bools where a bool is asked, numpy ints where a count is."""
    from npu_jax.errors import check_bool, check_int

    assert check_bool("f", "flag", np.True_) is True and check_bool("f", "flag", np.bool_(False)) is False
    assert check_int("f", "n", np.int64(7), 0, 10) == 7 and check_int("f", "n", np.uint8(3)) == 3
    assert precision.compare(np.zeros(4), np.zeros(4)).rel_l2 == 0.0
    import jax.numpy as jnp

    from npu_jax.api.validate import as_array

    assert as_array("f", "x", jnp.ones(3, jnp.bfloat16)).dtype == jnp.bfloat16  # bf16 is numpy kind 'V'


# ---- gradients: refused with GradientError, never zeros in silence (docs/errors.md) ----------------
def _grad_cases():
    import jax
    import jax.numpy as jnp

    b = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)  # any values: refused
    return {
        "matmul grad": lambda: jax.grad(lambda a: npu_jax.matmul(a, b, hw=HW)[0].astype(jnp.float32).sum())(
            A
        ),
        "matmul grad wrt b": lambda: jax.grad(lambda y: npu_jax.matmul(A, y, hw=HW)[0].sum())(b),
        "matmul jvp": lambda: jax.jvp(lambda a: npu_jax.matmul(a, b, hw=HW)[0], (A,), (A,)),
        "conv2d grad": lambda: jax.grad(
            lambda x: npu_jax.conv2d(x, W, padding=1, hw=HW, tiling=T)[0].astype(jnp.float32).sum()
        )(X),
        "conv_relu grad wrt bias": lambda: jax.grad(
            lambda c: fusion.conv_relu(X, W, bias=c, padding=1, hw=HW, tiling=T)[0].astype(jnp.float32).sum()
        )(np.ones(16, np.float32)),
        "conv2d_bounded grad": lambda: jax.grad(
            lambda w: (
                npu_jax.conv2d_bounded(X, w, G, bound=G, strategy="img2col", tiling=T, hw=HW)[0]
                .astype(jnp.float32)
                .sum()
            )
        )(W),
    }


@pytest.mark.parametrize("name", list(_grad_cases()))
def test_gradients_are_refused(name):
    from npu_jax.errors import GradientError

    with pytest.raises(GradientError, match="differentiation") as info:
        _grad_cases()[name]()
    assert name.split()[0].replace("conv_relu", "conv2d_fused") in str(info.value)


def test_stop_gradient_inputs_still_differentiate_around_the_kernel(rng):
    """The refusal fires only where a gradient would flow through the kernel."""
    import jax
    import jax.numpy as jnp

    a = rng.standard_normal((32, 32)).astype(np.float32)

    def f(a):
        c, _ = npu_jax.matmul(jax.lax.stop_gradient(a), A, hw=HW, checks="none")
        return jnp.sum(c.astype(jnp.float32)) + jnp.sum(a * a)

    assert np.allclose(jax.grad(f)(a), 2 * a)


# ---- silently wrong answers found by a second reader: now right -----------------------------------
@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e-310])
def test_compare_norms_do_not_overflow_or_underflow(scale, rng):
    """rel_l2 of a 1% error is 1% at any magnitude: a plain sum of squares overflowed past 1e154 (NaN
    from finite inputs) and underflowed below 1e-162 (a 1% error reported as an exact match)."""
    ref = (1.0 + rng.random(100)) * scale
    m = precision.compare(ref * 1.01, ref)
    assert m.rel_l2 == pytest.approx(0.01, rel=1e-3) and m.cosine == pytest.approx(1.0)
    assert precision.compare(ref, ref).rel_l2 == 0.0


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_a_nonfinite_baseline_metric_matches_only_itself(value, tmp_path):
    """A tolerance around inf or NaN passed any result: now a finite result drifts from it."""
    (tmp_path / "b.json").write_text('{"metrics": {"rel_l2": V, "max_abs": V}}'.replace("V", value))
    m = precision.compare(A * (1 + 1e-3), A)
    with pytest.raises(AssertionError, match="rel_l2"):
        precision.assert_precision(m, baseline="b", directory=tmp_path)


def test_stochastic_round_to_takes_typed_and_legacy_keys_under_vmap():
    keys = jax.random.split(jax.random.key(0), 3)
    r = jax.vmap(lambda k: precision.round_to(np.float32([1 + 2**-12]), "fp16", "stochastic", key=k))(keys)
    assert r.shape == (3, 1)
    assert precision.round_to(np.float32([1.0]), "fp16", "stochastic", key=jax.random.PRNGKey(1)).shape == (
        1,
    )


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["search", "--finalists", "-1"], "--finalists"),
        (["search", "--seed", "-1"], "--seed"),
        (["search", "--seed", str(2**64)], "--seed"),
        (["matmul", "--m", "16", "--n", "16", "--k", "16", "--json", "/proc/npu-jax-test.json"], "--json"),
        (["precision", "--update-baselines", "--baselines-dir", "FILE"], "--baselines-dir"),
    ],
)
def test_cli_refuses_before_any_work(argv, flag, tmp_path, capsys):
    """Checked when parsed (exit 2, one line naming the flag): a negative --finalists used to be clamped
    to 0 in silence, a bad --seed was found after the search started, and an unwritable output path
    (as root, os.access says yes to /proc) after the run."""
    f = tmp_path / "f.json"
    f.write_text("keep")
    assert cli.main([str(f) if a == "FILE" else a for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert flag in err[-1] and "Traceback" not in "".join(err)
    assert f.read_text() == "keep"

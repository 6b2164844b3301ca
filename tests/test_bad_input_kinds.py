"""The bad inputs an outside run still found, fixed at their kind (issue "A front page a newcomer
trusts", items 5 and 6), one rule each in the place that owns it:

* derived figures that overflow: every figure of a HardwareConfig has a legal range
  (``npu_jax/hw/limits.py``), so a time in us, TFLOP/s or a launch's cycles is never inf and no
  OverflowError comes from deep inside -- from Python, a preset's ``replace`` or a platform ini;
* Python ints of any size are numbers to ``round_to``: rounded once, correctly (int64 past 2**53
  too), inf or max per ``overflow`` past the format (``npu_jax/core/rounding.py``);
* platform ini files: aliases that disagree, integral floats for integer fields, a byte-order mark
  (``npu_jax/hw/ini.py``);
* ``NPU_JAX_CHECKS``: read when used, an unknown value refused by name (``checks/config.py``);
* compiled programs bounded by bytes as well as by count (``npu_jax/core/programs.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

import jax
import ml_dtypes
import numpy as np
import pytest

import npu_jax
import precision
from npu_jax import Assumed, HardwareConfig, presets
from npu_jax.core import programs
from npu_jax.core import rounding as core_rounding
from npu_jax.core.checks import config as checks_config
from npu_jax.errors import ConfigError, InputTypeError, NpuError
from npu_jax.hw.limits import CLOCK_GHZ_RANGE, show

# ---- derived figures that overflow ------------------------------------------------------------------
ABSURD = (10**400, -(10**400), 2**70, 1e308, 1e300, 5e-324, 1e-300, -0.0)
NUMERIC = [
    f.name
    for f in dataclasses.fields(HardwareConfig)
    if f.name not in ("name", "coupled", "overflow_mode", "assumed")
]


def _derived(hw: HardwareConfig) -> list[float]:
    """Every figure HardwareConfig derives from its fields (a Report's time in us divides cycles by
    ``clock_ghz * 1e3``: the largest int64 count of cycles stands for any run)."""
    return [
        hw.peak_tflops("fp16"),
        hw.launch_cycles,
        hw.gm_rate(hw.num_cores),
        hw.l0b_rate,
        hw.ub_to_gm_rate,
        hw.l2_write_rate,
        (2**63 - 1) / (hw.clock_ghz * 1e3),
    ]


@pytest.mark.parametrize("field", NUMERIC)
@pytest.mark.parametrize("value", ABSURD, ids=repr)
def test_an_absurd_figure_is_refused_by_name_or_all_derived_figures_stay_finite(field, value):
    base = presets.ascend910b()
    try:
        hw = base.replace(**{field: value})
    except (ValueError, TypeError) as e:  # ConfigError is a ValueError; never OverflowError, ZeroDivision
        assert field in str(e), str(e)
        assert len(str(e)) < 600, "a 400-digit int is named by its size, not printed"
        return
    assert all(math.isfinite(v) for v in _derived(hw)), (field, value, _derived(hw))


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Assumed)])
@pytest.mark.parametrize("value", ABSURD, ids=repr)
def test_an_absurd_assumed_figure_is_refused_by_name_or_stays_finite(field, value):
    try:
        hw = presets.ascend910b().replace(assumed=Assumed(**{field: value}))
    except (ValueError, TypeError) as e:
        assert field in str(e), str(e)
        return
    assert all(math.isfinite(v) for v in _derived(hw))


@pytest.mark.parametrize("clock", [1e308, 1e4, 1e-4, 1e-300, 5e-324, 10**400])
def test_an_absurd_clock_names_the_field_the_value_and_the_range(clock):
    with pytest.raises(ConfigError, match=r"clock_ghz must be between 0\.001 and 1000 GHz .*got ") as e:
        presets.ascend910b().replace(clock_ghz=clock)
    assert str(e.value).endswith(f"got {show(clock)}."), str(e.value)  # 10**400: "an int of 1329 bits"


def test_the_clock_range_ends_are_legal_and_a_run_at_the_slowest_has_a_finite_time(rng):
    lo, hi = CLOCK_GHZ_RANGE
    assert presets.tiny().replace(clock_ghz=hi).launch_cycles == round(2.0 * 1e3 * hi)
    a, b = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(2))
    _, rep = npu_jax.matmul(a, b, hw=presets.tiny().replace(clock_ghz=lo), checks="none")
    assert math.isfinite(rep.time_us) and rep.time_us == pytest.approx(rep.cycles / (lo * 1e3))


def _ini(tmp_path, text: str, encoding: str = "utf-8"):
    path = tmp_path / "chip.ini"
    path.write_text(text, encoding=encoding)
    return path


def test_an_ini_clock_of_1e308_mhz_is_refused_by_name_not_an_overflow(tmp_path):
    path = _ini(tmp_path, "[AICoreSpec]\ncube_freq = 1e308\n")
    with pytest.raises(ConfigError) as e:
        HardwareConfig.from_ini(path)
    msg = str(e.value)
    assert "clock_ghz must be between 0.001 and 1000 GHz" in msg and "cube_freq = 1e308 MHz" in msg, msg


# ---- Python ints of any size to round_to ------------------------------------------------------------
ROUNDERS = {"precision": precision.round_to, "core": core_rounding.round_to}


@pytest.mark.parametrize("round_to", ROUNDERS.values(), ids=ROUNDERS.keys())
@pytest.mark.parametrize(
    "x, overflow, want",
    [
        (2**70, "inf", np.inf),
        (-(2**70), "inf", -np.inf),
        (2**70, "saturate", 65504.0),
        (-(10**400), "saturate", -65504.0),
        (10**400, "inf", np.inf),
        (2**64, "inf", np.inf),
    ],
    ids=repr,
)
def test_a_huge_python_int_is_a_number(round_to, x, overflow, want):
    got = round_to(x, "fp16", overflow=overflow)
    assert got.dtype == np.float16 and float(got) == want


@pytest.mark.parametrize("round_to", ROUNDERS.values(), ids=ROUNDERS.keys())
def test_a_list_mixing_huge_ints_and_floats_is_rounded_elementwise(round_to):
    got = np.asarray(round_to([[2**70, 1.5], [-3, -(2**100)]], "fp32", "toward_zero"))
    f32max = float(np.finfo(np.float32).max)
    assert got.shape == (2, 2)
    assert got.tolist() == [[float(np.float32(2.0**70)), 1.5], [-3.0, float(np.float32(-(2.0**100)))]]
    assert float(round_to(10**400, "fp32", "toward_zero")) == f32max
    assert float(round_to(-(10**400), "fp32", "up")) == -f32max
    assert float(round_to(-(10**400), "fp32", "down")) == -np.inf


def _neighbours(n: int, dtype):
    """The representable values of ``dtype`` around the int ``n``: exact rationals, by search."""
    c = np.array([float(n)]).astype(dtype)
    inf = np.array([np.inf], dtype)
    vals = {float(v[0]): v[0] for v in (c, np.nextafter(c, inf), np.nextafter(c, -inf))}
    return [v for v in vals.values() if np.isfinite(v)]


def _reference(n: int, dtype, mode: str):
    """``n`` rounded to ``dtype`` from exact rational distances (another algorithm than round_to's)."""
    cands = [(Fraction(float(v)), v) for v in _neighbours(n, dtype)]
    if mode == "toward_zero":
        return max((c for c in cands if abs(c[0]) <= abs(n)), key=lambda c: abs(c[0]))[1]

    def key(c):  # nearest, ties to the even bit pattern
        bits = int(np.asarray(c[1]).view(np.uint16 if np.dtype(dtype).itemsize == 2 else np.uint32))
        return (abs(c[0] - n), bits & 1)

    return min(cands, key=key)[1]


@pytest.mark.parametrize("fmt, dtype", [("fp32", np.float32), ("bf16", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero"])
def test_ints_past_2_53_are_rounded_once_not_twice(fmt, dtype, mode, rng):
    p = 24 if fmt == "fp32" else 8
    ints = []
    for _ in range(40):  # just above or below a midpoint of the target: where double rounding errs
        e = int(rng.integers(54, 120))
        top = int(rng.integers(1 << (p - 1), 1 << p))
        mid = (2 * top + 1) << (e - p - 1)  # a midpoint between two neighbours of the format
        ints.append(mid + int(rng.choice([-1, 1])) * int(rng.integers(1, 1 << 10)))
    ints += [2**60 + 2**36 + 1, 2**60 + 2**52 + 1, -(2**60 + 2**36 + 1)]
    want = np.array([_reference(n, dtype, mode) for n in ints], dtype)
    got = np.asarray(precision.round_to(ints, fmt, mode))  # a list holding ints past 64 bits
    np.testing.assert_array_equal(got, want)
    small = [n for n in ints if abs(n) < 2**63]
    got64 = np.asarray(precision.round_to(np.array(small, np.int64), fmt, mode))
    np.testing.assert_array_equal(got64, np.array([_reference(n, dtype, mode) for n in small], dtype))


@pytest.mark.parametrize(
    "x, named",
    [
        (np.array([[1.0, None]], dtype=object), "element 1 is NoneType"),
        ([2**70, "a"], "element 1 is str"),
        (np.array([2**70, 1 + 2j], dtype=object), "element 1 is complex"),
    ],
)
def test_an_array_of_things_other_than_real_numbers_is_refused_naming_one(x, named):
    with pytest.raises(InputTypeError, match=rf"round_to: x must be a numeric array, got dtype .*{named}"):
        precision.round_to(x, "fp16")


# ---- platform ini files ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, first, second",
    [
        (
            "[SoCInfo]\nai_core_cnt = 24\ncube_core_cnt = 20\n",
            "ai_core_cnt = 24 in [SoCInfo] (line 2)",
            "cube_core_cnt = 20 in [SoCInfo] (line 3)",
        ),
        (
            "[AICoreMemoryRates]\nl2_rate = 110\nl2_read_rate = 64\n",
            "l2_rate = 110 in [AICoreMemoryRates] (line 2)",
            "l2_read_rate = 64 in [AICoreMemoryRates] (line 3)",
        ),
        (
            "[SoCInfo]\nai_core_cnt = 24\n[AICoreSpec]\nai_core_cnt = 20\n",
            "ai_core_cnt = 24 in [SoCInfo] (line 2)",
            "ai_core_cnt = 20 in [AICoreSpec] (line 4)",
        ),
    ],
)
def test_two_ini_keys_setting_one_field_differently_are_refused_naming_both(tmp_path, text, first, second):
    with pytest.raises(ConfigError) as e:
        HardwareConfig.from_ini(_ini(tmp_path, text))
    msg = str(e.value)
    assert first in msg and second in msg and "different values" in msg, msg


def test_two_ini_keys_that_agree_are_accepted(tmp_path):
    hw = HardwareConfig.from_ini(_ini(tmp_path, "[SoCInfo]\nai_core_cnt = 20\ncube_core_cnt = 20.0\n"))
    assert hw.num_cores == 20


@pytest.mark.parametrize("raw", ["524288.0", "5.24288e5", "524288", " 524288.000 "])
def test_an_integral_float_for_an_integer_ini_field_is_accepted(tmp_path, raw):
    hw = HardwareConfig.from_ini(_ini(tmp_path, f"[AICoreSpec]\nl1_size = {raw}\n"))
    assert hw.l1_bytes == 524288 and isinstance(hw.l1_bytes, int)


@pytest.mark.parametrize(
    "raw, msg",
    [
        ("524288.5", r"'l1_size' in \[AICoreSpec\] must be a finite whole number of bytes \(l1_bytes\), "
         r"got '524288.5'; give an integer such as 524288"),
        ("inf", r"'l1_size' in \[AICoreSpec\] must be a finite whole number of bytes"),
        ("nan", r"'l1_size' in \[AICoreSpec\] must be a finite whole number of bytes"),
        ("1e999999999", r"'l1_size' in \[AICoreSpec\] = '1e999999999' has more than 100 digits"),
        ("1e30", r"HardwareConfig\.l1_bytes must be between 1 and 2\*\*48 .*from l1_size = 1e30"),
        ("lots", r"'l1_size' in \[AICoreSpec\] must be a number, got 'lots'"),
    ],
)  # fmt: skip
def test_a_non_integral_ini_figure_is_refused_clearly(tmp_path, raw, msg):
    with pytest.raises(ConfigError, match=msg):
        HardwareConfig.from_ini(_ini(tmp_path, f"[AICoreSpec]\nl1_size = {raw}\n"))


def test_an_ini_with_a_byte_order_mark_is_read(tmp_path):
    path = _ini(tmp_path, "[SoCInfo]\nai_core_cnt = 20\n", encoding="utf-8-sig")
    assert path.read_bytes()[:3] == b"\xef\xbb\xbf"
    assert HardwareConfig.from_ini(path).num_cores == 20


# ---- NPU_JAX_CHECKS ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, said",
    [
        ("bogus", "unknown name 'bogus'"),
        ("racecheck,memchek", "unknown name 'memchek' (did you mean 'memcheck'?)"),
        ("racecheck;memcheck", "unknown name 'racecheck;memcheck'"),
        ("all,none", "'all' and 'none' stand alone"),
        ("1", "unknown name '1'"),
    ],
)
def test_an_unknown_npu_jax_checks_is_refused_naming_variable_value_and_choices(value, said):
    with pytest.raises(ConfigError) as e:
        checks_config.checks_from_env({"NPU_JAX_CHECKS": value})
    msg = str(e.value)
    assert f"NPU_JAX_CHECKS={value!r}" in msg and said in msg, msg
    for accepted in ("'all'", "'none'", "racecheck", "memcheck", "initcheck", "synccheck"):
        assert accepted in msg


@pytest.mark.parametrize(
    "value, enabled",
    [
        ("", set()),
        ("none", set()),
        ("OFF", set()),
        ("all", set(checks_config.CHECK_NAMES)),
        ("true", set(checks_config.CHECK_NAMES)),
        (" racecheck , synccheck ", {"racecheck", "synccheck"}),
    ],
)
def test_the_accepted_npu_jax_checks_values(value, enabled):
    assert checks_config.checks_from_env({"NPU_JAX_CHECKS": value}).enabled == enabled


def test_npu_jax_checks_set_after_import_is_read_and_a_bad_one_refused(monkeypatch):
    # the test suite chose "all" (conftest): a bad variable is refused even so, at the next use
    monkeypatch.setenv("NPU_JAX_CHECKS", "memchek")
    with pytest.raises(ConfigError, match=r"NPU_JAX_CHECKS='memchek'.*did you mean 'memcheck'"):
        npu_jax.Checks.parse(None)
    # with no choice made, a good value set now is what checks=None means
    monkeypatch.setenv("NPU_JAX_CHECKS", "initcheck")
    monkeypatch.setattr(checks_config, "_DEFAULT", [None])
    assert npu_jax.Checks.parse(None).enabled == {"initcheck"}


# ---- compiled programs bounded by bytes ---------------------------------------------------------------
def _fake_rss(step: int):
    """An RSS that grows ``step`` bytes at every read (a compile between reads), and does not fall."""
    state = {"rss": 100 << 20}

    def rss():
        state["rss"] += step
        return state["rss"]

    return rss


def test_a_byte_bound_purges_before_the_next_compile():
    cache = programs._Cache(maxsize=64, max_bytes=25 << 20, rss=_fake_rss(10 << 20))
    fns = [functools.partial(lambda i, x: x * i + 1, i) for i in range(5)]
    for i, f in enumerate(fns):
        assert int(cache.get(("k", i), f)(np.int32(3))) == 3 * i + 1
    # reads at each miss: 0 (baseline), 10, 20, 30 MB > 25 -> purge (baseline again), 10
    assert cache.purges == 1 and len(cache.entries) == 2 and cache.evictions == 0
    # a kept program is served without a read or a purge
    assert int(cache.get(("k", 4), fns[4])(np.int32(2))) == 9 and cache.purges == 1


def test_where_rss_cannot_be_read_programs_are_counted_at_the_estimate():
    cache = programs._Cache(maxsize=64, max_bytes=3 * programs._PROGRAM_BYTES_ESTIMATE, rss=lambda: None)
    for i in range(5):
        cache.get(("k", i), functools.partial(lambda i, x: x + i, i))
    assert cache.purges == 1 and len(cache.entries) == 1


def test_a_tiny_byte_bound_keeps_fewer_real_programs(monkeypatch):
    old = programs.program_cache_info()["max_bytes"]
    npu_jax.clear_program_cache()
    npu_jax.set_program_cache_bytes(0)
    # RSS as the bound reads it, growing 1 MB a reading: a small compile may reuse freed pages and grow
    # the real RSS by nothing (more so after an earlier test's purge), which would keep every program
    readings = iter(range(1 << 30, 1 << 40, 1 << 20))
    monkeypatch.setattr(programs._CACHE, "rss", lambda: next(readings))
    monkeypatch.setattr(programs._CACHE, "baseline", None)
    try:
        before = programs.program_cache_info()["purges"]
        for n in (3, 5, 7):  # three distinct programs, each compiled for real
            x = np.arange(n, dtype=np.float32)
            y = programs.call(("bytes-test", n), lambda v: jax.numpy.cumsum(v * 2.0), x)
            np.testing.assert_allclose(np.asarray(y), np.cumsum(x * 2.0))
        info = programs.program_cache_info()
        assert info["size"] < 3 and info["purges"] > before and info["max_bytes"] == 0
    finally:
        npu_jax.set_program_cache_bytes(old)


@pytest.mark.parametrize("value", [-1, 2.0, True, "1G"])
def test_the_byte_bound_is_validated(value):
    with pytest.raises(NpuError, match="set_program_cache_bytes: n"):
        npu_jax.set_program_cache_bytes(value)


@pytest.mark.parametrize(
    "raw, want", [("", 1 << 30), ("512", 512 << 20), ("0", 0), ("none", None), ("1.5", 3 << 19)]
)
def test_the_byte_bound_from_the_environment(monkeypatch, raw, want):
    monkeypatch.setenv("NPU_JAX_PROGRAM_CACHE_MB", raw)
    assert programs._bytes_from_env() == want


@pytest.mark.parametrize("raw", ["lots", "-5", "nan", "inf"])
def test_a_bad_byte_bound_in_the_environment_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv("NPU_JAX_PROGRAM_CACHE_MB", raw)
    with pytest.raises(ConfigError, match=rf"NPU_JAX_PROGRAM_CACHE_MB={raw!r} is not a size"):
        programs._bytes_from_env()

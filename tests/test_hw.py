"""HardwareConfig, its presets and the platform-ini reader, against the published figures
(shared/reference/ascend-hardware.md), not against the preset code."""

from __future__ import annotations

import dataclasses
import math

import pytest

import npu_jax
from npu_jax.hw import Assumed, HardwareConfig, presets

KiB = 1024


# ---- presets: each figure from the reference table ------------------------------------------------
def test_ascend910b_figures():
    hw = presets.ascend910b()
    assert (hw.l0a_bytes, hw.l0b_bytes, hw.l0c_bytes) == (64 * KiB, 64 * KiB, 128 * KiB)
    assert (hw.l1_bytes, hw.ub_bytes) == (512 * KiB, 192 * KiB)
    assert hw.num_cores == 20 and hw.clock_ghz == 1.5
    assert hw.gm_bytes_per_cycle == 32 and hw.l1_to_l0a_bytes_per_cycle == 512
    assert not hw.coupled and hw.overflow_mode == "inf" and hw.num_event_ids == 8
    # 20 cores x 8192 FLOP/cycle x 1.5 GHz
    assert hw.peak_flops_per_cycle("fp16") == 8192
    assert math.isclose(hw.peak_tflops(), 245.76, rel_tol=1e-12)
    # the chip's HBM ~800 GB/s (third-party) is below 20 ports of 32 B x 1.5 GHz (960 GB/s): one core
    # alone gets its full port, twenty streaming cores share the chip
    assert hw.gm_rate(1) == 32.0
    assert math.isclose(hw.gm_rate(20) * 20 * hw.clock_ghz, 800.0, rel_tol=1e-4)
    # L2 96 MiB (910B4), 110 B/cycle read, 86 write; a 2 us launch = 3000 cycles
    assert hw.l2_bytes == 96 * 1024 * KiB and hw.l2_read_bytes_per_cycle == 110 and hw.l2_write_rate == 86
    assert hw.launch_cycles == 3000


def test_ascend910_figures():
    hw = presets.ascend910()
    assert (hw.l0a_bytes, hw.l0b_bytes, hw.l0c_bytes) == (64 * KiB, 64 * KiB, 256 * KiB)
    assert (hw.l1_bytes, hw.ub_bytes) == (1024 * KiB, 256 * KiB)
    assert hw.num_cores == 32 and hw.coupled and hw.overflow_mode == "saturate"
    assert hw.num_event_ids == 4  # event ids 0-3 on 910
    assert math.isclose(hw.peak_tflops(), 256.0, rel_tol=1e-3)


def test_ascend310p_figures():
    hw = presets.ascend310p()
    assert (hw.l0a_bytes, hw.l0c_bytes, hw.l1_bytes, hw.ub_bytes) == (
        64 * KiB,
        256 * KiB,
        1024 * KiB,
        256 * KiB,
    )
    assert hw.coupled and hw.overflow_mode == "saturate"
    # OPSNN fixture rates
    assert (
        hw.gm_bytes_per_cycle,
        hw.l1_to_l0a_bytes_per_cycle,
        hw.l0b_rate,
        hw.l0c_to_ub_bytes_per_cycle,
        hw.ub_to_gm_rate,
        hw.l1_to_ub_bytes_per_cycle,
    ) == (17, 512, 256, 256, 17, 128)


@pytest.mark.parametrize("coupled", [False, True])
def test_tiny_preset(coupled):
    hw = presets.tiny(coupled=coupled)
    assert hw.coupled is coupled
    assert hw.overflow_mode == ("saturate" if coupled else "inf")
    # small enough that tilings hit capacity, but still whole fractals
    assert hw.l0a_bytes % 512 == 0 and hw.l0a_bytes < presets.ascend910b().l0a_bytes


@pytest.mark.parametrize(
    "name, expect",
    [
        ("910b", "ascend910b"),
        ("ascend910", "ascend910"),
        ("Ascend-310P", "ascend310p"),
        ("tiny", "tiny"),
        ("ascend_910b", "ascend910b"),
    ],
)
def test_get_preset_by_name(name, expect):
    assert presets.get(name) == getattr(presets, expect)()


def test_get_unknown_preset():
    with pytest.raises(ValueError, match="910c"):
        presets.get("910c")


def test_fp32_peak_is_a_quarter_of_fp16():
    # K0 = 32 B / itemsize: 16 for fp16, 8 for fp32 -> half the MACs; int8 doubles it
    hw = presets.ascend910b()
    assert hw.peak_flops_per_cycle("fp32") * 2 == hw.peak_flops_per_cycle("fp16")
    assert hw.peak_flops_per_cycle("int8") == 2 * hw.peak_flops_per_cycle("fp16")
    assert hw.k0(2) == 16 and hw.k0(4) == 8 and hw.k0(1) == 32


def test_unpublished_rates_fall_back_to_assumed():
    hw = HardwareConfig(assumed=Assumed(l1_to_l0b_bytes_per_cycle=100.0, ub_to_gm_bytes_per_cycle=7.0))
    assert hw.l0b_rate == 100.0 and hw.ub_to_gm_rate == 7.0
    hw2 = hw.replace(l1_to_l0b_bytes_per_cycle=300.0)
    assert hw2.l0b_rate == 300.0


def test_chip_bandwidth_is_shared():
    hw = HardwareConfig(num_cores=4, gm_bytes_per_cycle=32.0, chip_gm_bytes_per_cycle=64.0)
    assert hw.gm_rate(1) == 32.0 and hw.gm_rate(2) == 32.0 and hw.gm_rate(4) == 16.0


def test_config_is_frozen():
    hw = presets.tiny()
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.l1_bytes = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        HardwareConfig(64 * KiB)  # keyword-only


# ---- validation: errors name the parameter ------------------------------------------------------
@pytest.mark.parametrize(
    "kw, name",
    [
        ({"l0a_bytes": 64 * KiB + 32}, "l0a_bytes"),
        ({"l0b_bytes": 1024 + 256}, "l0b_bytes"),
        ({"overflow_mode": "wrap"}, "overflow_mode"),
        ({"num_cores": 0}, "num_cores"),
        ({"clock_ghz": -1.0}, "clock_ghz"),
        ({"gm_bytes_per_cycle": float("inf")}, "gm_bytes_per_cycle"),
        ({"l1_align": 48}, "L1"),
        ({"ub_bytes": 1000}, "ub_bytes"),
        ({"chip_gm_bytes_per_cycle": 0.0}, "chip_gm_bytes_per_cycle"),
    ],
)
def test_config_validation(kw, name):
    with pytest.raises(ValueError, match=name):
        HardwareConfig(**kw)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Assumed)])
def test_assumed_rejects_negative(field):
    with pytest.raises(ValueError, match=field):
        Assumed(**{field: -1})


@pytest.mark.parametrize(
    "field", ["fixpipe_bytes_per_cycle", "l1_to_l0b_bytes_per_cycle", "ub_to_gm_bytes_per_cycle"]
)
def test_assumed_rates_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        Assumed(**{field: 0.0})


def test_replace_validates():
    with pytest.raises(ValueError, match="l0a_bytes"):
        presets.ascend910b().replace(l0a_bytes=100)


# ---- platform ini ----------------------------------------------------------------------------------
INI = """\
[version]
SoC_version=Ascend910B4

[SoCInfo]
ai_core_cnt=24
l2_size=201326592

[AICoreSpec]
cube_freq=1800
l1_size=262144
l0_c_size=131072

[AICoreMemoryRates]
ddr_rate=40
l1_to_l0_a_rate=256
l2_rate=110

[CPUCache]
AICPUSyncBySW=0
"""


def test_from_ini(tmp_path):
    p = tmp_path / "Ascend910B_test.ini"
    p.write_text(INI)
    hw = HardwareConfig.from_ini(p)
    assert hw.num_cores == 24
    assert math.isclose(hw.clock_ghz, 1.8)
    assert hw.l1_bytes == 256 * KiB and hw.l0c_bytes == 128 * KiB
    assert hw.gm_bytes_per_cycle == 40.0 and hw.l1_to_l0a_bytes_per_cycle == 256.0
    # keys the file does not name keep the base preset's values
    base = presets.ascend910b()
    assert hw.ub_bytes == base.ub_bytes and hw.l0a_bytes == base.l0a_bytes
    assert hw.coupled == base.coupled
    # chip bandwidth re-derived from the new core count: each core keeps its port alone
    assert hw.gm_rate(24) == 40.0
    assert math.isclose(hw.peak_tflops(), 24 * 8192 * 1.8 / 1e3)


def test_from_ini_over_another_base(tmp_path):
    p = tmp_path / "x.ini"
    p.write_text("[AICoreSpec]\nl1_size=131072\n")
    hw = HardwareConfig.from_ini(p, base=presets.tiny(coupled=True))
    assert hw.l1_bytes == 128 * KiB and hw.coupled and hw.num_cores == presets.tiny().num_cores


def test_from_ini_rejects_unknown_key(tmp_path):
    p = tmp_path / "typo.ini"
    p.write_text("[AICoreSpec]\ncube_freq=1500\nl1_sise=524288\n")
    with pytest.raises(ValueError, match="l1_sise"):
        HardwareConfig.from_ini(p)


def test_from_ini_rejects_non_number(tmp_path):
    p = tmp_path / "bad.ini"
    p.write_text("[AICoreMemoryRates]\nddr_rate=fast\n")
    with pytest.raises(ValueError, match="ddr_rate"):
        HardwareConfig.from_ini(p)


def test_from_ini_validates_values(tmp_path):
    p = tmp_path / "odd.ini"
    p.write_text("[AICoreSpec]\nl0_a_size=1000\n")
    with pytest.raises(ValueError, match="l0a_bytes"):
        HardwareConfig.from_ini(p)


def test_from_ini_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        HardwareConfig.from_ini(tmp_path / "nope.ini")


def test_public_surface():
    assert npu_jax.presets.ascend910b() == presets.ascend910b()
    assert npu_jax.HardwareConfig is HardwareConfig and npu_jax.Assumed is Assumed

"""Read a CANN platform-config ``.ini`` (e.g. ``Ascend910B1.ini``) over a preset.

Known keys map onto HardwareConfig fields; sizes are bytes, rates bytes/cycle, ``cube_freq`` MHz.
Unknown keys in the sections we read raise, so a typo never silently keeps the preset's value.
"""

from __future__ import annotations

import configparser
import os

from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.presets import ascend910b

# ini key -> (HardwareConfig field, converter)
_KEYS = {
    "ai_core_cnt": ("num_cores", int),
    "cube_core_cnt": ("num_cores", int),
    "cube_freq": ("clock_ghz", lambda v: float(v) / 1000.0),
    "l0_a_size": ("l0a_bytes", int),
    "l0_b_size": ("l0b_bytes", int),
    "l0_c_size": ("l0c_bytes", int),
    "l1_size": ("l1_bytes", int),
    "ub_size": ("ub_bytes", int),
    "ddr_rate": ("gm_bytes_per_cycle", float),
    "l1_to_l0_a_rate": ("l1_to_l0a_bytes_per_cycle", float),
    "l1_to_l0_b_rate": ("l1_to_l0b_bytes_per_cycle", float),
    "l0_c_to_ub_rate": ("l0c_to_ub_bytes_per_cycle", float),
    "ub_to_ddr_rate": ("ub_to_gm_bytes_per_cycle", float),
    "l1_to_ub_rate": ("l1_to_ub_bytes_per_cycle", float),
    "l2_size": ("l2_bytes", int),
    "l2_rate": ("l2_read_bytes_per_cycle", float),
    "l2_read_rate": ("l2_read_bytes_per_cycle", float),
    "l2_write_rate": ("l2_write_bytes_per_cycle", float),
    "vector_core_cnt": ("vector_cores", int),
}
# Keys that vendor files carry and the model deliberately does not use.
_IGNORED = {
    "l2_type",
    "l2_page_num",
    "smask_buffer",
    "ub_block_size",
    "ub_bank_size",
    "ub_bank_num",
    "ub_bank_group_num",
    "bt_size",
    "fb_size",
    "vector_freq",
    "ddr_read_rate",
    "ddr_write_rate",
    "l0_c_to_l1_rate",
    "l1_to_l0_c_rate",
    "ub_to_l2_rate",
    "ub_to_ub_rate",
    "l1_to_l2_rate",
    "ai_cpu_cnt",
    "memory_type",
    "memory_size",
    "ai_core_intrinsic_dtype_map",
}
_SECTIONS = {
    "SoCInfo",
    "AICoreSpec",
    "AICoreMemoryRates",
    "VectorCoreSpec",
    "VectorCoreMemoryRates",
    "CPUCache",
    "version",
}


def load_ini(path: str | os.PathLike, base: HardwareConfig | None = None) -> HardwareConfig:
    """HardwareConfig from the ini at ``path``, starting from ``base`` (default ``ascend910b()``)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"platform ini not found: {os.fspath(path)!r}")
    if base is not None and not isinstance(base, HardwareConfig):
        raise TypeError(
            f"from_ini: base must be a HardwareConfig or None (e.g. presets.get('910b')), got "
            f"{type(base).__name__}."
        )
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str.lower  # keys are case-insensitive in vendor files
    try:
        parser.read(path)
    except configparser.Error as e:
        raise ValueError(
            f"{os.fspath(path)}: not a platform ini file ({type(e).__name__}: "
            f"{str(e).splitlines()[0]}); expected [SoCInfo] / [AICoreSpec] sections of key = value."
        ) from None
    changes, source = {}, {}
    for section in parser.sections():
        if section not in _SECTIONS:
            continue  # vendor files carry many sections unrelated to the AI Core
        for key, raw in parser.items(section):
            if key in _IGNORED or section not in ("SoCInfo", "AICoreSpec", "AICoreMemoryRates"):
                continue
            if key not in _KEYS:
                raise ValueError(
                    f"{os.fspath(path)}: unknown key {key!r} in [{section}]; known keys are "
                    f"{sorted(_KEYS)} (and ignored: {sorted(_IGNORED)})."
                )
            field, conv = _KEYS[key]
            source[field] = f"{key} = {raw.strip()} in [{section}]"
            try:
                changes[field] = conv(raw.strip())
            except ValueError:
                raise ValueError(
                    f"{os.fspath(path)}: key {key!r} in [{section}] must be a number, got {raw!r}."
                ) from None
    base = base if base is not None else ascend910b()
    if "num_cores" in changes and "chip_gm_bytes_per_cycle" not in changes:
        changes["chip_gm_bytes_per_cycle"] = None  # re-derive from the per-core rate
    try:
        return base.replace(name=f"{base.name}+{os.path.basename(os.fspath(path))}", **changes)
    except (ValueError, TypeError) as e:
        bad = [src for f, src in source.items() if f in str(e)]
        where = f" (from {'; '.join(bad)})" if bad else ""
        raise type(e)(f"{os.fspath(path)}: {e}{where}") from None


def _from_ini(cls, path, base: HardwareConfig | None = None) -> HardwareConfig:
    """Read a CANN platform-config ``.ini`` over ``base`` (default: the 910B preset)."""
    return load_ini(path, base)


# A classmethod of HardwareConfig, defined here so that config.py imports neither this module nor presets.
HardwareConfig.from_ini = classmethod(_from_ini)

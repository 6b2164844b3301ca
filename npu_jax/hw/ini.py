"""Read a CANN platform-config ``.ini`` (e.g. ``Ascend910B1.ini``) over a preset.

Known keys map onto HardwareConfig fields; sizes are bytes, rates bytes/cycle, ``cube_freq`` MHz.
Unknown keys in the sections we read raise, so a typo never silently keeps the preset's value.
"""

from __future__ import annotations

import configparser
import decimal
import os
import re

from npu_jax.errors import ConfigError, InputTypeError
from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.presets import ascend910b


class _NotWhole(ValueError):
    """A number, but not a whole one (or not finite), for an integer field."""


class _TooLong(ValueError):
    """A whole number of more than 100 digits: far past any figure, and costly to build."""


def _whole(raw: str) -> int:
    """An integer figure: ``524288`` or an integral float such as ``524288.0`` / ``5.24288e5`` (read
    exactly, as a decimal); a fraction (``2.5``), ``nan`` or ``inf`` is refused."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        d = decimal.Decimal(raw)
    except decimal.InvalidOperation:
        raise ValueError(raw) from None
    if not d.is_finite() or d != d.to_integral_value():
        raise _NotWhole(raw)
    if d.adjusted() > 100:  # 1e999999999 would build a billion-digit int; no figure comes near
        raise _TooLong(raw)
    return int(d)


# ini key -> (HardwareConfig field, converter); two keys naming one field are aliases (vendor files
# of different chips spell it either way), and a file that sets both must agree with itself
_KEYS = {
    "ai_core_cnt": ("num_cores", _whole),
    "cube_core_cnt": ("num_cores", _whole),
    "cube_freq": ("clock_ghz", lambda v: float(v) / 1000.0),
    "l0_a_size": ("l0a_bytes", _whole),
    "l0_b_size": ("l0b_bytes", _whole),
    "l0_c_size": ("l0c_bytes", _whole),
    "l1_size": ("l1_bytes", _whole),
    "ub_size": ("ub_bytes", _whole),
    "ddr_rate": ("gm_bytes_per_cycle", float),
    "l1_to_l0_a_rate": ("l1_to_l0a_bytes_per_cycle", float),
    "l1_to_l0_b_rate": ("l1_to_l0b_bytes_per_cycle", float),
    "l0_c_to_ub_rate": ("l0c_to_ub_bytes_per_cycle", float),
    "ub_to_ddr_rate": ("ub_to_gm_bytes_per_cycle", float),
    "ub_to_l2_rate": ("ub_to_l2_bytes_per_cycle", float),
    "l1_to_ub_rate": ("l1_to_ub_bytes_per_cycle", float),
    "l2_size": ("l2_bytes", _whole),
    "l2_rate": ("l2_read_bytes_per_cycle", float),
    "l2_read_rate": ("l2_read_bytes_per_cycle", float),
    "l2_write_rate": ("l2_write_bytes_per_cycle", float),
    "vector_core_cnt": ("vector_cores", _whole),
    "ub_bank_group_num": ("ub_bank_groups", _whole),
}
# Keys that vendor files carry and the model deliberately does not use.
_IGNORED = {
    "l2_type",
    "l2_page_num",
    "smask_buffer",
    "ub_block_size",
    "ub_bank_size",
    "ub_bank_num",
    "bt_size",
    "fb_size",
    "vector_freq",
    "ddr_read_rate",
    "ddr_write_rate",
    "l0_c_to_l1_rate",
    "l1_to_l0_c_rate",
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
    if not isinstance(path, (str, os.PathLike)):
        raise InputTypeError(f"from_ini: path must be a file path, got {type(path).__name__} {path!r}.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"platform ini not found: {os.fspath(path)!r}")
    if not os.path.isfile(path):
        raise ConfigError(
            f"from_ini: path {os.fspath(path)!r} is not a file (a directory?); give the .ini file."
        )
    if base is not None and not isinstance(base, HardwareConfig):
        raise InputTypeError(
            f"from_ini: base must be a HardwareConfig or None (e.g. presets.get('910b')), got "
            f"{type(base).__name__}."
        )
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str.lower  # keys are case-insensitive in vendor files
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the first header
        with open(path, encoding="utf-8-sig") as fh:
            text = fh.read()
        parser.read_string(text, source=os.fspath(path))
    except UnicodeDecodeError:
        raise ConfigError(
            f"{os.fspath(path)}: not a platform ini file (not UTF-8 text); expected [SoCInfo] / "
            f"[AICoreSpec] sections of key = value."
        ) from None
    except configparser.Error as e:
        raise ConfigError(
            f"{os.fspath(path)}: not a platform ini file ({type(e).__name__}: "
            f"{str(e).splitlines()[0]}); expected [SoCInfo] / [AICoreSpec] sections of key = value."
        ) from None
    changes, source, setting = {}, {}, {}
    lines = _key_lines(text)
    for section in parser.sections():
        if section not in _SECTIONS:
            continue  # vendor files carry many sections unrelated to the AI Core
        for key, raw in parser.items(section):
            if key in _IGNORED or section not in ("SoCInfo", "AICoreSpec", "AICoreMemoryRates"):
                continue
            if key not in _KEYS:
                raise ConfigError(
                    f"{os.fspath(path)}: unknown key {key!r} in [{section}]; known keys are "
                    f"{sorted(_KEYS)} (and ignored: {sorted(_IGNORED)})."
                )
            field, conv = _KEYS[key]
            unit = " MHz" if key == "cube_freq" else ""  # the only figure whose unit the field changes
            where = f"{key} = {raw.strip()[:40]}{unit} in [{section}]"
            line = lines.get((section, key))
            where_line = f"{where}{f' (line {line})' if line else ''}"
            try:
                value = conv(raw.strip())
            except _NotWhole:
                unit = "cores" if field.endswith("cores") else "bytes"
                fix = f"; give an integer such as {int(float(raw))}" if _finite(raw) else ""
                raise ConfigError(
                    f"{os.fspath(path)}: key {key!r} in [{section}] must be a finite whole number of "
                    f"{unit} ({field}), got {raw.strip()!r}{fix}."
                ) from None
            except _TooLong:
                raise ConfigError(
                    f"{os.fspath(path)}: key {key!r} in [{section}] = {raw.strip()[:40]!r} has more than 100 "
                    f"digits, far past any {field} (see HardwareConfig's ranges); give the chip's figure."
                ) from None
            except ValueError:
                raise ConfigError(
                    f"{os.fspath(path)}: key {key!r} in [{section}] must be a number, got {raw.strip()[:40]!r}."
                ) from None
            if field in changes and changes[field] != value:
                raise ConfigError(
                    f"{os.fspath(path)}: {setting[field]} and {where_line} both set {field}, to "
                    f"different values; keep one of the two keys (or give both the same value)."
                )
            changes[field], source[field], setting[field] = value, where, where_line
    if not changes:
        raise ConfigError(
            f"{os.fspath(path)}: no AI Core figure found (sections read: {parser.sections() or 'none'}); a "
            f"platform ini sets keys such as ai_core_cnt in [SoCInfo] or l0_a_size in [AICoreSpec], "
            f"known keys: {sorted(_KEYS)}. An empty file would silently give the preset unchanged."
        )
    base = base if base is not None else ascend910b()
    if "num_cores" in changes and "chip_gm_bytes_per_cycle" not in changes:
        changes["chip_gm_bytes_per_cycle"] = None  # re-derive from the per-core rate
    try:
        return base.replace(name=f"{base.name}+{os.path.basename(os.fspath(path))}", **changes)
    except (ValueError, TypeError) as e:
        bad = [src for f, src in source.items() if f in str(e)]
        where = f" (from {'; '.join(bad)})" if bad else ""
        raise type(e)(f"{os.fspath(path)}: {str(e).rstrip('.')}{where}.") from None


def _finite(raw: str) -> bool:
    try:
        return abs(float(raw)) < float("inf")
    except ValueError:
        return False


_HEADER = re.compile(r"\s*\[([^\]]+)\]")
_KEY = re.compile(r"\s*([^=:;#\s][^=:]*?)\s*[=:]")


def _key_lines(text: str) -> dict:
    """(section, lower-case key) -> the 1-based line that sets it, for messages (configparser keeps
    no line numbers)."""
    out, section = {}, None
    for n, line in enumerate(text.splitlines(), 1):
        if m := _HEADER.match(line):
            section = m.group(1)
        elif section is not None and line[:1] not in (" ", "\t") and (m := _KEY.match(line)):
            out.setdefault((section, m.group(1).lower()), n)
    return out


def _from_ini(cls, path, base: HardwareConfig | None = None) -> HardwareConfig:
    """Read a CANN platform-config ``.ini`` over ``base`` (default: the 910B preset)."""
    return load_ini(path, base)


# A classmethod of HardwareConfig, defined here so that config.py imports neither this module nor presets.
HardwareConfig.from_ini = classmethod(_from_ini)

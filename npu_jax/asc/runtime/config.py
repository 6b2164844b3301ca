"""``asc.runtime.config``: pyasc's backend and platform, on the emulator.

pyasc runs a kernel on an NPU or on the vendor's simulator ("Model"). Here the Model backend is the
emulator: ``set_platform(Backend.Model, Platform.Ascend910B1)`` picks the chip the launches of
``asc.jit`` kernels emulate (their default ``hw``). Without a call the platform is pyasc's Model
default, the Ascend910B1: ``npu_jax.presets.ascend910b1()`` (24 AIC, 48 AIV at 1.85 GHz). The other
parts map to the closest preset by their cores (:data:`PRESET_OF`): the 910B2 / B2C and the 24-core
A3 parts (910_938x / 939x) to the 910B1 preset, the 20-core ones (910B3, B4, B4-1, 910_936x / 937x)
to ``ascend910b()`` (the 910B4's). The NPU backend is refused: there is no NPU here.
"""

from __future__ import annotations

import enum
import functools

from npu_jax.hw import presets


class Backend(enum.Enum):
    """Where a kernel runs: the vendor's simulator (here: the emulator) or an NPU."""

    Model = "Model"
    NPU = "NPU"


class Platform(enum.Enum):
    """The SoC versions pyasc names."""

    Ascend910B1 = "Ascend910B1"
    Ascend910B2 = "Ascend910B2"
    Ascend910B2C = "Ascend910B2C"
    Ascend910B3 = "Ascend910B3"
    Ascend910B4 = "Ascend910B4"
    Ascend910B4_1 = "Ascend910B4-1"
    Ascend910_9362 = "Ascend910_9362"
    Ascend910_9372 = "Ascend910_9372"
    Ascend910_9381 = "Ascend910_9381"
    Ascend910_9382 = "Ascend910_9382"
    Ascend910_9391 = "Ascend910_9391"
    Ascend910_9392 = "Ascend910_9392"


class KernelType(enum.IntEnum):
    """Where a kernel's code runs (``asc.jit(kernel_type=...)``): vector cores only (AIV_ONLY), cube
    cores only (AIC_ONLY), or both (MIX_*: ``MIX_AIC_1_2`` is one AIC and two AIVs per block)."""

    AIV_ONLY = 0
    AIC_ONLY = 1
    MIX_AIV_HARD_SYNC = 2
    MIX_AIC_HARD_SYNC = 3
    MIX_AIV_1_0 = 4
    MIX_AIC_1_0 = 5
    MIX_AIC_1_1 = 6
    MIX_AIC_1_2 = 7


_B1, _B4 = "ascend910b1", "ascend910b"
PRESET_OF = {
    Platform.Ascend910B1: _B1,
    Platform.Ascend910B2: _B1,
    Platform.Ascend910B2C: _B1,
    Platform.Ascend910B3: _B4,
    Platform.Ascend910B4: _B4,
    Platform.Ascend910B4_1: _B4,
    Platform.Ascend910_9362: _B4,
    Platform.Ascend910_9372: _B4,
    Platform.Ascend910_9381: _B1,
    Platform.Ascend910_9382: _B1,
    Platform.Ascend910_9391: _B1,
    Platform.Ascend910_9392: _B1,
}

_STATE = {"backend": Backend.Model, "platform": Platform.Ascend910B1, "device_id": None}


def _platform(soc) -> Platform:
    if isinstance(soc, Platform):
        return soc
    try:
        return Platform(soc)
    except ValueError:
        if isinstance(soc, str) and soc in Platform.__members__:
            return Platform[soc]
        raise ValueError(f"unsupported platform {soc!r}; supported: {[p.value for p in Platform]}.") from None


def set_platform(backend, soc_version=None, device_id=None, check=True) -> None:
    """``set_platform(backend, soc_version=None, device_id=None, check=True)``: ``Backend.Model`` (or
    "Model") emulates ``soc_version`` (default Ascend910B1) in every later ``asc.jit`` launch that names
    no ``hw=``; ``Backend.NPU`` raises (no NPU here). ``device_id`` and ``check`` are accepted."""
    backend = Backend(backend.value if isinstance(backend, Backend) else backend)
    if backend is Backend.NPU:
        raise RuntimeError(
            "asc.runtime.config: the NPU backend needs an Ascend NPU and CANN; npu_jax emulates the chip on the "
            "CPU: use config.Backend.Model."
        )
    _STATE.update(
        backend=backend,
        platform=Platform.Ascend910B1 if soc_version is None else _platform(soc_version),
        device_id=device_id,
    )


def current_backend() -> Backend:
    return _STATE["backend"]


def current_platform() -> Platform:
    """The platform of ``set_platform`` (default: Ascend910B1)."""
    return _STATE["platform"]


@functools.cache
def _preset(name: str):
    return getattr(presets, name)()


def hardware(platform=None):
    """The emulator's chip for ``platform`` (default: the current one) by ``PRESET_OF``: an ``asc.jit``
    launch's default ``hw``."""
    return _preset(PRESET_OF[current_platform() if platform is None else _platform(platform)])


def device_id() -> int:
    """The device of ``set_platform`` / ``rt.set_device`` (0 by default: the one emulated chip)."""
    return _STATE["device_id"] or 0


def set_device(device_id: int) -> None:
    _STATE["device_id"] = device_id


__all__ = [
    "PRESET_OF",
    "Backend",
    "KernelType",
    "Platform",
    "current_backend",
    "current_platform",
    "device_id",
    "hardware",
    "set_device",
    "set_platform",
]

"""``asc.lib.runtime`` (``import npu_jax.asc.lib.runtime as rt``): pyasc's device runtime, on the
emulator. A launch runs to completion before it returns, so streams are tokens and ``synchronize``
has nothing to wait for; the device is the emulated chip of ``config.set_platform``.
"""

from __future__ import annotations

import dataclasses

from npu_jax.asc.runtime import config


@dataclasses.dataclass(frozen=True)
class Stream:
    """A stream token (``kernel[core_num, rt.current_stream()](...)``)."""

    device_id: int = 0
    index: int = 0


_STREAMS: dict[int, Stream] = {}
_MADE = [0]


def current_stream(device_id: int | None = None) -> Stream:
    """The device's default stream."""
    d = current_device() if device_id is None else device_id
    return _STREAMS.setdefault(d, Stream(d, 0))


def create_stream(device_id: int | None = None) -> Stream:
    _MADE[0] += 1
    return Stream(current_device() if device_id is None else device_id, _MADE[0])


def destroy_stream(stream: Stream) -> None:
    """Nothing to release."""


def synchronize(stream: Stream | None = None) -> None:
    """Every launch is complete when it returns: nothing to wait for."""


def synchronize_device(device_id: int | None = None) -> None:
    """Every launch is complete when it returns: nothing to wait for."""


def use_model() -> None:
    """The Model backend (the emulator): ``config.set_platform(Backend.Model, current platform)``."""
    config.set_platform(config.Backend.Model, config.current_platform())


def use_npu() -> None:
    config.set_platform(config.Backend.NPU)  # raises: no NPU here


def is_model() -> bool:
    return config.current_backend() is config.Backend.Model


def is_available() -> bool:
    """The emulator is always available."""
    return True


def is_initialized() -> bool:
    return True


def set_soc_version(soc) -> None:
    """The platform the launches emulate (as ``config.set_platform(Backend.Model, soc)``)."""
    config.set_platform(config.Backend.Model, soc)


def get_soc_version() -> config.Platform:
    return config.current_platform()


def current_platform() -> str:
    """The emulated platform's name (pyasc's string, e.g. "Ascend910B1")."""
    return config.current_platform().value


def default_device() -> int:
    return 0


def current_device() -> int:
    return config.device_id()


def set_device(device_id: int) -> None:
    config.set_device(device_id)


def device_count() -> int:
    return 1


__all__ = [
    "Stream",
    "create_stream",
    "current_device",
    "current_platform",
    "current_stream",
    "default_device",
    "destroy_stream",
    "device_count",
    "get_soc_version",
    "is_available",
    "is_initialized",
    "is_model",
    "set_device",
    "set_soc_version",
    "synchronize",
    "synchronize_device",
    "use_model",
    "use_npu",
]

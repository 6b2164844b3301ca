"""Hardware description: :class:`HardwareConfig`, its :class:`Assumed` table, and presets."""

from npu_jax.hw import presets
from npu_jax.hw.config import BUFFERS, Assumed, HardwareConfig

__all__ = ["Assumed", "BUFFERS", "HardwareConfig", "presets"]

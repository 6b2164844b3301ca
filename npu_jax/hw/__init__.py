"""Hardware description: :class:`HardwareConfig`, its :class:`Assumed` table, and presets."""

from npu_jax.hw import ini, presets  # ini attaches HardwareConfig.from_ini
from npu_jax.hw.config import BUFFERS, Assumed, HardwareConfig

__all__ = ["Assumed", "BUFFERS", "HardwareConfig", "ini", "presets"]

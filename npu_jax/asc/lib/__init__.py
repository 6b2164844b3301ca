"""``asc.lib``: pyasc's runtime (``asc.lib.runtime``, imported as ``rt``) and host tiling
(``asc.lib.host``) on the emulator."""

__all__ = ["host", "runtime"]  # pyasc's module paths, loaded on first import

"""``asc.lib``: pyasc's runtime (``asc.lib.runtime``, imported as ``rt``) and host tiling
(``asc.lib.host``) on the emulator."""

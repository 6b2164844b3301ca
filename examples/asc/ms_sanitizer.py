"""The vendor's sanitizer sample: an fp32 Add ([8, 2048], 8 blocks) with static tensors and hand-written
flags, and the four bugs the vendor's msSanitizer tutorial injects into it, one at a time:

* ``"double_copy"``: a DataCopy of twice the block (an illegal write past the UB tensor)  -> memcheck
* ``"misaligned"``: a UB address off by 5 elements (20 B: off the 32-B boundary)          -> memcheck
* ``"no_sync"``: the MTE2 -> V SetFlag / WaitFlag pair deleted (V reads what MTE2 writes)  -> racecheck
* ``"no_global_buffer"``: a GlobalTensor never given memory (SetGlobalBuffer missing)      -> initcheck

Each gives exactly one finding, at the line of the call the bug is in (``MUTATION_LINES``).

    python examples/asc/ms_sanitizer.py no_sync
"""

from __future__ import annotations

import inspect
import sys

import numpy as np

from npu_jax import asc

MUTATIONS = ("double_copy", "misaligned", "no_sync", "no_global_buffer")
BLOCK_LENGTH = 2048


@asc.kernel
def sanitizer_add(x, y, z, mutation: str = ""):
    n = BLOCK_LENGTH
    off = asc.get_block_idx() * n
    x_gm, y_gm, z_gm = asc.GlobalTensor(), asc.GlobalTensor(), asc.GlobalTensor()
    if mutation != "no_global_buffer":
        x_gm.set_global_buffer(x + off, n)
    y_gm.set_global_buffer(y + off, n)
    z_gm.set_global_buffer(z + off, n)
    ub = asc.LocalMemAllocator(asc.Hardware.UB)
    x_ub = ub.alloc(asc.TPosition.VECIN, asc.float32, n)
    y_ub = ub.alloc(asc.TPosition.VECIN, asc.float32, n)
    z_ub = ub.alloc(asc.TPosition.VECOUT, asc.float32, n)
    asc.data_copy(x_ub, x_gm, 2 * n if mutation == "double_copy" else n)  # bug: double_copy, no_global_buffer
    asc.data_copy(y_ub, y_gm, n)
    if mutation != "no_sync":
        asc.set_flag(asc.HardEvent.MTE2_V, 0)
        asc.wait_flag(asc.HardEvent.MTE2_V, 0)
    src = x_ub[5:] if mutation == "misaligned" else x_ub
    asc.add(z_ub, src, y_ub, n)  # bug: misaligned, no_sync
    asc.set_flag(asc.HardEvent.V_MTE3, 0)
    asc.wait_flag(asc.HardEvent.V_MTE3, 0)
    asc.data_copy(z_gm, z_ub, n)


def _line_of(marker: str) -> int:
    lines, first = inspect.getsourcelines(sanitizer_add.fn)
    return next(first + i for i, text in enumerate(lines) if "# bug:" in text and marker in text)


# the line each mutation's finding must name
MUTATION_LINES = {m: _line_of(m) for m in MUTATIONS}
EXPECTED_CHECK = {
    "double_copy": "memcheck",
    "misaligned": "memcheck",
    "no_sync": "racecheck",
    "no_global_buffer": "initcheck",
}


def main(mutation: str = "no_sync"):
    import warnings

    import npu_jax

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (8, BLOCK_LENGTH)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, BLOCK_LENGTH)).astype(np.float32)
    checks = npu_jax.Checks.parse("all", action="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, report = sanitizer_add[8](x, y, np.zeros_like(x), mutation, checks=checks)
    for f in report.findings():
        print(f.message())


if __name__ == "__main__":
    main(*sys.argv[1:])

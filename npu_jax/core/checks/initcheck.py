"""initcheck: a read of an allocation stage that nothing has written.

State in the replay: ``init`` (S,) bool, one written flag per stage of the flat stage table. (The
NaN poison of fresh allocations still shows element-level misuse in the values.)
"""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.checks.columns import Check, Code
from npu_jax.core.checks.record import Step, cols, first_at


def step(find, init, at: Step, stages):
    """Check the row's reads against the written flags, then mark its writes; (find, init)."""
    find = first_at(
        find, Check.INIT, at.rd & ~init[at.idx], cols(Code.UNINIT, at.q, at.aid, at.st, -1, -1, 0, 0), at
    )
    init = init | jnp.any((stages[:, None] == at.idx[None, :]) & at.wr[None, :], axis=1)
    return find, init

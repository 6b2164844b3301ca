"""State the cores share: arrays that stay one for all cores under ``vmap`` over the cores.

The cores of a launch run as one ``vmap`` (``run.py``). What the chip keeps once for all of them --
the L2's record of what was read (``l2.py``), the GM outputs and who wrote each element
(``isa/data.write_gm``) -- must not become a copy per core: for a 1 M-element output on 32 cores
that is 32 M elements to broadcast, update and merge per call. An update of such state is written
with :func:`over_cores`: one core's update, which under ``vmap`` over the cores becomes a loop over
them in index order on the one shared array (the SPMD program's order: every core's part of an
instruction before the next instruction, core ``b`` after cores ``< b``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap


def over_cores(one, shared: int):
    """``one(*state, *args) -> (*state, *outs)`` custom-vmapped: under ``vmap`` over the cores its first
    ``shared`` arguments stay one for all cores, updated core after core in index order (each core's
    ``args``, and its own ``outs``, per core); outside it, one core's update.

    At least one of ``args`` must be batched along the cores (pass the core's ``block``), or the
    update runs once for all of them; a shared argument that became per-core is a bug in the caller
    (a whole core selected by a per-core predicate), refused here."""
    f = custom_vmap(one)

    @f.def_vmap
    def _cores(axis_size, in_batched, *args):
        if any(in_batched[:shared]):
            raise RuntimeError(
                "state the cores share (the L2's record, a GM output) became per-core; select the data, not "
                "the whole core."
            )
        state = args[:shared]
        per = [
            v if b else jnp.broadcast_to(v, (axis_size,) + jnp.shape(v))
            for v, b in zip(args[shared:], in_batched[shared:])
        ]
        shapes = jax.eval_shape(lambda *a: one(*a)[shared:], *state, *(p[0] for p in per))
        outs = tuple(jnp.zeros((axis_size,) + s.shape, s.dtype) for s in shapes)

        def core_i(i, carry):
            res = one(*carry[:shared], *(p[i] for p in per))
            return (*res[:shared], *(o.at[i].set(r) for o, r in zip(carry[shared:], res[shared:])))

        res = lax.fori_loop(0, axis_size, core_i, (*state, *outs))
        return res, (False,) * shared + (True,) * len(outs)

    return f

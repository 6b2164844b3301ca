"""The block index as a value a kernel may branch on: ``if asc.get_block_idx() >= n: return``.

In the run pass every block is traced at once (``vmap`` over blocks), so the block index is traced and
Python cannot branch on it. :class:`BlockValue` carries both the traced index and, in the plan pass,
the block's own Python int: arithmetic keeps both, and wherever Python needs a truth value or an int
(``if``, ``range``, a size), the plan pass records the answer. The launch plans every block when the
first one recorded any, groups the blocks whose answers agree, and traces the kernel once per group,
replaying the group's answers; the core of block ``b`` runs its group's program (``lax.switch``). A
kernel that never branches on its block index is planned and traced once, as before.
"""

from __future__ import annotations

import operator
import os
import traceback

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.asc import runtime
from npu_jax.asc.runtime import AscError, KernelRun

MAX_PATHS = 8  # different paths through a kernel the launch traces (each costs a compile and a run)


class BlockValue:
    """An int computed from the block index: ``traced`` (the run pass) and ``concrete`` (the plan pass's
    block), whichever the pass has."""

    __slots__ = ("traced", "concrete")

    def __init__(self, traced, concrete):
        self.traced = traced
        self.concrete = concrete

    # ---- arithmetic keeps both values ------------------------------------------------------------
    def _op(self, other, fn, swap=False):
        if isinstance(other, BlockValue):
            ot, oc = other.traced, other.concrete
        elif isinstance(other, (int, bool)) or (hasattr(other, "__index__") and not hasattr(other, "shape")):
            ot = oc = other
        else:  # a traced value (a loop index): the result is only traced
            t = self.traced if self.traced is not None else jnp.asarray(self.concrete, jnp.int32)
            return fn(other, t) if swap else fn(t, other)
        a, b = ((ot, self.traced), (oc, self.concrete)) if swap else ((self.traced, ot), (self.concrete, oc))
        traced = None if a[0] is None or a[1] is None else fn(*a)
        concrete = None if b[0] is None or b[1] is None else fn(*b)
        return BlockValue(traced, concrete)

    def __add__(self, o):
        return self._op(o, operator.add)

    def __radd__(self, o):
        return self._op(o, operator.add, True)

    def __sub__(self, o):
        return self._op(o, operator.sub)

    def __rsub__(self, o):
        return self._op(o, operator.sub, True)

    def __mul__(self, o):
        return self._op(o, operator.mul)

    def __rmul__(self, o):
        return self._op(o, operator.mul, True)

    def __floordiv__(self, o):
        return self._op(o, operator.floordiv)

    def __rfloordiv__(self, o):
        return self._op(o, operator.floordiv, True)

    def __mod__(self, o):
        return self._op(o, operator.mod)

    def __rmod__(self, o):
        return self._op(o, operator.mod, True)

    def __neg__(self):
        return self._op(-1, operator.mul)

    def __lt__(self, o):
        return self._op(o, operator.lt)

    def __le__(self, o):
        return self._op(o, operator.le)

    def __gt__(self, o):
        return self._op(o, operator.gt)

    def __ge__(self, o):
        return self._op(o, operator.ge)

    def __eq__(self, o):
        return self._op(o, operator.eq)

    def __ne__(self, o):
        return self._op(o, operator.ne)

    def __and__(self, o):
        return self._op(o, operator.and_)

    def __or__(self, o):
        return self._op(o, operator.or_)

    __hash__ = None

    # ---- where Python needs the value ----------------------------------------------------------
    def _answer(self, kind, convert):
        run = runtime.current()
        if run.planning:
            v = convert(self.concrete)
            run.decisions.append((kind, v))
            return v
        per_core = isinstance(self.traced, jax.core.Tracer) or np.ndim(self.traced) > 0  # (the Board's)
        if self.traced is None or not per_core:
            return convert(self.traced if self.traced is not None else self.concrete)
        if run.decision_i >= len(run.decisions):
            raise AscError(
                f"at {runtime.where()}: the kernel asks for the block index's {kind} where its plan did not: its Python "
                f"control flow must not depend on traced values other than the block index."
            )
        k, v = run.decisions[run.decision_i]
        run.decision_i += 1
        return v

    def __bool__(self):
        return self._answer("truth", bool)

    def __index__(self):
        return self._answer("int", int)

    __int__ = __index__

    def __jax_array__(self):
        if self.traced is not None:
            return jnp.asarray(self.traced)
        return jnp.asarray(self.concrete, jnp.int32)

    @property
    def dtype(self):
        return jnp.dtype(jnp.int32)

    def __repr__(self):
        return f"BlockValue(block {self.concrete if self.concrete is not None else '<traced>'})"


def traced_call(fn, args) -> None:
    """``fn(*args)`` in the run pass; a Python branch on a traced value fails at the user's line."""
    try:
        fn(*args)
    except (jax.errors.TracerBoolConversionError, jax.errors.ConcretizationTypeError) as e:
        where = _user_frame(e.__traceback__)
        raise AscError(
            f"at {where}: a Python branch (if / while / and / or / int()) on a traced value: a value read from a "
            f"tensor (get_value), a loop index of asc.loop, or a value computed from them is not known when the "
            f"kernel is traced. Compute both sides and choose with asc.select (or a mask), make the choice a static "
            f"argument of the kernel, or run with jit=False to debug it. (The block index may be branched on.)"
        ) from None


def _user_frame(tb) -> str:
    """The innermost frame of the traceback outside npu_jax and jax: the user's line."""
    pkg = os.path.dirname(os.path.dirname(__file__))
    best = "?"
    for fr in traceback.extract_tb(tb):
        f = fr.filename
        if not f.startswith(pkg) and f"{os.sep}jax{os.sep}" not in f and "jax/_src" not in f:
            best = f"{os.path.basename(f)}:{fr.lineno} ({fr.name})"
    return best


def paths(first: KernelRun, plan_pass, num_blocks: int, name: str):
    """The kernel branched on its block index: plan every block, group the blocks whose answers agree
    (one path each), and return (the plan of the path that asks the most of the buffers, the paths'
    plans, each block's path). Every path's buffer requests must be a prefix of that plan's: the paths
    share one allocation."""
    if num_blocks > 4096:
        raise AscError(
            f"{name} branches on its block index and is launched on {num_blocks} blocks; the emulator plans every "
            f"block of such a kernel (at most 4096). Launch fewer blocks, or compute the branch into offsets."
        )
    plans = [first] + [plan_pass(b) for b in range(1, num_blocks)]
    keys, found, group_of = {}, [], []
    for p in plans:
        k = tuple(p.decisions)
        if k not in keys:
            keys[k] = len(found)
            found.append(p)
        group_of.append(keys[k])
    if len(found) > MAX_PATHS:
        raise AscError(
            f"{name} takes {len(found)} different paths through its code depending on the block index; the emulator "
            f"traces each (at most {MAX_PATHS}). Branch on fewer conditions (e.g. only `if "
            f"asc.get_block_idx() >= used: return`), or compute the difference into offsets and counts."
        )
    main = max(found, key=lambda p: len(p.requests))
    for p in found:
        for r, q in zip(p.requests, main.requests):
            if (r.kind, r.buffer, r.position, r.num, r.nbytes) != (
                q.kind,
                q.buffer,
                q.position,
                q.num,
                q.nbytes,
            ):
                raise AscError(
                    f"{name}: blocks on different paths ask for different buffers ({r.where} and {q.where}); make the "
                    f"same init_buffer calls on every block, before any branch on the block index."
                )
        for g, use in p.gm_use.items():
            m = main.gm_use.setdefault(g, runtime.GmUse())
            m.written = m.written or use.written
            m.l2_bypass = m.l2_bypass or use.l2_bypass
            if m.pitch is None:
                m.pitch, m.where = use.pitch, use.where
    return main, found, np.asarray(group_of, np.int32)


def _flatten(v: BlockValue):
    return ((v.traced,), v.concrete) if v.traced is not None else ((), v.concrete)


def _unflatten(concrete, children):
    return BlockValue(children[0] if children else None, concrete)


# a pytree, so that jax functions given one (jax.debug.print, a loop's carry) take its traced value
jax.tree_util.register_pytree_node(BlockValue, _flatten, _unflatten)

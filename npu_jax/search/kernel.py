"""The tile search on a user's kernel: a space of its tiling parameters, priced by the emulator.

    r = npu_jax.search.kernel_search(
        add_custom, 8, x, y, z, space={"tile_num": [1, 2, 4, 8, 16], "buffer_num": [1, 2]},
        constraint=lambda c: 2048 % (c["tile_num"] * c["buffer_num"]) == 0,
    )
    r.best, r.cycles, r.table(), r.report      # the fastest config, verified by a full run

A config is one value of each parameter, passed to the kernel as a keyword argument (as
``asc.autotune``'s configs are). ``constraint`` drops configs before any is priced; the chip's own
constraints (a buffer that overflows, an alignment) refuse a config when it is priced, and the
refusal is kept with its reason. Every config left is priced timing-only (``asc.tune.price``: no
data, no sanitizers, on the timing Board of ``core/board.py``, milliseconds a config, the same cycles
as a full run) -- the **exact** search. With ``relaxed``, a
differentiable cost of the parameters as real numbers that the user writes (a model of the kernel, in
jnp), the search descends it with optax instead from the middle of the space, and prices only the
grid points around where it ends (``around`` values of each parameter nearest to it): every
candidate is still priced by running its program, so a relaxed cost that misleads costs a worse pick, never
a wrong figure. The pick is then run once on the call's data (``verify``), its report returned: the
compiled program's, whose cycles must equal the Board's price.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from npu_jax.asc.launcher import Kernel, launch
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tune import bind, label, price, shapes_of
from npu_jax.hw import presets


@dataclasses.dataclass(frozen=True)
class KernelSearch:
    """A kernel search's answer: ``best`` config and its ``cycles``; ``priced``: every config priced,
    in order, with its cycles or the error that refused it; ``grid``: the configs the space and the
    constraint allow; ``relaxed_at``: where the relaxed descent ended (None for the exact search);
    ``report`` / ``outputs``: the verifying full run's (None without ``verify`` or data)."""

    best: dict
    cycles: int
    priced: tuple
    grid: int
    relaxed_at: dict | None = None
    report: object = None
    outputs: object = None

    def table(self) -> str:
        """The priced configs, fewest cycles first (refused ones last, with their reason)."""
        ok = sorted(((c, t) for c, t in self.priced if isinstance(t, int)), key=lambda ct: ct[1])
        rows = [f"{label(c)}: {t:,} cycles" for c, t in ok]
        rows += [f"{label(c)}: {t}" for c, t in self.priced if not isinstance(t, int)]
        return "\n".join(rows)


def _grid(space: Mapping[str, Sequence], constraint) -> list[dict]:
    if not isinstance(space, Mapping) or not space:
        raise AscError("kernel_search(space=...): a dict of parameter name -> the values to try.")
    for k, vs in space.items():
        if isinstance(vs, (str, bytes)) or not isinstance(vs, Sequence) or not vs:
            raise AscError(f"kernel_search: space[{k!r}] must be a non-empty list of values, got {vs!r}.")
    names = list(space)
    grid = [dict(zip(names, vs)) for vs in itertools.product(*(space[k] for k in names))]
    return [c for c in grid if constraint is None or constraint(c)]


def _descend(relaxed: Callable, space: Mapping[str, Sequence], steps: int, learning_rate: float) -> dict:
    """Minimise ``relaxed`` over the box the space spans, each parameter as a real number, from the
    box's middle (optax's Adam, in units of each parameter's range, clipped to the box)."""
    lo = {k: float(min(vs)) for k, vs in space.items()}
    hi = {k: float(max(vs)) for k, vs in space.items()}
    span = {k: max(hi[k] - lo[k], 1.0) for k in space}

    def cost(u):
        return relaxed({k: lo[k] + u[k] * span[k] for k in space})

    u = {k: jnp.float32(0.5) for k in space}
    opt = optax.adam(learning_rate)
    state = opt.init(u)
    grad = jax.jit(jax.value_and_grad(cost))
    for _ in range(steps):
        value, g = grad(u)
        if not np.isfinite(float(value)):
            raise AscError(f"kernel_search: the relaxed cost is {float(value)} at {u}; it must stay finite.")
        upd, state = opt.update(g, state, u)
        u = {k: jnp.clip(v, 0.0, 1.0) for k, v in optax.apply_updates(u, upd).items()}
    return {k: lo[k] + float(u[k]) * span[k] for k in space}


def _around(at: dict, space: Mapping[str, Sequence], around: int) -> list[dict]:
    near = {
        k: sorted(space[k], key=lambda v: (abs(float(v) - at[k]), float(v)))[: max(1, around)] for k in space
    }
    names = list(space)
    return [dict(zip(names, vs)) for vs in itertools.product(*(near[k] for k in names))]


def kernel_search(
    kern,
    num_blocks: int,
    *args,
    space: Mapping[str, Sequence],
    constraint: Callable[[dict], bool] | None = None,
    relaxed: Callable[[dict], jax.Array] | None = None,
    steps: int = 200,
    learning_rate: float = 0.05,
    around: int = 2,
    verify: bool = True,
    hw=None,
    policy=None,
) -> KernelSearch:
    """Find the fastest config of ``kern``'s tiling parameters (see the module docstring).

    Args:
        kern: an ``@asc.kernel`` function.
        num_blocks: the launch's blocks.
        *args: the kernel's other arguments, positionally (arrays, or ``jax.ShapeDtypeStruct`` to
            search without data); the searched parameters are left out.
        space: parameter name -> the values to try (their product is the grid).
        constraint: ``constraint(config) -> bool``: False drops a config before it is priced.
        relaxed: ``relaxed({name: jax scalar}) -> jax scalar``, a differentiable cost of the
            parameters as real numbers; given, only the grid points ``around`` where its descent ends
            are priced (``around`` values of each parameter).
        steps, learning_rate: the descent's.
        verify: run the pick on the data (when ``args`` hold data), its report from the compiled program
            (not the Board), and check its cycles against the price.
        hw, policy: as :func:`npu_jax.asc.launch` (default: the 910B).
    """
    if not isinstance(kern, Kernel):
        raise AscError("kernel_search: kern is an @asc.kernel function (decorate it with @asc.kernel).")
    hw = presets.ascend910b() if hw is None else hw
    sig = inspect.signature(kern.fn)
    unknown = sorted(set(space) - set(sig.parameters))
    if unknown:
        raise AscError(
            f"kernel_search: space names {unknown}, not parameters of {kern.fn.__name__}({', '.join(sig.parameters)})."
        )
    grid = _grid(space, constraint)
    if not grid:
        raise AscError("kernel_search: the constraint leaves no config of the space.")
    at = None
    todo = grid
    if relaxed is not None:
        named = sorted(k for k, vs in space.items() if not all(isinstance(v, (int, float)) for v in vs))
        if named:
            raise AscError(
                f"kernel_search(relaxed=...): the relaxed cost takes numbers, and space{named} holds other values; "
                f"search those exactly (relaxed=None) or give their numeric parts as parameters."
            )
        at = _descend(relaxed, space, steps, learning_rate)
        inside = {tuple(c.items()) for c in grid}
        todo = [c for c in _around(at, space, around) if tuple(c.items()) in inside] or grid
    shapes = shapes_of(args)
    name = kern.fn.__name__
    priced = tuple(
        (c, price(kern, num_blocks, bind(sig, name, shapes, c, "kernel_search"), hw, policy)) for c in todo
    )
    ok = [(c, t) for c, t in priced if isinstance(t, int)]
    if not ok:
        lines = "\n".join(f"  {label(c)}: {t}" for c, t in priced)
        raise AscError(f"kernel_search: {hw.name} refused every config priced:\n{lines}")
    best, cycles = min(ok, key=lambda ct: ct[1])
    report = outputs = None
    has_data = any(hasattr(a, "shape") and not isinstance(a, jax.ShapeDtypeStruct) for a in args)
    if verify and has_data:
        # the compiled program's own clocks (board=False): the Board's price checked by the emulator
        outputs, report = launch(
            kern, num_blocks, *bind(sig, name, args, best, "kernel_search"), hw=hw, policy=policy, board=False
        )
        if int(report.cycles) != cycles:
            raise AssertionError(
                f"kernel_search: {label(best)} priced {cycles:,} cycles and ran {int(report.cycles):,}; the "
                f"Board's price must equal the emulator's run (a bug: please report it)."
            )
    return KernelSearch(dict(best), cycles, priced, len(grid), at, report, outputs)


__all__ = ["KernelSearch", "kernel_search"]

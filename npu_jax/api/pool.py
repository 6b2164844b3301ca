"""The public pooling entry points (ONNX MaxPool / AveragePool / GlobalAveragePool) on the vector kernel."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from npu_jax.api.validate import (
    as_array,
    check_common,
    check_flag,
    check_hw,
    check_policy,
    no_grad,
    state_bytes,
)
from npu_jax.core.buffers import DTYPES
from npu_jax.core.formats import nchw_to_nc1hwc0
from npu_jax.core.policy import Policy, notes_default_cast
from npu_jax.core.run import launch
from npu_jax.core.state import Context
from npu_jax.errors import check_choice
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.pool import pool_kernel
from npu_jax.mapping.pool import PoolPlan, make_pool_plan
from npu_jax.workload.pool import KINDS, canonicalize


def run_pool(
    p: PoolPlan,
    x5,
    policy,
    *,
    trace_capacity: int = 0,
    move_data: bool = True,
    checks=None,
    name: str = "pool",
    l2_resident: tuple[str, ...] = (),
):
    """Launch the kernel on ``x5`` (N, C1, H, W, C0) in ``p.in_fmt``. Returns (y5, report), y5
    (N, C1, Ho, Wo, C0) in ``p.out_fmt``. ``l2_resident``: GM inputs (``"x"``) the kernel before
    left in L2."""
    plan, gm, kernel = pool_kernel(p)
    ins = {"x": jnp.asarray(x5).astype(DTYPES[p.in_fmt])}
    if any(s.name == "rcp" for s in gm):  # the reciprocal divisors, C0 lanes each (assist matrix)
        rcp = np.repeat((1.0 / p.counts())[None, :, :, None], p.c0, axis=3)
        ins["rcp"] = jnp.asarray(rcp, jnp.float32).astype(DTYPES[p.out_fmt])
    ctx = Context.of(
        plan, gm, policy, p.cores, trace_capacity=trace_capacity, move_data=move_data, checks=checks
    )
    outs, report = launch(
        kernel,
        ctx,
        ins,
        name=name,
        operand=p.in_fmt,
        workload=f"{p.kind} pool {p.g.describe()}",
        l2_resident=l2_resident,
        key=("pool", p),
        board=True,
        values_apart=True,  # its addresses are the plan's: a repeat call computes its outputs alone
    )
    return outs["y"], report


def pool_plan(
    x_shape,
    kind: str = "max",
    kernel=(2, 2),
    stride=1,
    padding=0,
    hw: HardwareConfig | None = None,
    policy: Policy | None = None,
    count_include_pad: bool = False,
    ceil_mode: bool = False,
    dilation=1,
    fn: str = "pool_plan",
) -> PoolPlan:
    """The :class:`~npu_jax.mapping.pool.PoolPlan` :func:`pool2d` launches for an input of ``x_shape``
    (same arguments): what ``npu_jax.cost.pool.predict`` prices without running the emulator."""
    hw = check_hw(hw, fn)
    policy = check_policy(policy, fn)
    check_choice(fn, "kind", kind, KINDS)
    count_include_pad = check_flag("count_include_pad", count_include_pad, fn)
    ceil_mode = check_flag("ceil_mode", ceil_mode, fn)
    g = canonicalize(fn, tuple(x_shape), kernel, stride, padding, dilation=dilation, ceil_mode=ceil_mode)
    return make_pool_plan(g, kind, count_include_pad, policy.operand, policy.output, hw)


@notes_default_cast("x")
def pool2d(
    x,
    kind: str = "max",
    kernel=(2, 2),
    stride=1,
    padding=0,
    hw: HardwareConfig | None = None,
    policy: Policy | None = None,
    *,
    count_include_pad: bool = False,
    ceil_mode: bool = False,
    dilation=1,
    timing_only: bool = False,
    trace: bool | int = False,
    checks=None,
):
    """2-D max or average pooling on the chip's vector cores, ONNX semantics. Returns ``(y, report)``.

    ONNX MaxPool / AveragePool: padded cells are ignored by max (they hold -inf) and count in an
    average's divisor only with ``count_include_pad``; ``ceil_mode`` as ONNX (a last window that
    would start in the padding is dropped). GlobalAveragePool is ``kind="avg", kernel="global"``
    (also :func:`global_avg_pool`), GlobalMaxPool ``kind="max", kernel="global"``. Not supported (refused): dilations other than 1, MaxPool's
    Indices output and ``storage_order``, 1-D / 3-D pooling.

    The kernel (``kernels/pool.py``, docs/pool.md) reads x as NC1HWC0 in GM and writes y likewise:
    the layout a network's activations have on the chip, so the conversion from and to NCHW at this
    boundary is not charged. Dtypes: x is converted to ``policy.operand`` and y is ``policy.output``
    (fp16 both by default); max is exact, an average's sums round to ``policy.output`` each tap.

    Args:
        x: (N, C, H, W) input.
        kind: ``"max"`` or ``"avg"``.
        kernel: int, (kh, kw), or ``"global"`` (the whole H x W).
        stride: int or (sh, sw) (ONNX default 1).
        padding: int, (ph, pw), ((top, bottom), (left, right)) -- ONNX pads [t, l, b, r] are
            ((t, b), (l, r)) -- or an ONNX auto_pad: ``"VALID"``, ``"SAME_UPPER"`` (``"SAME"``),
            ``"SAME_LOWER"``. Each side must be smaller than the kernel.
        hw: hardware (default ``presets.ascend910b()``); the kernel runs on ``hw.num_vector_cores``.
        policy: precision :class:`~npu_jax.Policy` (None = ``Policy()``).
        count_include_pad: ONNX AveragePool ``count_include_pad``.
        ceil_mode: ONNX ``ceil_mode``.
        dilation: only 1.
        timing_only: no data work (y is zeros); every cycle and byte of the report is unchanged.
        trace: keep per-core event traces (True = 4096 events, or a capacity).
        checks: sanitizers, as :func:`npu_jax.conv2d`.

    Returns:
        y (N, C, Ho, Wo) in ``policy.output`` format, and a Report (its cycles equal
        ``npu_jax.cost.pool.predict(plan)``'s, computed without running the emulator).

    Example:
        >>> import numpy as np, npu_jax
        >>> x = np.random.default_rng(0).standard_normal((1, 16, 8, 8))
        >>> y, rep = npu_jax.pool2d(x, "max", 3, stride=2, padding=1, hw=npu_jax.presets.tiny())
        >>> y.shape
        (1, 16, 4, 4)
    """
    fn = "pool2d"
    hw, policy, checks, cap = check_common(hw, policy, checks, trace, fn)
    x = as_array(fn, "x", x)
    timing_only = check_flag("timing_only", timing_only, fn)
    p = pool_plan(
        x.shape, kind, kernel, stride, padding, hw, policy, count_include_pad, ceil_mode, dilation, fn
    )
    g = p.g
    gm = 4 * (math.prod(x.shape) + 2 * g.n * p.c1 * p.c0 * g.ho * g.wo)
    state_bytes(fn, hw, p.cores, gm, cap, checks)
    (x,) = no_grad(fn, x)
    return _run_nchw(p, x, policy, trace_capacity=cap, move_data=not timing_only, checks=checks)


def _run_nchw(p: PoolPlan, x, policy, **launch):
    """:func:`run_pool` on an NCHW ``x`` (relaid NC1HWC0 at the boundary, uncharged), y back NCHW."""
    g = p.g
    x5 = nchw_to_nc1hwc0(x.astype(DTYPES[policy.operand]), p.c0)
    y5, report = run_pool(p, x5, policy, **launch)
    y = jnp.transpose(y5, (0, 1, 4, 2, 3)).reshape(g.n, p.c1 * p.c0, g.ho, g.wo)[:, : g.c]
    return y, report


def pool_nchw(x, hw, policy, *, checks=None, l2_resident=(), **pool):
    """A network layer's pooling: :func:`pool2d`'s kernel on ``x`` (arguments already checked by the
    ONNX reader) with what the schedule left in L2 (``l2_resident``: ``("x",)`` or none)."""
    hw, policy, checks, _ = check_common(hw, policy, checks, False, "pool_nchw")
    p = pool_plan(x.shape, hw=hw, policy=policy, **pool)
    return _run_nchw(p, x, policy, checks=checks, l2_resident=tuple(l2_resident))


@notes_default_cast("x")
def global_avg_pool(
    x,
    hw: HardwareConfig | None = None,
    policy: Policy | None = None,
    *,
    timing_only: bool = False,
    trace: bool | int = False,
    checks=None,
):
    """ONNX GlobalAveragePool: ``pool2d(x, "avg", "global", ...)``; y is (N, C, 1, 1)."""
    return pool2d(
        x, "avg", "global", hw=hw, policy=policy, timing_only=timing_only, trace=trace, checks=checks
    )


__all__ = ["global_avg_pool", "pool2d", "pool_nchw", "pool_plan", "run_pool"]

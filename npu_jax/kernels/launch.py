"""Launching the Conv2D program of a plan: its GM tensors laid out, the relayout kernel first where the
strategy reads NC1HWC0, then the conv kernel over the plan's cores."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from npu_jax.core import l2, wide
from npu_jax.core.buffers import DTYPES
from npu_jax.core.checks.config import Checks
from npu_jax.core.formats import oihw_to_kn
from npu_jax.core.policy import Policy
from npu_jax.core.run import kept_report, launch, timing_apart
from npu_jax.core.state import Context, GmSpec
from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.costs import cdiv
from npu_jax.hw.formats import itemsize
from npu_jax.kernels.conv import build_kernel, relayout_kernel
from npu_jax.kernels.values import block_diagonal, conv_values, covers
from npu_jax.mapping.conv import ConvPlan
from npu_jax.workload.conv import ConvGeometry

DATA_PATHS = ("values", "instructions")


def run_plan(
    p: ConvPlan,
    x,
    w,
    policy: Policy,
    trace_capacity: int = 0,
    *,
    bias=None,
    residual=None,
    scale=None,
    name: str | None = None,
    move_data: bool = True,
    checks=None,
    data_path: str = "values",
):
    """Launch a ConvPlan on x (N, C, H, W) and w (K, C, kh, kw), both at the bound's shape and in
    the operand format. Returns (y NHWC at the bound's shape, report). ``move_data=False`` is the
    timing-only mode: the same program, every cost and counter, and no data work at all.
    ``checks``: the sanitizers (None = the process default); findings raise after a concrete run.

    ``data_path``: ``"values"`` (default) runs the kernel timing-only, with its GM writes marked,
    and computes y apart in whole-tensor operations (``kernels/values.py``: the same arithmetic,
    the same bits) where that covers the plan and policy; ``"instructions"`` moves the data through
    every instruction. The report is the same either way.

    A fused epilogue (``p.epi``) reads ``bias`` (K,) in ``p.epi.bias_format`` and ``residual``
    (N, Ho, Wo, K) NHWC in ``p.epi.residual_format`` (an activation's format), when its steps use them;
    an int8 plan's dequantisation reads ``scale`` (K,) fp32 (its per-channel row, as a bias's).

    A plan under a tiling bound (``p.tiling_bound``, ``p.t`` possibly traced) runs timing-only.

    A grouped layer (``p.g.groups > 1``) runs as its dense view ``p.gv`` (``ConvPlan.sgroups``
    super-groups G' as an outer batch axis): x is viewed (N * G', C', H, W), the weights are laid
    out block-diagonal per super-group (G', K', C', kh, kw) offline, and y is written (N, Ho, Wo,
    G', K'), a view of (N, Ho, Wo, K).

    With the data computed apart, the report does not depend on x or w: it is computed once per
    (plan, policy, trace capacity, checks, name), concretely even inside a caller's trace, and
    kept (:func:`timing_report`), so a repeat call, or a jitted caller's program, does only the
    data work."""
    if p.tiling_bound is not None and move_data:
        raise ValueError("a plan under a tiling_bound runs timing-only: pass move_data=False.")
    if data_path not in DATA_PATHS:
        raise ValueError(f"data_path must be one of {DATA_PATHS}, got {data_path!r}.")
    e = p.epi
    if e is not None and e.row == "scale":  # the dequantisation's scales take the row's place
        if bias is not None:
            raise ValueError("an int8 plan's epilogue takes scale=, not bias=.")
        bias = jnp.broadcast_to(jnp.asarray(scale, jnp.float32), (p.g.k,)) if scale is not None else None
        if bias is not None and p.sgroups > 1:  # every super-group reads the same K' scales
            bias = bias[: p.gv.k]
    elif scale is not None:
        raise ValueError("scale= is the dequantisation's: it needs an int8 plan with fp16 or int8 output.")
    if not (move_data and data_path == "values" and covers(p, policy) and timing_apart()):
        return _launch_plan(p, x, w, policy, trace_capacity, bias, residual, name, move_data, False, checks)
    row_len = p.gv.k if e is not None and e.row == "scale" and p.sgroups > 1 else p.g.k
    bias_v = (
        _epi_input(e.row, bias, (row_len,), e.row_format) if e is not None and e.row is not None else None
    )
    res_v = None
    if e is not None and e.has("residual"):
        res_v = _epi_input("residual", residual, (p.g.n, p.g.ho, p.g.wo, p.g.k), e.residual_format)
    traced = any(isinstance(a, jax.core.Tracer) for a in (x, w, bias_v, res_v))
    shapes = (tuple(x.shape), tuple(w.shape), bias_v is not None, res_v is not None)
    report = timing_report(p, policy, trace_capacity, name, Checks.parse(checks), *shapes, traced)
    y = conv_values(p, policy, x, w, bias_v, res_v)
    return y.reshape(p.g.n, p.g.ho, p.g.wo, p.g.k), report


def timing_report(
    p: ConvPlan, policy: Policy, cap: int, name, checks, x_shape, w_shape, bias: bool, res: bool, traced=False
):
    """The report of plan ``p``'s kernel (and its relayout kernel) run timing-only with its GM writes
    marked: every cycle, byte, count, trace and sanitizer finding of a full run, none of which
    depends on the data. Computed on zeros of the inputs' shapes and kept (``run.kept_report``),
    under the policy's formats alone (:meth:`Policy.timing`)."""
    op, e, g = DTYPES[p.operand], p.epi, p.g
    policy = policy.timing()

    def make():
        return _launch_plan(
            p,
            np.zeros(x_shape, op),
            np.zeros(w_shape, op),
            policy,
            cap,
            np.zeros(_row_len(p), DTYPES[e.row_format]) if bias else None,
            np.zeros((g.n, g.ho, g.wo, g.k), DTYPES[e.residual_format]) if res else None,
            name,
            False,
            True,
            checks,
        )[1]

    key = ("conv", p, policy, cap, name, checks, tuple(x_shape), tuple(w_shape), bias, res)
    return kept_report(key, make, traced)


def _launch_plan(
    p: ConvPlan, x, w, policy: Policy, cap: int, bias, residual, name, move_data: bool, apart: bool, checks
):
    """Launch the kernel of ``p`` (after its relayout kernel): :func:`run_plan` moving the data
    through the instructions, or timing-only; ``apart``: timing-only with its GM writes marked."""
    user = p.g
    g, B, t, hw, op = p.gv, p.Bv, p.t, p.hw, p.operand
    G = p.sgroups
    w = block_diagonal(w, user, p.pack)
    x = x.reshape(B.n, B.c, B.h, B.w)  # free: a super-group's channels are contiguous
    extras = {}
    resident: tuple[str, ...] = ()  # GM tensors an earlier kernel of this sequence left in L2
    ext_x = (g.n, g.c, g.h, g.w)
    if p.spec.nc1hwc0_source:
        routs, rrep, resident = run_relayout(
            g, hw, op, x, policy, p.bound, cap, move_data=move_data, checks=checks, mark_writes=apart
        )
        extras["relayout"] = rrep
        # weights relaid offline (as a framework does at load time), Cout-block-major so each
        # block's K rows are one contiguous run: (n_cb, K_total, n)
        lead = (G,) if G > 1 else ()  # super-groups: a leading axis of the weights
        if p.tiling_bound is None and move_data:
            wk = jax.vmap(lambda a: _k_major(p, a))(w) if G > 1 else _k_major(p, w)
        else:  # timing-only (a traced n under a tiling bound, or the data computed apart): never read
            wk = np.zeros(lead + p.wkn_shape, DTYPES[op])
        gm_in = {"x5": routs["x5"], "wkn": wk}
        gm = (
            GmSpec(
                "x5", (B.n, p.c1_cap, B.h, B.w, p.c0), (B.n, p.c1_cap, B.h + p.h_in, B.w + p.w_in, p.c0), op
            ),
            # whole groups, so every window stays inside
            GmSpec("wkn", lead + p.wkn_shape, lead + p.wkn_pad, op),
        )
        extents = {"x5": (g.n, p.c1, g.h, g.w, p.c0), "wkn": lead + (p.n_cb, p.k_total, t.n)}
    else:
        gm_in = {"x": x, "w": w}
        lead = (G,) if G > 1 else ()
        gm = (
            GmSpec("x", (B.n, B.c, B.h, B.w), (B.n, p.c_pad, B.h + p.h_in, B.w + p.w_in), op),
            GmSpec("w", lead + (B.k, B.c, B.kh, B.kw), lead + (p.cout_pad, p.c_pad, B.kh, B.kw), op),
        )
        extents = {"x": ext_x, "w": lead + (g.k, g.c, g.kh, g.kw)}
    y_pad = p.y_pad
    y_shape = (B.n, p.ho_cap, p.wo_cap, B.k)
    if G > 1:  # (N, Ho, Wo, G', K')
        y_shape = (user.n, p.ho_cap, p.wo_cap, G, B.k)
    e = p.epi
    if e is not None and e.row is not None:
        gm += (GmSpec(e.row, (1, B.k), (1, y_pad[-1]), e.row_format),)
        gm_in[e.row] = _epi_input(e.row, bias, (B.k,), e.row_format).reshape(1, B.k)
        extents[e.row] = (1, g.k)
    if e is not None and e.has("residual"):
        gm += (GmSpec("res", y_shape, y_pad, e.residual_format),)
        gm_in["res"] = _epi_input("residual", residual, y_shape, e.residual_format)
        extents["res"] = (g.n, g.ho, g.wo, g.k)
    gm = gm + (GmSpec("y", y_shape, y_pad, p.output, output=True),)
    extents["y"] = (user.n, g.ho, g.wo, G, g.k) if G > 1 else (g.n, g.ho, g.wo, g.k)
    if p.l2_resident is not None:  # a network's schedule says what is in L2, not the relayout kernel
        names = {"x": gm[0].name, "w": gm[1].name, "row": e.row if e is not None else None, "res": "res"}
        resident = tuple(n for role in p.l2_resident if (n := names[role]) in gm_in)
    p.check_l2(gm)
    plan, kern = build_kernel(p)
    ctx = Context.of(
        plan, gm, policy, p.cores, trace_capacity=cap, move_data=move_data, mark_writes=apart, checks=checks
    )
    outs, report = launch(
        kern,
        ctx,
        gm_in,
        name=name or f"conv2d[{p.strategy}]",
        workload=user.describe() if p.bound is None else "",
        operand=op,
        extents=extents,
        l2_resident=resident,
        # a plan under a tiling bound may hold the caller's tracers: never kept
        key=("conv", p) if p.tiling_bound is None else None,
        board=True,
    )
    # launch has raised the sanitizers' findings and overlapping writes (when concrete)
    report = dataclasses.replace(report, extras=extras, useful_flops=_conv_flops(user))
    y = outs["y"]
    return (y.reshape(user.n, p.ho_cap, p.wo_cap, user.k) if G > 1 else y), report


def run_relayout(
    g: ConvGeometry,
    hw: HardwareConfig,
    op: str,
    x,
    policy: Policy,
    bound: ConvGeometry | None = None,
    trace_capacity: int = 0,
    *,
    move_data: bool = True,
    checks=None,
    mark_writes: bool = False,
):
    """The NCHW -> NC1HWC0 relayout kernel that the ``relayout`` and ``img2col`` strategies launch
    before the conv, on x (N, C, H, W) at the bound's shape in format ``op``: (its outputs, its
    report, the GM tensors it leaves in L2 for the conv). One compiled program per (layer, format,
    bound), shared by both strategies. ``mark_writes``: timing-only with its GM writes marked (the
    conv's data is computed apart, ``kernels/values.py``)."""
    rplan, rgm, rcores, rkern = relayout_kernel(g, hw, op, bound)
    rctx = Context.of(
        rplan,
        rgm,
        policy,
        rcores,
        trace_capacity=trace_capacity,
        move_data=move_data,
        mark_writes=mark_writes,
        checks=checks,
    )
    c0 = hw.c0(itemsize(op))
    routs, rrep = launch(
        rkern,
        rctx,
        {"x": x},
        name="relayout",
        operand=op,
        workload=f"NCHW->NC1HWC0 {x.shape[0]}x{x.shape[1]}x{x.shape[2]}x{x.shape[3]}",
        extents={"x": (g.n, g.c, g.h, g.w), "x5": (g.n, cdiv(g.c, c0), g.h, g.w, c0)},
        key=("relayout", g, op, bound),
        board=True,
    )
    return routs, rrep, l2.kept(hw, rgm)


def _row_len(p: ConvPlan) -> int:
    """Values of the epilogue's row: K, or one super-group's K' for the shared scales of a grouped
    int8 layer run as several super-groups."""
    return p.gv.k if p.epi.row == "scale" and p.sgroups > 1 else p.g.k


def _epi_input(what: str, arr, shape, fmt: str):
    if arr is None:
        raise ValueError(f"the epilogue has a {what!r} step but no {what} array was given.")
    arr = jnp.asarray(arr)
    if tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{what} must have shape {tuple(shape)}, got {tuple(arr.shape)}.")
    return arr.astype(DTYPES[fmt])


def _conv_flops(g: ConvGeometry):
    """2 N Ho Wo K C kh kw as a wide integer (exact past 2^31; traced geometry allowed)."""
    if isinstance(g.n, int):
        return wide.from_int(g.flops)
    return wide.mul(g.n * g.ho * g.wo, 2 * g.k * (g.c // g.groups) * g.kh * g.kw)


def _k_major(p: ConvPlan, w):
    """The weights (K, C, kh, kw) of the dense conv relaid offline (as a framework does at load
    time), Cout-block-major so each block's K rows are one contiguous run: (n_cb, K_total, n)."""
    g, B, t = p.gv, p.Bv, p.t
    wk = oihw_to_kn(_mask_layer(w, (g.k, g.c, g.kh, g.kw)), p.c0, g.kh, g.kw)
    wk = jnp.pad(wk, ((0, 0), (0, p.k_pad - B.k)))
    return wk.reshape(p.k_total_cap, p.n_cb_cap, t.n).transpose(1, 0, 2)


def _mask_layer(a, extent):
    """Zero everything of a bound-shaped array outside the layer's (traced) extent."""
    keep = jnp.ones(a.shape, jnp.bool_)
    for d, e in enumerate(extent):
        keep = keep & (lax.broadcasted_iota(jnp.int32, a.shape, d) < e)
    return jnp.where(keep, a, jnp.zeros((), a.dtype))


__all__ = ["DATA_PATHS", "run_plan", "run_relayout"]

"""Kernel adapters: one per layer kind, each pricing a layer (timing only) and running it (with data).

``estimate(layer, shapes, s, cache) -> (kernels, tiling)`` and ``run(layer, inputs, s, cache) ->
(output, kernels, tiling)``; ``kernels`` is a list of :class:`~npu_jax.model.report.KernelCost`, one
per launch. Both take the same tiling (the chooser's or the search's, cached per distinct layer) and
price the same kernels, so a run's cycles equal the estimate's (tested).

* conv: the closed-form model (``cost.predict`` of the plan the emulator launches); the part of the
  epilogue that does not fuse on this chip (``mapping.epilogue.split``) or, unfused, the whole chain:
  a vector kernel, priced by its closed form (``cost.eltwise.predict``, equal to the emulator), its
  input resident in L2 where the conv's launch keeps it (as ``fusion.conv2d_fused``'s unfused path);
* gemm: ``npu_jax.matmul`` (no timing-only mode and no closed form: priced by an emulator run on
  zeros, once per shape), the bias and activations in a vector kernel after it;
* pool: ``npu_jax.pool2d``, priced by its closed form (``cost.pool.predict``, equal to the emulator);
* eltwise: the vector kernel alone.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

import npu_jax
from npu_jax.api.eltwise import run_eltwise
from npu_jax.api.gemm import matmul
from npu_jax.api.pool import pool_nchw, pool_plan
from npu_jax.core.buffers import DTYPES
from npu_jax.core.policy import Policy
from npu_jax.cost.conv import l2_kept, layer_of, predict
from npu_jax.cost.eltwise import predict as eltwise_predict
from npu_jax.cost.many import lane_work, stacked_arrays
from npu_jax.cost.pool import predict as pool_predict
from npu_jax.errors import NpuError
from npu_jax.hw import costs
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels.launch import run_plan
from npu_jax.mapping.conv import make_plan
from npu_jax.mapping.eltwise import make_eltwise_plan
from npu_jax.mapping.epilogue import split
from npu_jax.model.plan import Layer
from npu_jax.model.report import KernelCost
from npu_jax.search.choose import choose_tiling
from npu_jax.workload.conv import canonicalize


@dataclasses.dataclass(frozen=True)
class Setting:
    """How a network is priced or run: hardware, precision policy, conv strategy, tiling source,
    fused or not, and the sanitizers of data runs."""

    hw: HardwareConfig
    policy: Policy
    strategy: str = "img2col"
    search: bool = False
    fused: bool = True
    checks: object = None


# ---- conv ---------------------------------------------------------------------------------------------------
def conv_geometry(layer: Layer, x_shape):
    a = layer.attrs
    return canonicalize(
        tuple(x_shape), layer.weight.shape, a["stride"], a["pads"], a["dilation"], a["groups"]
    )


def conv_flops(layer: Layer, x_shape, y_shape) -> int:
    """2 N Ho Wo K (C / groups) kh kw: the multiply-adds the layer's definition needs."""
    k, cg, kh, kw = layer.weight.shape
    return 2 * y_shape[0] * y_shape[2] * y_shape[3] * k * cg * kh * kw


def _tiling(g, epi, mid, s: Setting, cache: dict):
    """(tiling, how it was found), cached per distinct (layer, formats, epilogue, hw, strategy)."""
    op = s.policy.operand
    key = ("tiling", g, s.strategy, s.hw, op, mid, epi, s.search)
    if key not in cache:
        t = choose_tiling(g, s.strategy, s.hw, op, mid, epi)
        by = "chooser"
        if s.search and s.strategy == "img2col" and g.groups == 1:  # the search: dense img2col
            t, by = _searched(g, epi, mid, s, t)
        cache[key] = (t, by)
    return cache[key]


def _searched(g, epi, mid, s: Setting, chosen):
    """The tile search's tiling when it is legal for this plan and the model prices it no worse
    than the chooser's; else the chooser's."""
    r = npu_jax.search.tile_search(
        (g.n, g.c, g.h, g.w),
        (g.k, g.c, g.kh, g.kw),
        g.stride,
        ((g.pads[0], g.pads[1]), (g.pads[2], g.pads[3])),
        g.dilation,
        hw=s.hw,
        fused=epi is not None,
        verify=False,
    )
    op = s.policy.operand
    try:
        found = predict(make_plan(g, s.strategy, r.tiling, s.hw, op, mid, epi=epi)).cycles
    except NpuError:
        return chosen, "chooser (the search's tiling does not fit this epilogue)"
    if found <= predict(make_plan(g, s.strategy, chosen, s.hw, op, mid, epi=epi)).cycles:
        return r.tiling, "search"
    return chosen, "chooser (no worse than the search's)"


def _conv_plan(layer: Layer, x_shape, s: Setting, cache: dict):
    """(geometry, ConvPlan, steps left for a vector kernel, their input and output formats, how the
    tiling was found), cached per distinct (layer, chain, setting). Where the Cube kernel cannot take
    the fused part of the chain (a grouped conv of several super-groups; no tiling fits its buffers),
    the whole chain runs in the vector kernel after it, and ``by`` says why."""
    g = conv_geometry(layer, x_shape)
    key = ("convplan", g, layer.steps, s.hw, s.policy, s.strategy, s.search, s.fused)
    if key in cache:
        return cache[key]
    op = s.policy.operand
    epi, rest, mid, final = split(layer.steps, s.hw, s.policy, s.fused)
    try:
        t, by = _tiling(g, epi, mid, s, cache)
        p = make_plan(g, s.strategy, t, s.hw, op, mid, epi=epi)
    except NpuError as e:
        if epi is None:
            raise
        why = str(e)
        # unfused: the whole chain after the kernel (an int8 kernel keeps its own way out)
        e0, _, mid, final = split(() if s.policy.quantised else layer.steps, s.hw, s.policy, False)
        rest = layer.steps
        t, by = _tiling(g, e0, mid, s, cache)
        p = make_plan(g, s.strategy, t, s.hw, op, mid, epi=e0)
        try:  # the kernel's own refusal names the reason better than the chooser's
            make_plan(g, s.strategy, t, s.hw, op, final, epi=epi)
        except NpuError as refusal:
            why = str(refusal)
        by = f"{by}; epilogue not fused ({why})"
    cache[key] = (g, p, rest, mid, final, by)
    return cache[key]


def conv_bottleneck(p) -> str:
    """The lane with the most work summed over the cores, from the closed form's instruction costs
    (the epilogue's Fixpipe / Vector / MTE3 work counted as one lane), or ``HBM`` when the chip's HBM
    needs longer than the busiest core's summed work."""
    h = costs.HwNumbers.of(p.hw)
    # a grouped conv's schedule runs its dense view, which needs the channel block (layer_of(g, c0))
    L = layer_of(p.g, p.c0)
    c, q, pro = stacked_arrays([p], L, h)
    live = c["live"]
    lanes = lane_work(c, q, pro, p.hw.coupled)
    per_core = {
        "MTE1": lanes["MTE1"],
        "CUBE": lanes["CUBE"],
        "MTE2": lanes["MTE2"],
        ("VECTOR" if p.hw.coupled else "FIXP"): lanes["FIXP"] + lanes["VECTOR"] + lanes["MTE3"],
    }
    hbm = int(c["hbm"].sum() + (q["hbm"] * live).sum() + pro["hbm"].sum())
    busiest = max(int(np.max(v)) for v in per_core.values())
    if int(costs.hbm_cycles(h, hbm)) > busiest:
        return "HBM"
    return max(per_core, key=lambda lane: int(np.sum(per_core[lane])))


def _vector(
    label, steps, rows, cols, y, mid, final, s: Setting, *, bias=None, res=None, resident=(), data=True
):
    """The element-wise vector kernel over a (rows, cols) tensor: (z, KernelCost)."""
    ep = make_eltwise_plan(steps, rows, cols, mid, final, s.policy.vector, s.hw)
    names = {st.op for st in steps}
    z, rep = run_eltwise(
        ep,
        y,
        s.policy,
        bias=bias if "bias" in names else None,
        residual=res if "residual" in names else None,
        move_data=data,
        checks=s.checks if data else "none",
        name="eltwise[" + " -> ".join(map(str, steps)) + "]",
        l2_resident=resident,
    )
    if data:
        rep.check()
    return z, KernelCost.of(label, rep, output="z")


def _vector_cost(label, steps, rows, cols, mid, final, s, cache, resident=()):
    """The vector kernel's cost from its closed form (``cost.eltwise.predict``, equal to the
    emulator's report), cached per (plan, what is resident)."""
    ep = make_eltwise_plan(steps, rows, cols, mid, final, s.policy.vector, s.hw)
    key = ("eltwise", ep, tuple(resident))
    if key not in cache:
        q = eltwise_predict(ep, l2_resident=tuple(resident))
        name = "eltwise[" + " -> ".join(map(str, steps)) + "]"
        cache[key] = _cost(label, name, q, s.hw)
    return cache[key]


def _cost(label, name, q, hw, output="z") -> KernelCost:
    """A vector-side closed form's prediction ``q`` as a KernelCost (``output``: the GM tensor the
    kernel writes, kept in L2 or not)."""
    return KernelCost(
        label,
        name,
        q.cycles,
        hw.launch_cycles,
        q.gm_bytes,
        0,
        q.bottleneck,
        None,
        q.hbm_bytes,
        output in q.l2_kept,
    )


def _roles(l2, names: dict) -> tuple[str, ...]:
    """The GM inputs a vector kernel's launch finds resident: a schedule's roles ``l2`` (None: none,
    the layer schedule) mapped through ``names`` (role -> this kernel's GM input)."""
    return tuple(names[r] for r in (l2 or ()) if r in names)


def _resident_plan(p, l2):
    """The plan with what a network's schedule left in L2 (``ConvPlan.l2_resident``: roles)."""
    return p if l2 is None else dataclasses.replace(p, l2_resident=tuple(sorted(l2)))


def _epilogue_resident(p, l2) -> tuple[str, ...]:
    """What the vector kernel after a conv finds in L2: what the conv's launch kept (its output),
    and the residual and bias where the schedule left them (roles ``res``, ``row``)."""
    names = {"res": "res", "row": "bias"}
    return tuple(l2_kept(p)) + tuple(names[r] for r in (l2 or ()) if r in names)


def estimate_conv(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    g, p, rest, mid, final, by = _conv_plan(layer, shapes[0], s, cache)
    p = _resident_plan(p, l2)
    key = ("conv", p)
    if key not in cache:
        q = predict(p)
        flops = conv_flops(layer, shapes[0], (g.n, g.k, g.ho, g.wo))
        cache[key] = KernelCost(
            "conv",
            p.strategy,
            q.cycles,
            s.hw.launch_cycles,
            q.gm_bytes,
            flops,
            conv_bottleneck(p),
            None,
            q.hbm_bytes,
            "y" in l2_kept(p),
        )
    kernels = [cache[key]]
    if rest:
        rows = g.n * g.ho * g.wo
        kernels.append(
            _vector_cost("eltwise", rest, rows, g.k, mid, final, s, cache, _epilogue_resident(p, l2))
        )
    return kernels, (p.t, by)


def run_conv(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    x = inputs[0]
    g, p, rest, mid, final, by = _conv_plan(layer, x.shape, s, cache)
    p = _resident_plan(p, l2)
    op, e = s.policy.operand, p.epi
    res = None if len(inputs) < 2 else jnp.transpose(jnp.asarray(inputs[1]), (0, 2, 3, 1))
    y, rep = run_plan(
        p,
        jnp.asarray(x).astype(DTYPES[op]),
        jnp.asarray(layer.weight).astype(DTYPES[op]),
        s.policy,
        bias=layer.bias if e is not None and e.has("bias") else None,
        residual=res if e is not None and e.has("residual") else None,
        checks=s.checks,
        name=f"{layer.name}: conv2d[{p.strategy}]" + (f"+{e}" if e is not None else ""),
    )
    kc = KernelCost.of("conv", rep)
    kc = dataclasses.replace(kc, flops=conv_flops(layer, x.shape, (g.n, g.k, g.ho, g.wo)))
    kernels = [kc]
    if rest:
        rows = g.n * g.ho * g.wo
        z, kc2 = _vector(
            "eltwise",
            rest,
            rows,
            g.k,
            y.reshape(rows, g.k),
            mid,
            final,
            s,
            bias=layer.bias,
            res=None if res is None else res.reshape(rows, g.k),
            resident=_epilogue_resident(p, l2),
        )
        y = z.reshape(g.n, g.ho, g.wo, g.k)
        kernels.append(kc2)
    return jnp.transpose(y, (0, 3, 1, 2)), kernels, (p.t, by)


# ---- gemm ---------------------------------------------------------------------------------------------------
def _gemm_formats(s: Setting):
    return s.policy.output, s.policy.output


def estimate_gemm(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    """The matmul kernel takes nothing resident (``l2`` must be None or empty: a network schedule
    runs a GEMM layer as a stack of its own)."""
    assert not l2, l2
    m, k = shapes[0]
    n = layer.weight.shape[1]
    key = ("gemm", m, k, n, s.hw, s.policy)
    if key not in cache:
        a = jnp.zeros((m, k), DTYPES[s.policy.operand])
        # an int8 GEMM scaled on its way out needs a scale: its value does not change the timing
        scaled = {"scale": 1.0} if s.policy.quantised and s.policy.output != "int32" else {}
        c, rep = matmul(
            a, jnp.zeros((k, n), DTYPES[s.policy.operand]), hw=s.hw, policy=s.policy, checks="none", **scaled
        )
        cache[key] = (KernelCost.of("gemm", rep, 2 * m * k * n, "c"), ("y",) if "c" in rep.l2_kept else ())
    kc, resident = cache[key]
    kernels = [kc]
    if layer.steps:
        mid, final = _gemm_formats(s)
        kernels.append(_vector_cost("eltwise", layer.steps, m, n, mid, final, s, cache, resident))
    return kernels, (None, "default_tiling")


def run_gemm(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    assert not l2, l2
    a = jnp.asarray(inputs[0])
    m, k = a.shape
    n = layer.weight.shape[1]
    c, rep = matmul(a, layer.weight, hw=s.hw, policy=s.policy, checks=s.checks)
    kernels = [KernelCost.of("gemm", rep, 2 * m * k * n, "c")]
    if layer.steps:
        mid, final = _gemm_formats(s)
        c, kc = _vector(
            "eltwise",
            layer.steps,
            m,
            n,
            c,
            mid,
            final,
            s,
            bias=layer.bias,
            res=_rows(inputs[1]) if len(inputs) > 1 else None,
            resident=("y",) if "c" in rep.l2_kept else (),
        )
        kernels.append(kc)
    return c, kernels, (None, "default_tiling")


# ---- pool ---------------------------------------------------------------------------------------------------
def _pool_args(layer: Layer) -> dict:
    a = layer.attrs
    if a["global_pool"]:  # the whole plane: stride, padding and ceil_mode stay pool2d's defaults
        shape = dict(kernel="global")
    else:
        shape = dict(kernel=a["kernel"], stride=a["stride"], padding=a["pads"], ceil_mode=a["ceil_mode"])
    return dict(kind=a["kind"], count_include_pad=a["count_include_pad"], **shape)


def estimate_pool(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    """The pooling kernel's closed form (``cost.pool.predict`` of the plan ``pool2d`` launches)."""
    p = pool_plan(tuple(shapes[0]), hw=s.hw, policy=s.policy, **_pool_args(layer))
    resident = _roles(l2, {"x": "x"})
    key = ("pool", p, resident)
    if key not in cache:
        q = pool_predict(p, l2_resident=resident)
        cache[key] = _cost("pool", f"{p.kind} pool", q, s.hw, output="y")
    return [cache[key]], (None, "pool")


def run_pool(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    resident = _roles(l2, {"x": "x"})
    y, rep = pool_nchw(
        jnp.asarray(inputs[0]), s.hw, s.policy, checks=s.checks, l2_resident=resident, **_pool_args(layer)
    )
    return y, [KernelCost.of("pool", rep, flops=0)], (None, "pool")


# ---- element-wise -------------------------------------------------------------------------------------------
def _rows(x):
    """(rows, cols) of an activation with channels last: NCHW -> NHWC rows, (N, F) as it is."""
    x = jnp.asarray(x)
    return x if x.ndim == 2 else jnp.transpose(x, (0, 2, 3, 1)).reshape(-1, x.shape[1])


def _rc(shape) -> tuple[int, int]:
    return int(np.prod(shape)) // shape[1], shape[1]


ELTWISE_ROLES = {"x": "y", "res": "res"}  # a vector layer's inputs: the data, the second operand


def estimate_eltwise(layer: Layer, shapes, s: Setting, cache: dict, l2=None):
    rows, cols = _rc(shapes[0])
    fmt = s.policy.output
    resident = _roles(l2, ELTWISE_ROLES)
    return [_vector_cost("eltwise", layer.steps, rows, cols, fmt, fmt, s, cache, resident)], (None, "eltwise")


def run_eltwise_layer(layer: Layer, inputs, s: Setting, cache: dict, l2=None):
    x = jnp.asarray(inputs[0])
    rows, cols = _rc(x.shape)
    fmt = s.policy.output
    z, kc = _vector(
        "eltwise",
        layer.steps,
        rows,
        cols,
        _rows(x),
        fmt,
        fmt,
        s,
        res=_rows(inputs[1]) if len(inputs) > 1 else None,
        resident=_roles(l2, ELTWISE_ROLES),
    )
    if x.ndim == 2:
        return z, [kc], (None, "eltwise")
    n, c, h, w = x.shape
    return jnp.transpose(z.reshape(n, h, w, c), (0, 3, 1, 2)), [kc], (None, "eltwise")


ADAPTERS = {
    "conv": (estimate_conv, run_conv),
    "gemm": (estimate_gemm, run_gemm),
    "pool": (estimate_pool, run_pool),
    "eltwise": (estimate_eltwise, run_eltwise_layer),
}

__all__ = ["ADAPTERS", "Setting", "conv_bottleneck", "conv_flops", "conv_geometry"]

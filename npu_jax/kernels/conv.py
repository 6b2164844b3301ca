"""Tiled Conv2D on the emulated core: four strategies, one kernel skeleton.

A kernel engineer's path to a fast Conv2D, each step a real kernel on the instruction set:

``output_tiled``  every (output tile, Cout block) fetches the input window it needs (halo
                  included, NCHW in GM, converted to NC1HWC0 on the DMA) once per tap of the
                  kernel, and its weights (OIHW): taps, neighbouring tiles and Cout blocks re-read
                  the input, every tile re-reads the weights. The Cube gets one (c1, tap) fractal
                  of K per Mmad.
``input_tiled``   each input tile is fetched once and reused by every Cout block and tap; the
                  weights stay in L1 when they fit. Same DMA shapes and Cube mapping as above.
``relayout``      as ``input_tiled``, from an NC1HWC0 copy of the input (made by a separate relayout
                  kernel, reported on its own) and K-major weights: long contiguous bursts.
``img2col``       as ``relayout``, with the whole reduction C*kh*kw streamed onto the Cube in deep
                  Mmads (``k_l0``) and L1 / L0 double-buffered, as the vendor's template does.

The strategies differ only in what they move, when, and how they feed the Cube -- never in a factor
typed in. A grouped conv (``groups=``) runs as its dense view (``ConvPlan.gv``): super-groups of
packed groups with block-diagonal weights, the super-groups an outer batch axis of the items.

The output leaves L0C through Fixpipe (910B) or L0C -> UB -> MTE3 (910/310P) into an NHWC tensor
(N, Ho, Wo, K) in GM; the wrapper returns NCHW.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.core import board
from npu_jax.core.board import fori_loop
from npu_jax.core.buffers import Plan
from npu_jax.core.isa import Load3DGeometry
from npu_jax.core.state import GmSpec
from npu_jax.core.sync import Queue
from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.costs import round_up
from npu_jax.hw.formats import itemsize
from npu_jax.kernels import epilogue as epi_mod
from npu_jax.kernels.common import output_step, set_all, slot_flags, wait_all
from npu_jax.mapping.conv import ConvPlan
from npu_jax.mapping.epilogue import epilogue_slot_flags
from npu_jax.workload.conv import ConvGeometry


# ---- the kernel ---------------------------------------------------------------------------------
def build_kernel(p: ConvPlan):
    """Return (plan, kernel) for a ConvPlan; ``p.epi`` (fusion) replaces the plain output step.

    Shapes and structure come from ``p.T`` (the tiling bound, or the tiling); sizes, stages and loop
    counts from ``p.t``, which may then be traced: a window sized for the bound moves (and charges)
    only the tiling's part of it, and a ping-pong slot the tiling does not use is never flagged."""
    g, t, T, hw, sp = p.gv, p.t, p.T, p.hw, p.spec  # g: the dense conv run (a grouped layer's view)
    G = p.sgroups  # super-groups: an outer batch axis (x is viewed (N * G, C', H, W))
    plan, a = p.allocate()
    x_l1, w_l1, a_l0, b_l0, c_l0 = a["x"], a["w"], a["a"], a["b"], a["c"]
    sh, sw = g.stride
    dh, dw = g.dilation
    pt, _, pl, _ = g.pads
    geom = Load3DGeometry(g.kh, g.kw, (sh, sw), (dh, dw), out_w=t.wo)
    ncb, nparts, spp = p.n_cb, p.n_parts, p.steps_per_part
    cb_per = p.cb_per
    items = p.tiles_per_core * cb_per
    # K steps of one item: full parts of spp steps, then the last (possibly shorter) part
    steps_item = (nparts - 1) * spp + -(-(p.k_total - (nparts - 1) * p.k_l1) // t.k_l0)
    k_total, k_l1 = p.k_total, p.k_l1
    B = p.Bv
    IN, WT = 0, 2  # event-id bases: input slots 0-1, weight slots 2-3
    # resident weights or weights per part: under a tiling bound both are built and ``wr`` (traced)
    # picks the one that runs; otherwise only the tiling's own
    wr = t.weights_resident
    may_res = T.weights_resident
    may_part = not T.weights_resident or p.tiling_bound is not None
    by_part = _not(wr)
    res_rows = p.k_total_cap  # rows of one Cout block of resident weights in L1

    def input_window(core, n, r0, c0_, rows, cols):
        if sp.nc1hwc0_source:
            return core.gm_window(
                "x5",
                (n, 0, r0, c0_, 0),
                (1, p.c1_cap, p.h_in, p.w_in, p.c0),
                limit=(None, None, rows, cols, None),
            )
        return core.gm_window(
            "x", (n, 0, r0, c0_), (1, p.c1_cap * p.c0, p.h_in, p.w_in), limit=(None, None, rows, cols)
        )

    def copy_weights(core, dst, part, cb, when, res: bool, sg=0):
        """Weights for part ``part`` of Cout block ``cb`` (``res``, resident: all of the group
        starting at block ``cb``) of super-group ``sg`` into L1, rows in Load3D's K order: from the
        K-major copy (contiguous) or straight from OIHW (with super-groups, a leading G' axis)."""
        xp = board.xp(core)
        if sp.nc1hwc0_source and G > 1:  # (G', n_cb, K_total, n); never resident (ConvPlan)
            nv = xp.minimum(t.n, g.k - cb * t.n)
            rows = xp.minimum(k_l1, k_total - part * k_l1)
            win = core.gm_window(
                "wkn", (sg, cb, part * k_l1, 0), (1, 1, p.k_l1_cap, T.n), limit=(None, None, rows, nv)
            )
            return core.data_copy(dst=dst, src=win, when=when)
        if G > 1:
            win = core.gm_window(
                "w",
                (sg, cb * t.n, part * p.cin1_step * p.c0, 0, 0),
                (1, T.n, p.cin1_eff * p.c0, B.kh, B.kw),
                limit=(None, t.n, p.cin1_step * p.c0, None, None),
            )
            return core.data_copy(dst=dst, src=win, layout="oihw_to_kn", kernel=(g.kh, g.kw), when=when)
        if sp.nc1hwc0_source:  # the offline copy is Cout-block-major: (n_cb, K_total, n)
            if res:  # the group's own blocks (a bounded plan's window may be wider)
                win = core.gm_window(
                    "wkn", (cb, 0, 0), (p.cb_per_cap, p.k_total_cap, T.n), limit=(cb_per, None, None)
                )
            else:
                nv = xp.minimum(t.n, g.k - cb * t.n)
                rows = xp.minimum(k_l1, k_total - part * k_l1)  # this part's rows, not the next's
                win = core.gm_window(
                    "wkn", (cb, part * k_l1, 0), (1, p.k_l1_cap, T.n), limit=(None, rows, nv)
                )
            return core.data_copy(dst=dst, src=win, when=when)
        win = core.gm_window(
            "w",
            (cb * t.n, part * p.cin1_step * p.c0, 0, 0),
            (p.cb_per_cap * T.n if res else T.n, (p.c1_cap if res else p.cin1_eff) * p.c0, B.kh, B.kw),
            limit=(cb_per * t.n if res else t.n, None if res else p.cin1_step * p.c0, None, None),
        )
        return core.data_copy(
            dst=dst,
            src=win,
            layout="oihw_to_kn",
            kernel=(g.kh, g.kw),
            block_n=T.n if res else None,
            when=when,
        )

    l1_ids = [IN + s for s in range(T.l1_stages)]
    if may_part:
        l1_ids += [WT + s for s in range(T.l1_stages)]

    def in_use(event, i):
        """Whether the tiling uses a slot of the bound's: one with fewer (traced) stages, or with
        resident weights, never flags the others. A Python bool when the tiling's fields are."""
        if event == "MTE1_MTE2":
            weights = i >= WT
            stage_used = i - (WT if weights else IN) < t.l1_stages
            return _and(stage_used, by_part) if weights else stage_used
        return i < t.l0_stages if event == "M_MTE1" else True

    slots = slot_flags(hw, l1_ids, T.l0_stages) + epilogue_slot_flags(p.epi)
    whens = [in_use(e, i) for e, i in slots]

    def kernel(core, b):
        xp = board.xp(core)
        core = set_all(core, slots, whens)
        sgrp, cgrp = b // t.cout_split, b % t.cout_split
        cores_run = p.cores_sp_run
        runs = sgrp < cores_run  # false on a core of a bound's launch that this tiling leaves idle
        if p.tiling_bound is not None:  # each running core's share of the GM rate, as in its own run
            core = core.replace(active=cores_run * t.cout_split)
        cb0 = cgrp * cb_per  # this core's first Cout block
        nb_live = xp.clip(ncb - cb0, 0, cb_per)  # Cout blocks this core group really owns
        if may_res:  # the group's weights, once per core
            core = copy_weights(core, w_l1[0], 0, cb0, _and((cb0 < ncb) & runs, wr), res=True)
            core = core.set_flag("MTE2_MTE1", WT, wr).wait_flag("MTE2_MTE1", WT, wr)
        if p.epi is not None and p.epi.row is not None:  # the group's bias / scale values, once per core
            end = xp.minimum(g.k, (cb0 + cb_per) * t.n)  # the group's own columns
            core = epi_mod.load_row(core, p.epi, a, cb0 * t.n, p.cb_per_cap * t.n, end, (cb0 < ncb) & runs)

        def item(j, core):
            tile = sgrp + (j // cb_per) * cores_run
            cbl = j % cb_per
            live_idx = (j // cb_per) * nb_live + cbl  # this item's rank among the core's live items
            cb = cb0 + cbl
            live = (tile < p.n_tiles) & (cb < ncb) & runs
            n = tile // (p.n_th * p.n_tw)  # image of the dense view: (image, super-group)
            th = (tile // p.n_tw) % p.n_th
            tw = tile % p.n_tw
            oh0, ow0 = th * t.ho, tw * t.wo
            ho_v = xp.minimum(t.ho, g.ho - oh0)
            wo_v = xp.minimum(t.wo, g.wo - ow0)
            m_eff = (ho_v - 1) * t.wo + wo_v  # rows of L0C that hold real outputs (row pitch t.wo)
            nv = xp.minimum(t.n, g.k - cb * t.n)
            core = core.at_tile(item=j, tile=tile, cout_block=cb)
            # ---- input tile: fetched per item, or once per spatial tile (reuse) ----
            fetch = live & ((cbl == 0) if sp.reuse_input else True)
            fidx = (j // cb_per) if sp.reuse_input else j
            xs = fidx % t.l1_stages
            ih0, iw0 = oh0 * sh - pt, ow0 * sw - pl
            # a tile whose window starts past the image (padding wider than the kernel's reach)
            # fetches nothing, from the image's edge: its window stays inside the stored tensor
            r0, c0_ = xp.clip(ih0, 0, g.h), xp.clip(iw0, 0, g.w)
            rows = xp.minimum((ho_v - 1) * sh + (g.kh - 1) * dh + 1 + ih0, g.h) - r0
            cols = xp.minimum((wo_v - 1) * sw + (g.kw - 1) * dw + 1 + iw0, g.w) - c0_
            core = core.wait_flag("MTE1_MTE2", IN + xs, fetch)

            def fetch_window(_, core):
                return core.data_copy(
                    dst=x_l1[xs],
                    src=input_window(core, n, r0, c0_, rows, cols),
                    layout=None if sp.nc1hwc0_source else "nc1hwc0",
                    when=fetch,
                )

            # output tiling's defining waste: no reuse of the window across taps either (a direct
            # conv bringing each tap's operand from GM): the window again for every tap
            core = fori_loop(0, 1 if sp.reuse_input else g.kh * g.kw, fetch_window, core)
            core = core.set_flag("MTE2_MTE1", IN + xs, fetch)
            core = core.wait_flag("MTE2_MTE1", IN + xs, fetch)

            def part(pi, core):
                # ping-pong slots advance with *live* work only (an idle item, e.g. a Cout block
                # past the end of a core's group, must not leave a slot unused)
                gp = live_idx * nparts + pi
                ws = gp % t.l1_stages
                kbase = pi * k_l1
                go_w = _and(live, by_part)
                if may_part:
                    core = core.wait_flag("MTE1_MTE2", WT + ws, go_w)
                    core = copy_weights(core, w_l1[ws], pi, cb, go_w, res=False, sg=n % G if G > 1 else 0)
                    core = core.set_flag("MTE2_MTE1", WT + ws, go_w)
                    core = core.wait_flag("MTE2_MTE1", WT + ws, go_w)
                wstage = _pick(wr, 0, ws)

                def step(q, core):
                    u = (live_idx * steps_item + pi * spp + q) % t.l0_stages
                    ks = kbase + q * t.k_l0
                    kv = xp.clip(xp.minimum(k_l1 - q * t.k_l0, k_total - ks), 0, t.k_l0)
                    go = live & (kv > 0)
                    core = core.at_tile(item=j, tile=tile, cout_block=cb, k=ks)
                    core = core.wait_flag("M_MTE1", u, go)
                    core = core.load3d(
                        dst=a_l0[u],
                        src=x_l1[xs],
                        geom=geom,
                        k_start=ks,
                        m_start=0,
                        pad_top=r0 - ih0,
                        pad_left=c0_ - iw0,
                        h_valid=rows,
                        w_valid=cols,
                        m_valid=m_eff,
                        k_valid=t.k_l0,
                        when=go,
                    )
                    wrow = _pick(wr, cbl * res_rows + ks, q * t.k_l0)
                    core = core.load2d(
                        dst=b_l0[u], src=w_l1[wstage], start=(wrow, 0), valid=(kv, nv), when=go
                    )
                    core = core.set_flag("MTE1_M", u, go).wait_flag("MTE1_M", u, go)
                    core = core.mmad(
                        dst=c_l0[0],
                        a=a_l0[u],
                        b=b_l0[u],
                        m=m_eff,
                        n=nv,
                        k=kv,
                        init=(pi == 0) & (q == 0),
                        when=go,
                    )
                    return core.set_flag("M_MTE1", u, go)

                core = fori_loop(0, spp, step, core)
                if may_part:
                    core = core.set_flag("MTE1_MTE2", WT + ws, go_w)
                return core

            core = fori_loop(0, nparts, part, core)
            last_cb = (cbl == cb_per - 1) | (cb == ncb - 1)
            release = live & (last_cb if sp.reuse_input else True)
            core = core.set_flag("MTE1_MTE2", IN + xs, release)
            core = core.at_tile(item=j, tile=tile, cout_block=cb)
            # ---- epilogue: L0C -> GM (NHWC) ----
            if G > 1:  # y (N, Ho, Wo, G', K')
                y_win = core.gm_window(
                    "y",
                    (n // G, oh0, ow0, n % G, cb * t.n),
                    (1, T.ho, T.wo, 1, T.n),
                    limit=(None, ho_v, wo_v, None, nv),
                )
            else:
                y_win = core.gm_window(
                    "y", (n, oh0, ow0, cb * t.n), (1, T.ho, T.wo, T.n), limit=(None, ho_v, wo_v, nv)
                )
            if p.epi is not None:
                res_win = (
                    core.gm_window("res", (n, oh0, ow0, cb * t.n), (1, t.ho, t.wo, t.n))
                    if p.epi.has("residual")
                    else None
                )
                return epi_mod.emit(core, p.epi, a, c_l0, y_win, res_win, cbl * t.n, m_eff, nv, t.n, live)
            return output_step(core, hw, c_l0, a.get("ub"), y_win, m_eff, nv, live)

        core = fori_loop(0, items, item, core)
        return wait_all(core, slots, whens)

    return plan, kernel


def _np(*vs) -> bool:
    """Whether none of ``vs`` is a JAX array (the timing Board's numpy values, or Python's)."""
    return not any(isinstance(v, jax.Array) for v in vs)


def _not(v):
    """``not v`` for a Python bool, elementwise for an array (numpy on the Board, else possibly traced)."""
    if isinstance(v, bool):
        return not v
    return ~np.asarray(v, bool) if _np(v) else ~jnp.asarray(v, jnp.bool_)


def _and(a, b):
    """``a and b`` for Python bools, elementwise once either is an array (possibly traced)."""
    if isinstance(a, bool) and isinstance(b, bool):
        return a and b
    return np.logical_and(a, b) if _np(a, b) else jnp.logical_and(a, b)


def _pick(c, a, b):
    """``a if c else b``: in Python for a Python bool ``c``, ``jnp.where`` for a traced one."""
    if isinstance(c, bool):
        return a if c else b
    return np.where(c, a, b) if _np(c, a, b) else jnp.where(c, a, b)


# ---- the relayout kernel (NCHW -> NC1HWC0 in GM) -------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RelayoutPlan:
    """The relayout kernel's work split (read by the kernel and by ``cost/relayout.py``): bands of
    ``rows`` rows of one C0 block of one image, ``n_items`` = N * C1 * bands of them, item ``it``
    on core ``it % cores`` (``per_core`` items each)."""

    c0: int
    rows: int
    c1: int
    n_bands: int
    n_items: int
    cores: int
    per_core: int

    def item(self, it):
        """(image, C0 block, first row) of item ``it`` (ints or arrays); its rows: ``rows``, the last
        band's clipped at the layer's height."""
        n, rest = it // (self.c1 * self.n_bands), it % (self.c1 * self.n_bands)
        ci, band = rest // self.n_bands, rest % self.n_bands
        return n, ci, band * self.rows


def relayout_plan(
    g: ConvGeometry, hw: HardwareConfig, op: str, bound: ConvGeometry | None = None
) -> RelayoutPlan:
    """The relayout kernel's split of layer ``g`` (inside ``bound``'s buffers, if given): bands as
    tall as half of UB (double-buffered) holds at the bound's width."""
    B = g if bound is None else bound
    c0 = hw.c0(itemsize(op))
    stage_bytes = hw.ub_bytes // 2 - hw.ub_align
    rows = max(1, min(B.h, stage_bytes // (B.w * c0 * itemsize(op))))
    c1 = -(-g.c // c0)
    n_bands = -(-g.h // rows)
    n_items = g.n * c1 * n_bands
    cores = max(1, min(hw.num_cores, B.n * -(-B.c // c0) * -(-B.h // rows)))
    return RelayoutPlan(c0, rows, c1, n_bands, n_items, cores, -(-n_items // cores))


def relayout_kernel(g: ConvGeometry, hw: HardwareConfig, op: str, bound: ConvGeometry | None = None):
    """A vector-side kernel: NCHW bands in (MTE2, converted on the DMA) -> UB -> NC1HWC0 out (MTE3),
    double-buffered with a queue (split by :func:`relayout_plan`). Returns (plan, gm specs, cores,
    kernel)."""
    B = g if bound is None else bound
    r = relayout_plan(g, hw, op, bound)
    c0, rows, n_items, ncores, per_core = r.c0, r.rows, r.n_items, r.cores, r.per_core
    c1_cap = -(-B.c // c0)
    plan = Plan(hw)
    buf = plan.alloc("UB", "band", (rows, B.w, c0), op, stages=2)
    q = Queue("MTE2", "MTE3", buf)

    def kernel(core, b):
        core = q.init(core)
        xp = board.xp(core)

        def item(j, core):
            it = b + j * ncores
            live = it < n_items
            n, ci, r0 = r.item(it)
            nr = xp.minimum(rows, g.h - r0)
            core = q.alloc_tensor(core, j, live)
            core = core.data_copy(
                dst=q.slot(j),
                src=core.gm_window(
                    "x", (n, ci * c0, r0, 0), (1, c0, rows, B.w), limit=(None, None, nr, None)
                ),
                layout="nc1hwc0",
                when=live,
            )
            core = q.enque(core, j, live)
            core = q.deque(core, j, live)
            core = core.data_copy(
                dst=core.gm_window(
                    "x5", (n, ci, r0, 0, 0), (1, 1, rows, B.w, c0), limit=(None, None, nr, None, None)
                ),
                src=q.slot(j),
                when=live,
            )
            return q.free(core, j, live)

        core = fori_loop(0, per_core, item, core)
        return q.drain(core)

    gm = (
        GmSpec("x", (B.n, B.c, B.h, B.w), (B.n, c1_cap * c0, round_up(B.h, rows), B.w), op),
        GmSpec(
            "x5", (B.n, c1_cap, B.h, B.w, c0), (B.n, c1_cap, round_up(B.h, rows), B.w, c0), op, output=True
        ),
    )
    return plan, gm, ncores, kernel

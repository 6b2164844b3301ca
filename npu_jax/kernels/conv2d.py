"""Tiled Conv2D on the emulated core: four strategies, one kernel skeleton.

A kernel engineer's path to a fast Conv2D, each step a real kernel on the instruction set:

``output_tiled``  every (output tile, Cout block) fetches the input window it needs (halo
                  included, NCHW in GM, converted to NC1HWC0 on the DMA) and its weights (OIHW);
                  neighbouring tiles and every Cout block re-read the input, every tile re-reads
                  the weights. The Cube gets one (c1, tap) fractal of K per Mmad.
``input_tiled``   each input tile is fetched once and reused by every Cout block; the weights stay
                  in L1 when they fit. Same DMA shapes and Cube mapping as above.
``relayout``      as ``input_tiled``, from an NC1HWC0 copy of the input (made by a separate relayout
                  kernel, reported on its own) and K-major weights: long contiguous bursts.
``img2col``       as ``relayout``, with the whole reduction C*kh*kw streamed onto the Cube in deep
                  Mmads (``k_l0``) and L1 / L0 double-buffered, as the vendor's template does.

The strategies differ only in what they move, when, and how they feed the Cube -- never in a factor
typed in. The output leaves L0C through Fixpipe (910B) or L0C -> UB -> MTE3 (910/310P) into an NHWC
tensor (N, Ho, Wo, K) in GM; the wrapper returns NCHW.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from npu_jax.core.buffers import DTYPES, Plan, itemsize
from npu_jax.core.instructions import Load3DGeometry
from npu_jax.core.policy import Policy
from npu_jax.core.run import launch
from npu_jax.core.state import Context, GmSpec
from npu_jax.errors import TilingError
from npu_jax.hw.config import HardwareConfig
from npu_jax.kernels import epilogue as epi_mod
from npu_jax.kernels.common import output_step, set_all, slot_flags, wait_all
from npu_jax.kernels.conv_geometry import ConvGeometry, canonicalize
from npu_jax.kernels.epilogue import EpiloguePlan

STRATEGIES = ("output_tiled", "input_tiled", "relayout", "img2col")


@dataclasses.dataclass(frozen=True)
class StrategySpec:
    """What a strategy does, structurally."""

    reuse_input: bool  # input tile fetched once per spatial tile, reused by all Cout blocks
    nc1hwc0_source: bool  # input relaid out to NC1HWC0 (and weights K-major) in GM first
    deep_k: bool  # Mmads k_l0 deep over the whole reduction vs one (c1, tap) fractal each
    double_buffer: bool  # L1 and L0 ping-pong
    resident_weights_allowed: bool  # weights may stay in L1 across tiles


SPECS = {
    "output_tiled": StrategySpec(False, False, False, False, False),
    "input_tiled": StrategySpec(True, False, False, False, True),
    "relayout": StrategySpec(True, True, False, False, True),
    "img2col": StrategySpec(True, True, True, True, True),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvTiling:
    """Tile sizes of the Conv2D kernel (vendor vocabulary in brackets).

    Attributes:
        ho, wo: output tile rows and cols [hoL1, woL1]; L0C holds round16(ho*wo) x n fp32.
        n: Cout block [nL0 = nBL1], a multiple of 16.
        cin1: input-channel blocks (of C0) per weights part in L1 [kBL1 / (kh kw C0)].
        k_l0: Mmad depth [kL0], a multiple of C0; the fractal strategies use k_l0 = C0.
        weights_resident: all weights loaded into L1 once per core and kept.
        l1_stages, l0_stages: 1 (serial) or 2 (ping-pong) [pBufferFlag].
        cores: cores to use (None = the preset's, capped by the work available).
        cout_split: core groups along Cout: the cores form a (spatial x cout_split) grid, each
            group owning a contiguous range of Cout blocks (and only their weights).
    """

    ho: int
    wo: int
    n: int
    cin1: int
    k_l0: int
    weights_resident: bool = False
    l1_stages: int = 1
    l0_stages: int = 1
    cores: int | None = None
    cout_split: int = 1

    def __post_init__(self):
        for name in ("ho", "wo", "n", "cin1", "k_l0", "cout_split"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise TilingError(f"ConvTiling.{name} must be a positive int, got {v!r}.")
        if self.n % 16:
            raise TilingError(f"ConvTiling.n (Cout block) must be a multiple of 16, got {self.n}.")
        for name in ("l1_stages", "l0_stages"):
            if getattr(self, name) not in (1, 2):
                raise TilingError(f"ConvTiling.{name} must be 1 or 2, got {getattr(self, name)!r}.")
        if self.cores is not None and (not isinstance(self.cores, int) or self.cores < 1):
            raise TilingError(f"ConvTiling.cores must be None or an int >= 1, got {self.cores!r}.")


def _r(x: int, m: int) -> int:
    return -(-x // m) * m


def _min(a, b):
    """min() for Python ints, jnp.minimum once either side is traced."""
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return jnp.minimum(a, b)


@dataclasses.dataclass(frozen=True)
class ConvPlan:
    """Everything about one (layer, strategy, tiling, hw): derived sizes and loop counts.

    ``g`` is the layer; ``bound`` (default ``g``) is a layer at least as large in every dimension
    that fixes the *shapes* (allocations, GM tensors, windows). With ``bound`` static and ``g``'s
    fields traced, one compiled kernel runs every layer that fits (the hypothesis tests do this).
    Static properties read ``bound``; loop counts and index arithmetic read ``g``.
    The kernel and the closed-form cost model both read this, so they cannot disagree on shapes.
    ``epi`` is the fused epilogue (None: plain conversion on the way out); ``output`` is then the
    format the kernel writes.
    """

    g: ConvGeometry
    strategy: str
    t: ConvTiling
    hw: HardwareConfig
    operand: str
    output: str = "fp16"
    bound: ConvGeometry | None = None
    epi: EpiloguePlan | None = None

    @property
    def B(self) -> ConvGeometry:
        return self.g if self.bound is None else self.bound

    @property
    def spec(self) -> StrategySpec:
        return SPECS[self.strategy]

    @property
    def c0(self) -> int:
        return 32 // itemsize(self.operand)

    # ---- static: shapes of allocations and windows (from the bound) ----
    @property
    def c1_cap(self) -> int:
        return -(-self.B.c // self.c0)

    @property
    def k_total_cap(self) -> int:
        return self.c1_cap * self.B.kh * self.B.kw * self.c0

    @property
    def cin1_eff(self) -> int:
        """Channel blocks per weight part, as allocated: min(cin1, C1)."""
        return min(self.t.cin1, self.c1_cap)

    @property
    def k_l1_cap(self) -> int:
        return self.cin1_eff * self.B.kh * self.B.kw * self.c0

    @property
    def h_in(self) -> int:
        return self.B.in_extent(self.t.ho, 0)

    @property
    def w_in(self) -> int:
        return self.B.in_extent(self.t.wo, 1)

    @property
    def m_t(self) -> int:
        return _r(self.t.ho * self.t.wo, 16)

    @property
    def k_pad(self) -> int:
        return -(-self.B.k // self.t.n) * self.t.n

    @property
    def n_cb_cap(self) -> int:
        return -(-self.B.k // self.t.n)

    @property
    def ho_cap(self) -> int:
        """Most output rows any layer inside the bound can have (stride 1, 1-tap kernel)."""
        B = self.B
        return B.ho if self.bound is None else B.h + B.pads[0] + B.pads[1]

    @property
    def wo_cap(self) -> int:
        B = self.B
        return B.wo if self.bound is None else B.w + B.pads[2] + B.pads[3]

    @property
    def cb_per_cap(self) -> int:
        """Cout blocks per core group (static; the last group may own fewer)."""
        return -(-self.n_cb_cap // self.t.cout_split)

    @property
    def cores_sp(self) -> int:
        """Cores per Cout group, each taking spatial tiles round-robin."""
        want = self.hw.num_cores if self.t.cores is None else self.t.cores
        n_tiles = self.B.n * -(-self.ho_cap // self.t.ho) * -(-self.wo_cap // self.t.wo)
        return max(1, min(want // self.t.cout_split, n_tiles))

    @property
    def cores(self) -> int:
        return self.cores_sp * self.t.cout_split

    # ---- dynamic: loop counts of the actual layer ----
    @property
    def c1(self):
        return -(-self.g.c // self.c0)

    @property
    def k_total(self):
        return self.c1 * self.g.kh * self.g.kw * self.c0

    @property
    def k_l1(self):
        return _min(self.t.cin1, self.c1) * self.g.kh * self.g.kw * self.c0

    @property
    def n_parts(self):
        return -(-self.c1 // self.t.cin1)

    @property
    def steps_per_part(self):
        return -(-self.k_l1 // self.t.k_l0)

    @property
    def n_th(self):
        return -(-self.g.ho // self.t.ho)

    @property
    def n_tw(self):
        return -(-self.g.wo // self.t.wo)

    @property
    def n_tiles(self):
        return self.g.n * self.n_th * self.n_tw

    @property
    def n_cb(self):
        return -(-self.g.k // self.t.n)

    @property
    def tiles_per_core(self):
        return -(-self.n_tiles // self.cores_sp)

    @property
    def cb_per(self):
        """Cout blocks per core group for the actual layer."""
        return -(-self.n_cb // self.t.cout_split)

    def validate(self) -> None:
        t, sp, c0 = self.t, self.spec, self.c0
        if t.cores is not None and t.cores > self.hw.num_cores:
            raise TilingError(
                f"ConvTiling.cores={t.cores} exceeds {self.hw.name}'s {self.hw.num_cores} "
                f"cores; use cores <= {self.hw.num_cores} or None."
            )
        want = self.hw.num_cores if t.cores is None else t.cores
        if t.cout_split > want or t.cout_split > self.n_cb_cap:
            raise TilingError(
                f"ConvTiling.cout_split={t.cout_split} needs at least that many cores "
                f"({want}) and Cout blocks ({self.n_cb_cap} of n={t.n}); lower it."
            )
        if t.k_l0 % c0:
            raise TilingError(
                f"ConvTiling.k_l0 must be a multiple of C0={c0} ({self.operand}), got {t.k_l0}."
            )
        if not sp.deep_k and t.k_l0 != c0:
            raise TilingError(
                f"strategy {self.strategy!r} feeds the Cube one (c1, tap) fractal per Mmad: "
                f"k_l0 must be C0={c0}, got {t.k_l0}. Use strategy='img2col' for deep Mmads."
            )
        if not sp.double_buffer and (t.l1_stages, t.l0_stages) != (1, 1):
            raise TilingError(
                f"strategy {self.strategy!r} is single-buffered (l1_stages=l0_stages=1); "
                f"got {t.l1_stages}, {t.l0_stages}. Double buffering is img2col's step."
            )
        if t.weights_resident and not sp.resident_weights_allowed:
            raise TilingError(
                f"strategy {self.strategy!r} re-fetches weights per output tile; "
                f"weights_resident must be False."
            )
        if t.weights_resident and t.cin1 < self.c1_cap:
            raise TilingError(
                f"weights_resident needs the whole reduction in L1: cin1 must be >= "
                f"C1={self.c1_cap}, got {t.cin1}."
            )
        from npu_jax.errors import AlignmentError, CapacityError
        from npu_jax.kernels.conv_geometry import tiling_hint

        try:
            self.allocate()  # capacity and alignment, with the buffer named
        except (CapacityError, AlignmentError) as e:
            raise tiling_hint(
                e,
                {
                    "x_l1": ("ho", "wo", "l1_stages"),
                    "w_l1": ("cin1", "n", "weights_resident"),
                    "a_l0": ("ho", "wo", "k_l0", "l0_stages"),
                    "b_l0": ("k_l0", "n", "l0_stages"),
                    "c_l0c": ("ho", "wo", "n"),
                    "y_ub": ("ho", "wo", "n"),
                    "res_ub": ("ho", "wo", "n"),
                    "out_ub": ("ho", "wo", "n"),
                    "bias_l1": ("n", "cout_split"),
                    "bias_ub": ("n", "cout_split"),
                },
                t,
            ) from None

    def allocate(self) -> tuple[Plan, dict]:
        """Allocate every buffer; raises CapacityError naming the buffer that overflows."""
        hw, t, op = self.hw, self.t, self.operand
        plan = Plan(hw)
        a = {}
        a["x"] = plan.alloc(
            "L1", "x_l1", (self.c1_cap, self.h_in, self.w_in, self.c0), op, stages=t.l1_stages, fmt="NC1HWC0"
        )
        # weight rows rounded up to whole k_l0 steps so every LoadData window stays inside
        if t.weights_resident:  # the group's Cout blocks, block-major: block j is rows [j K, (j+1) K)
            a["w"] = plan.alloc(
                "L1", "w_l1", (self.cb_per_cap * self.k_total_cap + t.k_l0, t.n), op, fmt="ND"
            )
        else:
            a["w"] = plan.alloc(
                "L1", "w_l1", (_r(self.k_l1_cap, t.k_l0), t.n), op, stages=t.l1_stages, fmt="ND"
            )
        a["a"] = plan.alloc("L0A", "a_l0", (self.m_t, t.k_l0), op, stages=t.l0_stages, fmt="ZZ")
        a["b"] = plan.alloc("L0B", "b_l0", (t.k_l0, t.n), op, stages=t.l0_stages, fmt="ZN")
        a["c"] = plan.alloc("L0C", "c_l0c", (self.m_t, t.n), "fp32", fmt="NZ")
        if self.epi is not None:
            a.update(epi_mod.allocate(plan, self.epi, self.m_t, t.n, self.cb_per_cap * t.n))
        elif hw.coupled:
            a["ub"] = plan.alloc("UB", "y_ub", (self.m_t, t.n), self.output)
        return plan, a


def make_plan(
    g: ConvGeometry,
    strategy: str,
    tiling: ConvTiling,
    hw: HardwareConfig,
    operand: str = "fp16",
    output: str = "fp16",
    bound: ConvGeometry | None = None,
    epi: EpiloguePlan | None = None,
) -> ConvPlan:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
    if not isinstance(tiling, ConvTiling):
        raise TypeError(f"tiling must be a ConvTiling or None, got {type(tiling).__name__}.")
    if epi is not None and epi.where == "fixpipe" and hw.coupled:
        raise ValueError(f"{hw.name} has no Fixpipe: its fused epilogue runs in UB (where='ub').")
    p = ConvPlan(g, strategy, tiling, hw, operand, output, bound, epi)
    p.validate()
    return p


# ---- the kernel ---------------------------------------------------------------------------------
def build_kernel(p: ConvPlan):
    """Return (plan, kernel) for a ConvPlan; ``p.epi`` (fusion) replaces the plain output step."""
    g, t, hw, sp = p.g, p.t, p.hw, p.spec
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
    B = p.B
    IN, WT = 0, 2  # event-id bases: input slots 0-1, weight slots 2-3
    w_cols = p.cb_per_cap * t.n if t.weights_resident else t.n
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

    def copy_weights(core, dst, part, cb, when):
        """Weights for part ``part`` of Cout block ``cb`` (resident: all of the group starting at
        block ``cb``) into L1, rows in Load3D's K order: from the K-major copy (contiguous) or
        straight from OIHW."""
        if sp.nc1hwc0_source:  # the offline copy is Cout-block-major: (n_cb, K_total, n)
            if t.weights_resident:
                win = core.gm_window("wkn", (cb, 0, 0), (p.cb_per_cap, p.k_total_cap, t.n))
            else:
                nv = jnp.minimum(t.n, g.k - cb * t.n)
                win = core.gm_window(
                    "wkn", (cb, part * k_l1, 0), (1, p.k_l1_cap, t.n), limit=(None, None, nv)
                )
            return core.data_copy(dst=dst, src=win, when=when)
        cin = p.c1_cap if t.weights_resident else p.cin1_eff
        win = core.gm_window(
            "w", (cb * t.n, part * p.cin1_eff * p.c0, 0, 0), (w_cols, cin * p.c0, B.kh, B.kw)
        )
        return core.data_copy(
            dst=dst,
            src=win,
            layout="oihw_to_kn",
            kernel=(g.kh, g.kw),
            block_n=t.n if t.weights_resident else None,
            when=when,
        )

    l1_ids = [IN + s for s in range(t.l1_stages)]
    if not t.weights_resident:
        l1_ids += [WT + s for s in range(t.l1_stages)]
    slots = slot_flags(hw, l1_ids, t.l0_stages) + epi_mod.slot_flags(p.epi)

    def kernel(core, b):
        core = set_all(core, slots)
        sgrp, cgrp = b // t.cout_split, b % t.cout_split
        cb0 = cgrp * cb_per  # this core's first Cout block
        nb_live = jnp.clip(ncb - cb0, 0, cb_per)  # Cout blocks this core group really owns
        if t.weights_resident:  # the group's weights, once per core
            core = copy_weights(core, w_l1[0], 0, cb0, cb0 < ncb)
            core = core.set_flag("MTE2_MTE1", WT).wait_flag("MTE2_MTE1", WT)
        if p.epi is not None and p.epi.has("bias"):  # the group's bias values, once per core
            core = epi_mod.load_bias(core, p.epi, a, cb0 * t.n, p.cb_per_cap * t.n, g.k, cb0 < ncb)

        def item(j, core):
            tile = sgrp + (j // cb_per) * p.cores_sp
            cbl = j % cb_per
            live_idx = (j // cb_per) * nb_live + cbl  # this item's rank among the core's live items
            cb = cb0 + cbl
            live = (tile < p.n_tiles) & (cb < ncb)
            n = tile // (p.n_th * p.n_tw)
            th = (tile // p.n_tw) % p.n_th
            tw = tile % p.n_tw
            oh0, ow0 = th * t.ho, tw * t.wo
            ho_v = jnp.minimum(t.ho, g.ho - oh0)
            wo_v = jnp.minimum(t.wo, g.wo - ow0)
            m_eff = (ho_v - 1) * t.wo + wo_v  # rows of L0C that hold real outputs (row pitch t.wo)
            nv = jnp.minimum(t.n, g.k - cb * t.n)
            core = core.at_tile(item=j, tile=tile, cout_block=cb)
            # ---- input tile: fetched per item, or once per spatial tile (reuse) ----
            fetch = live & ((cbl == 0) if sp.reuse_input else True)
            fidx = (j // cb_per) if sp.reuse_input else j
            xs = fidx % t.l1_stages
            ih0, iw0 = oh0 * sh - pt, ow0 * sw - pl
            r0, c0_ = jnp.maximum(ih0, 0), jnp.maximum(iw0, 0)
            rows = jnp.minimum((ho_v - 1) * sh + (g.kh - 1) * dh + 1 + ih0, g.h) - r0
            cols = jnp.minimum((wo_v - 1) * sw + (g.kw - 1) * dw + 1 + iw0, g.w) - c0_
            core = core.wait_flag("MTE1_MTE2", IN + xs, fetch)
            core = core.data_copy(
                dst=x_l1[xs],
                src=input_window(core, n, r0, c0_, rows, cols),
                layout=None if sp.nc1hwc0_source else "nc1hwc0",
                when=fetch,
            )
            core = core.set_flag("MTE2_MTE1", IN + xs, fetch)
            core = core.wait_flag("MTE2_MTE1", IN + xs, fetch)

            def part(pi, core):
                # ping-pong slots advance with *live* work only (an idle item, e.g. a Cout block
                # past the end of a core's group, must not leave a slot unused)
                gp = live_idx * nparts + pi
                ws = gp % t.l1_stages
                kbase = pi * k_l1
                if not t.weights_resident:
                    core = core.wait_flag("MTE1_MTE2", WT + ws, live)
                    core = copy_weights(core, w_l1[ws], pi, cb, live)
                    core = core.set_flag("MTE2_MTE1", WT + ws, live)
                    core = core.wait_flag("MTE2_MTE1", WT + ws, live)
                wstage = 0 if t.weights_resident else ws

                def step(q, core):
                    u = (live_idx * steps_item + pi * spp + q) % t.l0_stages
                    ks = kbase + q * t.k_l0
                    kv = jnp.clip(jnp.minimum(k_l1 - q * t.k_l0, k_total - ks), 0, t.k_l0)
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
                        when=go,
                    )
                    wrow = cbl * res_rows + ks if t.weights_resident else q * t.k_l0
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

                core = lax.fori_loop(0, spp, step, core)
                if not t.weights_resident:
                    core = core.set_flag("MTE1_MTE2", WT + ws, live)
                return core

            core = lax.fori_loop(0, nparts, part, core)
            last_cb = (cbl == cb_per - 1) | (cb == ncb - 1)
            release = live & (last_cb if sp.reuse_input else True)
            core = core.set_flag("MTE1_MTE2", IN + xs, release)
            core = core.at_tile(item=j, tile=tile, cout_block=cb)
            # ---- epilogue: L0C -> GM (NHWC) ----
            y_win = core.gm_window("y", (n, oh0, ow0, cb * t.n), (1, t.ho, t.wo, t.n))
            if p.epi is not None:
                res_win = (
                    core.gm_window("res", (n, oh0, ow0, cb * t.n), (1, t.ho, t.wo, t.n))
                    if p.epi.has("residual")
                    else None
                )
                return epi_mod.emit(core, p.epi, a, c_l0, y_win, res_win, cbl * t.n, m_eff, nv, t.n, live)
            return output_step(core, hw, c_l0, a.get("ub"), y_win, m_eff, nv, live)

        core = lax.fori_loop(0, items, item, core)
        return wait_all(core, slots)

    return plan, kernel


# ---- the relayout kernel (NCHW -> NC1HWC0 in GM) -------------------------------------------------
def relayout_kernel(g: ConvGeometry, hw: HardwareConfig, op: str, bound: ConvGeometry | None = None):
    """A vector-side kernel: NCHW bands in (MTE2, converted on the DMA) -> UB -> NC1HWC0 out (MTE3),
    double-buffered with a queue. Returns (plan, gm specs, cores, kernel)."""
    from npu_jax.core.sync import Queue

    B = g if bound is None else bound
    c0 = 32 // itemsize(op)
    c1_cap = -(-B.c // c0)
    stage_bytes = hw.ub_bytes // 2 - hw.ub_align
    rows = max(1, min(B.h, stage_bytes // (B.w * c0 * itemsize(op))))
    plan = Plan(hw)
    buf = plan.alloc("UB", "band", (rows, B.w, c0), op, stages=2)
    c1 = -(-g.c // c0)
    n_bands = -(-g.h // rows)
    n_items = g.n * c1 * n_bands
    ncores = max(1, min(hw.num_cores, B.n * c1_cap * -(-B.h // rows)))
    per_core = -(-n_items // ncores)
    q = Queue("MTE2", "MTE3", buf)

    def kernel(core, b):
        core = q.init(core)

        def item(j, core):
            it = b + j * ncores
            live = it < n_items
            n, rest = it // (c1 * n_bands), it % (c1 * n_bands)
            ci, band = rest // n_bands, rest % n_bands
            r0 = band * rows
            nr = jnp.minimum(rows, g.h - r0)
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

        core = lax.fori_loop(0, per_core, item, core)
        return q.drain(core)

    gm = (
        GmSpec("x", (B.n, B.c, B.h, B.w), (B.n, c1_cap * c0, _r(B.h, rows), B.w), op),
        GmSpec("x5", (B.n, c1_cap, B.h, B.w, c0), (B.n, c1_cap, _r(B.h, rows), B.w, c0), op, output=True),
    )
    return plan, gm, ncores, kernel


# ---- running it ----------------------------------------------------------------------------------
def run_plan(
    p: ConvPlan,
    x,
    w,
    policy: Policy,
    trace_capacity: int = 0,
    *,
    bias=None,
    residual=None,
    name: str | None = None,
    move_data: bool = True,
    checks=None,
):
    """Launch a ConvPlan on x (N, C, H, W) and w (K, C, kh, kw), both at the bound's shape and in
    the operand format. Returns (y NHWC at the bound's shape, report). ``move_data=False`` is the
    timing-only mode: the same program, every cost and counter, and no data work at all.
    ``checks``: the sanitizers (None = the process default); findings raise after a concrete run.

    A fused epilogue (``p.epi``) reads ``bias`` (K,) in ``p.epi.bias_format`` and ``residual``
    (N, Ho, Wo, K) NHWC in ``p.epi.vector`` format, when its steps use them."""
    g, B, t, hw, op = p.g, p.B, p.t, p.hw, p.operand
    cap = trace_capacity
    extras = {}
    ext_x = (g.n, g.c, g.h, g.w)
    if p.spec.nc1hwc0_source:
        rplan, rgm, rcores, rkern = relayout_kernel(g, hw, op, p.bound)
        rctx = Context(
            hw=hw,
            allocs=tuple(rplan.allocs),
            gm=rgm,
            policy=policy,
            n_cores=rcores,
            trace_capacity=cap,
            move_data=move_data,
            checks=checks,
        )
        routs, rrep = launch(
            rkern,
            rctx,
            {"x": x},
            name="relayout",
            operand=op,
            workload=f"NCHW->NC1HWC0 {B.n}x{B.c}x{B.h}x{B.w}",
            extents={"x": ext_x, "x5": (g.n, p.c1, g.h, g.w, p.c0)},
        )
        extras["relayout"] = rrep
        from npu_jax.core.formats import oihw_to_kn

        # weights relaid offline (as a framework does at load time), Cout-block-major so each
        # block's K rows are one contiguous run: (n_cb, K_total, n)
        wk = oihw_to_kn(_mask_layer(w, (g.k, g.c, g.kh, g.kw)), p.c0, g.kh, g.kw)
        wk = jnp.pad(wk, ((0, 0), (0, p.k_pad - B.k)))
        wk = wk.reshape(p.k_total_cap, p.n_cb_cap, t.n).transpose(1, 0, 2)
        gm_in = {"x5": routs["x5"], "wkn": wk}
        nb_pad = t.cout_split * p.cb_per_cap  # whole groups, so every window stays inside
        gm = (
            GmSpec(
                "x5", (B.n, p.c1_cap, B.h, B.w, p.c0), (B.n, p.c1_cap, B.h + p.h_in, B.w + p.w_in, p.c0), op
            ),
            GmSpec("wkn", (p.n_cb_cap, p.k_total_cap, t.n), (nb_pad, p.k_total_cap + p.k_l1_cap, t.n), op),
        )
        extents = {"x5": (g.n, p.c1, g.h, g.w, p.c0), "wkn": (p.n_cb, p.k_total, t.n)}
    else:
        gm_in = {"x": x, "w": w}
        cpad = _r(p.c1_cap, p.cin1_eff) * p.c0
        kpad = t.cout_split * p.cb_per_cap * t.n
        gm = (
            GmSpec("x", (B.n, B.c, B.h, B.w), (B.n, cpad, B.h + p.h_in, B.w + p.w_in), op),
            GmSpec("w", (B.k, B.c, B.kh, B.kw), (kpad, cpad, B.kh, B.kw), op),
        )
        extents = {"x": ext_x, "w": (g.k, g.c, g.kh, g.kw)}
    n_th_cap, n_tw_cap = -(-p.ho_cap // t.ho), -(-p.wo_cap // t.wo)
    y_pad = (B.n, n_th_cap * t.ho, n_tw_cap * t.wo, t.cout_split * p.cb_per_cap * t.n)
    y_shape = (B.n, p.ho_cap, p.wo_cap, B.k)
    e = p.epi
    if e is not None and e.has("bias"):
        gm += (GmSpec("bias", (1, B.k), (1, y_pad[3]), e.bias_format),)
        gm_in["bias"] = _epi_input("bias", bias, (B.k,), e.bias_format).reshape(1, B.k)
        extents["bias"] = (1, g.k)
    if e is not None and e.has("residual"):
        gm += (GmSpec("res", y_shape, y_pad, e.vector),)
        gm_in["res"] = _epi_input("residual", residual, y_shape, e.vector)
        extents["res"] = (g.n, g.ho, g.wo, g.k)
    gm = gm + (GmSpec("y", y_shape, y_pad, p.output, output=True),)
    extents["y"] = (g.n, g.ho, g.wo, g.k)
    plan, kern = build_kernel(p)
    ctx = Context(
        hw=hw,
        allocs=tuple(plan.allocs),
        gm=gm,
        policy=policy,
        n_cores=p.cores,
        trace_capacity=cap,
        move_data=move_data,
        checks=checks,
    )
    outs, report = launch(
        kern,
        ctx,
        gm_in,
        name=name or f"conv2d[{p.strategy}]",
        workload=B.describe() if p.bound is None else "",
        operand=op,
        extents=extents,
    )
    # launch has raised the sanitizers' findings and overlapping writes (when concrete)
    report = dataclasses.replace(report, extras=extras, useful_flops=_conv_flops(g))
    return outs["y"], report


def conv2d(
    x,
    w,
    stride=1,
    padding=0,
    dilation=1,
    strategy: str = "img2col",
    hw: HardwareConfig | None = None,
    tiling: ConvTiling | None = None,
    policy: Policy | None = None,
    *,
    groups: int = 1,
    trace: bool | int = False,
    timing_only: bool = False,
    checks=None,
):
    """Conv2D on the emulated AI Core. Returns ``(y, report)``.

    Args:
        x: (N, C, H, W) input; w: (K, C, kh, kw) weights (PyTorch/ONNX layout). Both are converted
            to ``policy.operand`` (fp16 by default) at the boundary.
        stride, dilation: int or pair. padding: int, pair, ((top, bottom), (left, right)), "SAME"
            or "VALID".
        strategy: "output_tiled", "input_tiled", "relayout" or "img2col" (see module docs).
        hw: hardware (default ``presets.ascend910b()``); tiling: a :class:`ConvTiling` or None for
            the chooser's pick; policy: precision :class:`Policy`.
        trace: keep per-core event traces (True = 4096 events, or a capacity).
        timing_only: run the same kernel with no data work (y is then all zeros): every cycle
            and byte of the report is unchanged, in a fraction of the time.
        checks: sanitizers (``"all"``, ``"none"``, names, or a ``Checks``; None = the process
            default, see ``npu_jax.default_checks``). Findings raise a SanitizerError.

    Returns:
        y (N, K, Ho, Wo) in ``policy.output`` format, and a Report. For ``relayout`` and
        ``img2col`` the NC1HWC0 relayout kernel's own report is ``report.extras["relayout"]``.

    Example:
        >>> import numpy as np, npu_jax
        >>> x = np.random.default_rng(0).standard_normal((1, 16, 8, 8))
        >>> w = np.random.default_rng(1).standard_normal((32, 16, 3, 3))
        >>> y, rep = npu_jax.conv2d(x, w, padding=1, hw=npu_jax.presets.tiny())
        >>> y.shape, rep.flops
        ((1, 32, 8, 8), 589824)
    """
    from npu_jax.kernels.conv_choose import choose_tiling
    from npu_jax.kernels.conv_geometry import check_common

    hw, policy, checks, cap = check_common(hw, policy, checks, trace, "conv2d")
    x, w = _check_arrays(x, w)
    g = canonicalize(x.shape, w.shape, stride, padding, dilation, groups)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
    _check_flag("timing_only", timing_only)
    op = policy.operand
    if tiling is None:
        tiling = choose_tiling(g, strategy, hw, op, policy.output)
    p = make_plan(g, strategy, tiling, hw, op, policy.output)
    y, report = run_plan(
        p, x.astype(DTYPES[op]), w.astype(DTYPES[op]), policy, cap, move_data=not timing_only, checks=checks
    )
    return jnp.transpose(y, (0, 3, 1, 2)), report


def conv2d_bounded(
    x,
    w,
    g: ConvGeometry,
    *,
    bound: ConvGeometry,
    strategy: str,
    tiling: ConvTiling,
    hw: HardwareConfig | None = None,
    policy: Policy | None = None,
    timing_only: bool = False,
    checks=None,
):
    """Conv2D of layer ``g`` (fields may be traced) inside arrays shaped for ``bound`` (static).

    ``x`` is (B.n, B.c, B.h, B.w) with the layer's data in the leading corner, ``w`` likewise
    (B.k, B.c, B.kh, B.kw). One compiled program serves every layer that fits the bound: the
    property tests draw hundreds of layers through four compiles. Returns y (B.n, B.k, Ho_max,
    Wo_max) with the layer's output in the leading corner (zeros elsewhere) and the report.
    """
    from npu_jax.kernels.conv_geometry import check_common

    hw, policy, checks, _ = check_common(hw, policy, checks, False, "conv2d_bounded")
    _check_flag("timing_only", timing_only)
    x, w = _check_arrays(x, w)
    if tuple(x.shape) != (bound.n, bound.c, bound.h, bound.w) or tuple(w.shape) != (
        bound.k,
        bound.c,
        bound.kh,
        bound.kw,
    ):
        raise ValueError(
            f"x {tuple(x.shape)} and w {tuple(w.shape)} must have the bound's shapes "
            f"{(bound.n, bound.c, bound.h, bound.w)} and {(bound.k, bound.c, bound.kh, bound.kw)}."
        )
    op = policy.operand
    p = make_plan(g, strategy, tiling, hw, op, policy.output, bound)
    y, report = run_plan(
        p, x.astype(DTYPES[op]), w.astype(DTYPES[op]), policy, move_data=not timing_only, checks=checks
    )
    return jnp.transpose(y, (0, 3, 1, 2)), report


def _epi_input(what: str, arr, shape, fmt: str):
    if arr is None:
        raise ValueError(f"the epilogue has a {what!r} step but no {what} array was given.")
    arr = jnp.asarray(arr)
    if tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{what} must have shape {tuple(shape)}, got {tuple(arr.shape)}.")
    return arr.astype(DTYPES[fmt])


def _conv_flops(g: ConvGeometry):
    """2 N Ho Wo K C kh kw as a wide integer (exact past 2^31; traced geometry allowed)."""
    from npu_jax.core import wide

    if isinstance(g.n, int):
        return wide.from_int(g.flops)
    return wide.mul(g.n * g.ho * g.wo, 2 * g.k * g.c * g.kh * g.kw)


def _mask_layer(a, extent):
    """Zero everything of a bound-shaped array outside the layer's (traced) extent."""
    keep = jnp.ones(a.shape, jnp.bool_)
    for d, e in enumerate(extent):
        keep = keep & (lax.broadcasted_iota(jnp.int32, a.shape, d) < e)
    return jnp.where(keep, a, jnp.zeros((), a.dtype))


def _check_flag(name: str, v) -> None:
    if not isinstance(v, (bool, jnp.bool_)):
        raise TypeError(f"conv2d: {name} must be True or False, got {v!r}.")


def _check_arrays(x, w):
    for name, arr in (("x", x), ("w", w)):
        if arr is None or isinstance(arr, (str, bytes, dict)):
            raise TypeError(f"conv2d: {name} must be an array, got {type(arr).__name__}.")
    x, w = jnp.asarray(x), jnp.asarray(w)
    for name, arr in (("x", x), ("w", w)):
        if not jnp.issubdtype(arr.dtype, jnp.floating):
            raise TypeError(f"conv2d: {name} must be a float array, got {arr.dtype}; cast it first.")
    return x, w


jax.tree_util.register_dataclass(
    ConvGeometry,
    data_fields=["n", "c", "h", "w", "k", "kh", "kw", "stride", "dilation", "pads"],
    meta_fields=[],
)

__all__ = ["ConvPlan", "ConvTiling", "STRATEGIES", "conv2d", "conv2d_bounded", "make_plan", "run_plan"]

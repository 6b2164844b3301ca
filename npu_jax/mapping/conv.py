"""The Conv2D mapping: what each strategy does structurally, its tiling, and the plan.

A :class:`ConvPlan` is everything about one (layer, strategy, tiling, hardware): derived sizes, loop
counts and the allocation of every buffer. The kernel (``kernels/conv.py``), the closed-form cost
model (``cost/``) and the search all read it, so they cannot disagree on shapes or capacities.
The strategies themselves are described in ``kernels/conv.py``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.core.buffers import Plan
from npu_jax.errors import AlignmentError, CapacityError, InputError, TilingError
from npu_jax.hw.config import FRACTAL_ROWS, HardwareConfig
from npu_jax.hw.costs import cdiv, round_up
from npu_jax.hw.formats import acc_format, itemsize
from npu_jax.mapping.conv_tiling import SPECS, STRATEGIES, ConvTiling, StrategySpec
from npu_jax.mapping.epilogue import EpiloguePlan, allocate_epilogue
from npu_jax.mapping.hints import tiling_hint
from npu_jax.mapping.tiling_bound import check_l2, check_within
from npu_jax.workload.conv import ConvGeometry

# the roles of a conv launch's GM inputs a network's schedule may leave in L2: its input, weights, the
# epilogue's per-channel row (bias or scales), the residual
L2_ROLES = ("x", "w", "row", "res")


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

    ``tiling_bound`` (default ``t``) does for the tiling what ``bound`` does for the layer: a
    concrete :class:`ConvTiling` that fixes the buffers, windows and launched cores, so ``t``'s
    fields (``ho wo n cin1 k_l0``, the stages, ``cout_split``, each at most the bound's, and
    ``weights_resident`` where the bound's is True) may be traced: ``jax.vmap`` over stacked
    tilings through one compiled timing-only program. ``cores`` is the bound's. Static properties
    read :attr:`T` (the bound); loop counts, and the cores that run, read ``t``.

    A grouped layer (``g.groups > 1``) runs as :attr:`gv`, its dense view: :attr:`sgroups`
    super-groups of :attr:`pack` groups each, block-diagonal weights, the super-groups an outer batch
    axis (``docs/conv2d.md``). Every size and loop count below is the view's.

    A plan is immutable: the properties every other one reads (the bound, the dense views, the
    strategy's spec, C0) are computed once per plan and kept (the chooser reads them millions of
    times).
    """

    g: ConvGeometry
    strategy: str
    t: ConvTiling
    hw: HardwareConfig
    operand: str
    output: str = "fp16"
    bound: ConvGeometry | None = None
    epi: EpiloguePlan | None = None
    tiling_bound: ConvTiling | None = None
    # what a network's schedule left in L2 (``npu_jax.model.schedule``): None, the layer-at-a-time rule
    # (the input resident where the relayout kernel keeps its NC1HWC0 copy); else the roles of
    # :data:`L2_ROLES` resident, each where the launch keeps that tensor too (core/l2.py's rule)
    l2_resident: tuple[str, ...] | None = None

    @functools.cached_property
    def B(self) -> ConvGeometry:
        return self.g if self.bound is None else self.bound

    @functools.cached_property
    def pack(self) -> int:
        """Groups per super-group (``ConvGeometry.packing``; 1 for a dense conv)."""
        return self.g.packing(self.c0, FRACTAL_ROWS)

    @functools.cached_property
    def sgroups(self) -> int:
        """G': super-groups, run as an outer batch axis of the dense :attr:`gv` (1 for a dense conv)."""
        return self.g.supergroups(self.c0, FRACTAL_ROWS)

    @functools.cached_property
    def gv(self) -> ConvGeometry:
        """The dense conv the kernel runs (``ConvGeometry.dense_view``): ``g`` itself when dense."""
        return self.g.dense_view(self.c0, FRACTAL_ROWS)

    @functools.cached_property
    def Bv(self) -> ConvGeometry:
        """The bound's dense view (the bound of a grouped plan is its layer)."""
        return self.B.dense_view(self.c0, FRACTAL_ROWS)

    @functools.cached_property
    def T(self) -> ConvTiling:
        """The tiling that fixes shapes and structure: ``tiling_bound``, or ``t`` itself."""
        return self.t if self.tiling_bound is None else self.tiling_bound

    def _over(self, f) -> int:
        """The largest ``f(n, cout_split)`` the plan may run: ``t``'s, or under a tiling bound over
        every whole-fractal ``n`` and every split up to the bound's (block counts grow as n shrinks)."""
        if self.tiling_bound is None:
            return f(self.t.n, self.t.cout_split)
        ns = range(FRACTAL_ROWS, self.T.n + 1, FRACTAL_ROWS)
        return max(f(n, cs) for n in ns for cs in range(1, self.T.cout_split + 1))

    @functools.cached_property
    def spec(self) -> StrategySpec:
        return SPECS[self.strategy]

    @functools.cached_property
    def c0(self) -> int:
        return self.hw.c0(itemsize(self.operand))

    # ---- static: shapes of allocations and windows (from the bound) ----
    @property
    def c1_cap(self) -> int:
        return -(-self.Bv.c // self.c0)

    @property
    def k_total_cap(self) -> int:
        return self.c1_cap * self.Bv.kh * self.Bv.kw * self.c0

    @property
    def cin1_eff(self) -> int:
        """Channel blocks per weight part, as allocated: min(cin1, C1)."""
        return min(self.T.cin1, self.c1_cap)

    @property
    def k_l1_cap(self) -> int:
        return self.cin1_eff * self.Bv.kh * self.Bv.kw * self.c0

    @property
    def h_in(self) -> int:
        return self.Bv.in_extent(self.T.ho, 0)

    @property
    def w_in(self) -> int:
        return self.Bv.in_extent(self.T.wo, 1)

    @property
    def m_t(self) -> int:
        return round_up(self.T.ho * self.T.wo, FRACTAL_ROWS)

    @property
    def k_pad(self) -> int:
        return -(-self.Bv.k // self.t.n) * self.t.n

    @property
    def n_cb_cap(self) -> int:
        return self._over(lambda n, cs: cdiv(self.Bv.k, n))

    @property
    def ho_cap(self) -> int:
        """Most output rows any layer inside the bound can have (stride 1, 1-tap kernel)."""
        B = self.Bv
        return B.ho if self.bound is None else B.h + B.pads[0] + B.pads[1]

    @property
    def wo_cap(self) -> int:
        B = self.Bv
        return B.wo if self.bound is None else B.w + B.pads[2] + B.pads[3]

    @property
    def cb_per_cap(self) -> int:
        """Cout blocks per core group (static; the last group may own fewer)."""
        return self._over(lambda n, cs: cdiv(cdiv(self.Bv.k, n), cs))

    @property
    def cores_sp(self) -> int:
        """Cores per Cout group, each taking spatial tiles round-robin, as launched: under a tiling
        bound every core a tiling of it may use (those it does not, :attr:`cores_sp_run`, stay idle)."""
        T = self.T
        want = self.hw.num_cores if T.cores is None else T.cores
        if self.tiling_bound is not None:
            return want
        n_tiles = self.Bv.n * -(-self.ho_cap // T.ho) * -(-self.wo_cap // T.wo)
        return max(1, min(want // T.cout_split, n_tiles))

    @property
    def cores(self) -> int:
        """Cores launched (under a tiling bound: every core, grouped by each tiling's own split)."""
        return self.cores_sp if self.tiling_bound is not None else self.cores_sp * self.T.cout_split

    # ---- static: GM tensors (windows at the edges stay inside the padding) ----
    @property
    def c_pad(self) -> int:
        """Channels of x and w as stored: every weight part's window inside."""
        if self.tiling_bound is None:
            return round_up(self.c1_cap, self.cin1_eff) * self.c0
        return (self.c1_cap + self.cin1_eff) * self.c0  # a part of a smaller cin1 + the bound's window

    @property
    def cout_pad(self) -> int:
        """Output channels (and weight rows) as stored: whole Cout groups of whole blocks."""
        whole = self._over(lambda n, cs: cs * cdiv(cdiv(self.Bv.k, n), cs) * n)
        if self.tiling_bound is None:
            return whole
        return whole + (self.cb_per_cap if self.T.weights_resident else 1) * self.T.n  # one more window

    @property
    def y_pad(self) -> tuple[int, ...]:
        """y (N, Ho, Wo, K) as stored: whole tiles (the bound's windows from any tile start); with
        super-groups (N, Ho, Wo, G', K'), each super-group's channels padded on their own."""
        B, T = self.B, self.T
        if self.tiling_bound is None:
            hw_ = (-(-self.ho_cap // T.ho) * T.ho, -(-self.wo_cap // T.wo) * T.wo)
        else:
            hw_ = (self.ho_cap + T.ho, self.wo_cap + T.wo)
        if self.sgroups > 1:
            return (B.n, *hw_, self.sgroups, self.cout_pad)
        return (B.n, *hw_, self.cout_pad)

    @property
    def wkn_shape(self) -> tuple[int, int, int]:
        """The K-major weights (n_cb, K_total, n) as laid out for the bound's n (its bytes decide
        the L2's keep; :meth:`check_l2` holds every n of a tiling bound to the same decision)."""
        return (-(-self.Bv.k // self.T.n), self.k_total_cap, self.T.n)

    @property
    def wkn_pad(self) -> tuple[int, int, int]:
        blocks = self._over(lambda n, cs: cs * cdiv(cdiv(self.Bv.k, n), cs))  # whole groups
        if self.tiling_bound is not None:
            blocks += self.cb_per_cap  # and a group's window from any group's start
        return (blocks, self.k_total_cap + self.k_l1_cap, self.T.n)

    # ---- dynamic: loop counts of the actual layer ----
    @property
    def c1(self):
        return -(-self.gv.c // self.c0)

    @property
    def k_total(self):
        return self.c1 * self.gv.kh * self.gv.kw * self.c0

    @property
    def cin1_step(self):
        """Channel blocks per weight part, as stepped: min(cin1, C1) (traced under a tiling bound)."""
        return _min(self.t.cin1, self.c1_cap)

    @property
    def k_l1(self):
        return _min(self.t.cin1, self.c1) * self.gv.kh * self.gv.kw * self.c0

    @property
    def n_parts(self):
        return -(-self.c1 // self.t.cin1)

    @property
    def steps_per_part(self):
        return -(-self.k_l1 // self.t.k_l0)

    @property
    def n_th(self):
        return -(-self.gv.ho // self.t.ho)

    @property
    def n_tw(self):
        return -(-self.gv.wo // self.t.wo)

    @property
    def n_tiles(self):
        return self.gv.n * self.n_th * self.n_tw

    @property
    def n_cb(self):
        return -(-self.gv.k // self.t.n)

    @property
    def cores_sp_run(self):
        """Cores per Cout group that run: :attr:`cores_sp`, or the (traced) tiling's own count,
        capped by its tiles, under a tiling bound."""
        if self.tiling_bound is None:
            return self.cores_sp
        n_tiles = self.Bv.n * -(-self.ho_cap // self.t.ho) * -(-self.wo_cap // self.t.wo)
        return jnp.maximum(1, jnp.minimum(self.cores_sp // self.t.cout_split, n_tiles))

    @property
    def tiles_per_core(self):
        return -(-self.n_tiles // self.cores_sp_run)

    @property
    def cb_per(self):
        """Cout blocks per core group for the actual layer."""
        return -(-self.n_cb // self.t.cout_split)

    def validate(self) -> None:
        if self.l2_resident is not None and not set(self.l2_resident) <= set(L2_ROLES):
            raise ValueError(f"l2_resident names roles of {L2_ROLES}, got {self.l2_resident!r}.")
        if self.tiling_bound is not None:
            self._validate_bound()
        t, sp, c0 = self.T, self.spec, self.c0
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
        if t.weights_resident and not sp.resident_weights_allowed:
            raise TilingError(
                f"strategy {self.strategy!r} re-fetches weights per output tile; "
                f"weights_resident must be False."
            )
        if self.g.groups > 1 or self.B.groups > 1:
            self._validate_groups()
        if t.weights_resident and t.cin1 < self.c1_cap:
            raise TilingError(
                f"weights_resident needs the whole reduction in L1: cin1 must be >= "
                f"C1={self.c1_cap}, got {t.cin1}."
            )

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
                    "res_v_ub": ("ho", "wo", "n"),
                    "out_ub": ("ho", "wo", "n"),
                    "bias_l1": ("n", "cout_split"),
                    "bias_ub": ("n", "cout_split"),
                    "scale_l1": ("n", "cout_split"),
                    "scale_ub": ("n", "cout_split"),
                },
                t,
            ) from None

    def _validate_groups(self) -> None:
        """What a grouped plan does not support: layer or tiling bounds, and with several
        super-groups resident weights (a core's L1 would hold every super-group's) and a fused
        epilogue (its bias and residual follow the dense channel order)."""
        sg = self.sgroups
        if self.bound is not None or self.tiling_bound is not None:
            raise InputError(
                f"a grouped conv (groups={self.g.groups}) runs with a concrete layer and tiling: a layer "
                f"bound or tiling bound needs groups=1; call npu_jax.conv2d(..., groups=...) per layer."
            )
        if sg > 1 and self.T.weights_resident:
            raise TilingError(
                f"weights_resident keeps one super-group's weights; {self.g.describe()} runs {sg} "
                f"super-groups of {self.pack} groups: use weights_resident=False."
            )
        # an int8 chain (the dequantisation and at most one activation) of several super-groups reads
        # one super-group's scales: the caller gives it scales every super-group shares
        if sg > 1 and self.epi is not None and (self.epi.int8_chain or not self.epi.has("dequant")):
            raise InputError(
                f"a fused epilogue needs a conv of one super-group; {self.g.describe()} runs {sg} "
                f"super-groups of {self.pack} groups: run the conv unfused (npu_jax.conv2d) and the "
                f"element-wise steps after it."
            )

    def _validate_bound(self) -> None:
        """A tiling bound's own rules: Python ints, a plain conv, and a concrete ``t`` inside it and
        legal on its own (a traced ``t`` cannot be checked: run only tilings make_plan accepts)."""
        T, t = self.tiling_bound, self.t
        if not isinstance(T, ConvTiling) or not all(isinstance(v, int) for v in jax.tree.leaves(T)):
            raise TypeError(
                f"tiling_bound must be a ConvTiling of Python ints (ConvTiling.bound(tilings) makes one "
                f"from a batch), got {T!r}."
            )
        if self.epi is not None:
            raise ValueError("tiling_bound runs the plain Conv2D; a fused epilogue needs a concrete tiling.")
        leaves = jax.tree.leaves(t)
        if any(np.ndim(v) for v in leaves):
            raise TilingError(
                "under a tiling_bound the tiling is one tiling (scalar fields); run a stacked one with "
                "jax.vmap over its leading axis."
            )
        if all(isinstance(v, (int, np.integer)) for v in leaves):  # concrete: check it, and it alone
            check_within(T, [t])
            make_plan(self.g, self.strategy, t, self.hw, self.operand, self.output, self.bound)

    def check_l2(self, gm) -> None:
        """Under a tiling bound, refuse one whose n changes what the L2 keeps (``gm``: the launch's
        GmSpecs; see :func:`~npu_jax.mapping.tiling_bound.check_l2`)."""
        if self.tiling_bound is not None and self.spec.nc1hwc0_source:
            check_l2(self, gm)

    def allocate(self) -> tuple[Plan, dict]:
        """Allocate every buffer; raises CapacityError naming the buffer that overflows."""
        hw, t, op = self.hw, self.T, self.operand
        # under a tiling bound the buffers are the batch's container: each tiling fits on its own
        plan = Plan(hw, capacity=self.tiling_bound is None)
        a = {}
        a["x"] = plan.alloc(
            "L1", "x_l1", (self.c1_cap, self.h_in, self.w_in, self.c0), op, stages=t.l1_stages, fmt="NC1HWC0"
        )
        # weight rows rounded up to whole k_l0 steps so every LoadData window stays inside;
        # resident: the group's Cout blocks, block-major: block j is rows [j K, (j+1) K)
        res_rows = self.cb_per_cap * self.k_total_cap + t.k_l0
        rows = round_up(self.k_l1_cap, t.k_l0)
        if self.tiling_bound is not None:  # a smaller k_l0's last window too (it starts below k_l1_cap)
            rows = max(rows, self.k_l1_cap - self.c0 + t.k_l0)
        if t.weights_resident and self.tiling_bound is not None:  # room for either kind of tiling
            a["w"] = plan.alloc("L1", "w_l1", (max(res_rows, rows), t.n), op, stages=t.l1_stages, fmt="ND")
        elif t.weights_resident:
            a["w"] = plan.alloc("L1", "w_l1", (res_rows, t.n), op, fmt="ND")
        else:
            a["w"] = plan.alloc("L1", "w_l1", (rows, t.n), op, stages=t.l1_stages, fmt="ND")
        a["a"] = plan.alloc("L0A", "a_l0", (self.m_t, t.k_l0), op, stages=t.l0_stages, fmt="ZZ")
        a["b"] = plan.alloc("L0B", "b_l0", (t.k_l0, t.n), op, stages=t.l0_stages, fmt="ZN")
        a["c"] = plan.alloc("L0C", "c_l0c", (self.m_t, t.n), acc_format(self.operand), fmt="NZ")
        if self.epi is not None:
            a.update(allocate_epilogue(plan, self.epi, self.m_t, t.n, self.cb_per_cap * t.n))
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
    tiling_bound: ConvTiling | None = None,
    l2_resident: tuple[str, ...] | None = None,
) -> ConvPlan:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
    if not isinstance(tiling, ConvTiling):
        raise TypeError(f"tiling must be a ConvTiling or None, got {type(tiling).__name__}.")
    if epi is not None and epi.where == "fixpipe" and hw.coupled:
        raise ValueError(f"{hw.name} has no Fixpipe: its fused epilogue runs in UB (where='ub').")
    if l2_resident is not None:
        l2_resident = tuple(sorted(set(l2_resident)))
    p = ConvPlan(g, strategy, tiling, hw, operand, output, bound, epi, tiling_bound, l2_resident)
    p.validate()
    return p


__all__ = ["L2_ROLES", "SPECS", "STRATEGIES", "ConvPlan", "ConvTiling", "StrategySpec", "make_plan"]

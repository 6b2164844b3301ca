"""Every instruction's cost rule, written once: a function of the hardware's numbers and the operand shapes.

The emulator (``core/``: one ``issue`` per instruction) and the closed-form cost model (``cost/``,
and the tile search built on it) both call these functions; no cycle formula exists anywhere else.
Each rule is written against whatever array module its arguments come from -- Python ints, numpy
arrays (the tiling chooser) or jax arrays, traced or not (the emulator, the search, gradients) -- so
one rule gives the same integer everywhere:

* sizes are ceilinged by :func:`cdiv` (integer arithmetic);
* a byte count over a rate is :func:`ceil_rate`: the fewest cycles ``c`` with ``float32(c * rate)
  >= bytes`` -- a test of float32 products, which every array module and backend rounds alike (a
  float32 *division* does not: XLA divides by multiplying with a reciprocal, so 21 / 7 came to
  3.0000002 and cost 4 cycles where numpy said 3). A rate shared by ``k`` cores is the fraction
  ``Rate(chip, k)`` (:func:`gm_rate`), never the rounded ``chip / k`` (exact below 2^24 B);
* with float arguments (the search's relaxation), :func:`cdiv` and :func:`ceil_rate` are straight-
  through ceilings: the forward value is the exact one, the gradient that of the division.

Every rule takes ``arith=``, the arithmetic it is evaluated in: :data:`EXACT` (the default: the
integers above) or :data:`SMOOTH`, the same rule over reals with no ceiling anywhere -- a size over
a block is ``max(a / b, 1)``, bytes over a rate ``bytes / rate``, an empty instruction is not tested
for -- the smooth surrogate the tile search descends (``search/relaxed.py``). Where no ceiling is
active (whole blocks, an exact division) both give the same value.

The numbers a rule reads are a :class:`HwNumbers` (``HwNumbers.of(hw)``: Python scalars;
``HwNumbers.arrays(hw)``: float32 / int32 arrays that a sweep or a gradient may trace).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.hw.config import FRACTAL_ROWS, L0C_ITEMSIZE, HardwareConfig


class HwNumbers(NamedTuple):
    """The numbers of a :class:`HardwareConfig` that instruction costs depend on.

    Rates are bytes per cycle per core, start-ups cycles, capacities bytes. ``chip_gm`` is the whole
    chip's GM rate (``inf``: unshared). Two figures stay static because they change a program's shape,
    not a number in it: ``num_cores`` and ``coupled`` (read them from the ``HardwareConfig``).
    """

    gm: float  # ddr_rate: one core's GM port
    chip_gm: float  # whole chip, shared by the active cores (inf = unshared); the sustained rate
    l0a_rate: float  # L1 -> L0A
    l0b_rate: float  # L1 -> L0B
    fix_rate: float  # Fixpipe's L0C read rate
    l0c_ub_rate: float  # L0C -> UB (coupled chips)
    ub_gm_rate: float  # MTE3's UB -> GM port (into L2 where the chip has one: HardwareConfig.mte3_rate)
    vec_rate: float  # bytes one vector instruction processes per cycle (one repeat)
    mte2_su: int  # start-ups (cycles)
    mte3_su: int
    mte1_su: int
    mmad_su: int
    fix_su: int
    vec_su: int
    burst: int  # extra cycles per discontiguous GM burst
    row: int  # a GM DMA's fewest cycles per row (burst): it moves at most one row this often (0: no limit)
    cube_m: int  # Cube rows / cols per cycle
    cube_n: int
    cube_k_bytes: int  # one fractal row in bytes: K0 = cube_k_bytes / itemsize
    l1: float  # capacities (float so that co-design can differentiate them)
    l0a: float
    l0b: float
    l0c: float
    ub: float
    l2_read: float  # one core's rate from L2 (a read that hits)
    l2_write: float  # one core's rate into L2 (every write: write-allocate)
    l2: float  # L2 capacity, bytes per chip (0: no L2)
    launch: int  # cycles of one kernel launch
    ub_groups: int  # UB bank groups a beat's rows interleave over (0: bank conflicts not modelled)
    ub_row: int  # bytes of one UB row (one bank-group slot)
    recency: int  # 1: the L2 keeps what was used recently (``l2_policy="recency"``, core/l2.py), else 0

    @classmethod
    def of(cls, hw: HardwareConfig) -> HwNumbers:
        """Python scalars (what the emulator's static costs read)."""
        a = hw.assumed
        chip = float("inf") if hw.chip_gm_bytes_per_cycle is None else float(hw.chip_gm_bytes_per_cycle)
        chip *= a.hbm_sustained  # what streaming sustains of the nominal rate
        return cls(
            gm=float(hw.gm_bytes_per_cycle),
            chip_gm=chip,
            l0a_rate=float(hw.l1_to_l0a_bytes_per_cycle),
            l0b_rate=float(hw.l0b_rate),
            fix_rate=float(a.fixpipe_bytes_per_cycle),
            l0c_ub_rate=float(hw.l0c_to_ub_bytes_per_cycle),
            ub_gm_rate=float(hw.mte3_rate),
            vec_rate=float(hw.vector_repeat_bytes),
            mte2_su=int(a.mte2_startup),
            mte3_su=int(a.mte3_startup),
            mte1_su=int(a.mte1_startup),
            mmad_su=int(a.mmad_startup),
            fix_su=int(a.fixpipe_startup),
            vec_su=int(a.vector_startup),
            burst=int(a.gm_burst_overhead),
            row=int(a.dma_row_cycles),
            cube_m=hw.cube_m,
            cube_n=hw.cube_n,
            cube_k_bytes=hw.cube_k_bytes,
            l1=float(hw.l1_bytes),
            l0a=float(hw.l0a_bytes),
            l0b=float(hw.l0b_bytes),
            l0c=float(hw.l0c_bytes),
            ub=float(hw.ub_bytes),
            l2_read=float(hw.l2_read_bytes_per_cycle),
            l2_write=float(hw.l2_write_rate),
            l2=float(hw.l2_bytes),
            launch=hw.launch_cycles,
            ub_groups=int(hw.ub_bank_groups or 0),
            ub_row=int(hw.ub_align),
            recency=int(hw.l2_policy == "recency" and hw.l2_bytes > 0),
        )

    @classmethod
    def arrays(cls, hw: HardwareConfig) -> HwNumbers:
        """The same numbers as jax arrays: float32 for rates and capacities, int32 for cycle counts
        and Cube sizes (a pytree a sweep can stack, vmap or differentiate)."""
        n = cls.of(hw)
        return cls(*(jnp.asarray(v, jnp.int32 if isinstance(v, int) else jnp.float32) for v in n))


# ---- arithmetic shared by every rule -------------------------------------------------------------
_PLAIN = (int, float, np.ndarray, np.generic)  # checked first: isinstance(x, jax.Array) is slow


def _is_jax(*xs) -> bool:
    return any(not isinstance(x, _PLAIN) and isinstance(x, jax.Array) for x in xs)


def _xp(*xs):
    return jnp if _is_jax(*xs) else np


def _is_float(x) -> bool:
    return isinstance(x, float) or (hasattr(x, "dtype") and np.issubdtype(np.dtype(x.dtype), np.floating))


def _ste(exact, smooth):
    """Straight-through: ``exact``'s value with ``smooth``'s gradient (jax floats only)."""
    return smooth + jax.lax.stop_gradient(exact - smooth)


def cdiv(a, b):
    """ceil(a / b) of non-negative integers (Python, numpy or jax). With jax float ``a`` (the search's
    relaxation) a straight-through ceiling: the exact value, the gradient of ``a / b``."""
    if type(a) is int and type(b) is int:  # the common case (plans, the chooser's grid), first
        return -(-a // b)
    if _is_jax(a, b) and (_is_float(a) or _is_float(b)):
        q = a / b
        return _ste(jnp.ceil(q), q)
    return -(-a // b)


class Rate(NamedTuple):
    """A rate as a fraction: ``num`` bytes every ``den`` cycles (a core's share ``chip / cores`` of
    the chip's GM rate). Every rule that takes a ``rate`` takes a plain number (B/cycle) or a Rate."""

    num: object
    den: object

    @property
    def per_cycle(self):
        """The rate as one number (B/cycle), rounded: for reports and tests, never for a cost."""
        return self.num / self.den


def _num_den(rate):
    return (rate.num, rate.den) if isinstance(rate, Rate) else (rate, 1)


def ceil_rate(nbytes, rate):
    """Cycles to move ``nbytes`` at ``rate`` (B/cycle, or a :class:`Rate` ``num / den``): the fewest
    ``c`` with ``float32(c * num) >= float32(nbytes * den)``, as int32 / int. The quotient's ceiling is
    a guess corrected by one either way with products (a float32 division rounds differently in numpy
    and XLA, products alike). Float jax ``nbytes``: a straight-through ceiling, the result a float."""
    num, den = _num_den(rate)
    if _is_jax(nbytes, num, den):
        xp, f32 = jnp, jnp.float32
        need = jnp.asarray(nbytes, f32) * jnp.asarray(den, f32)
        r = jnp.asarray(num, f32)
    else:
        xp, f32 = np, np.float32
        need = np.asarray(nbytes, f32) * np.asarray(den, f32)
        r = np.asarray(num, f32)
    q = need / r
    c = xp.ceil(q)
    c = xp.where((c - 1) * r >= need, c - 1, c)
    c = xp.where(c * r < need, c + 1, c)
    if xp is jnp:
        return _ste(c, q) if _is_float(nbytes) else c.astype(jnp.int32)
    out = c.astype(np.int64)
    return int(out) if out.ndim == 0 else out


def slower(a, b):
    """The slower of two rates (plain numbers or :class:`Rate`), as a :class:`Rate`."""
    (an, ad), (bn, bd) = _num_den(a), _num_den(b)
    xp = _xp(an, ad, bn, bd)
    f32 = jnp.float32 if xp is jnp else np.float32
    a_slower = xp.asarray(an, f32) * xp.asarray(bd, f32) <= xp.asarray(bn, f32) * xp.asarray(ad, f32)
    return Rate(xp.where(a_slower, an, bn), xp.where(a_slower, ad, bd))


def _when_nonzero(amount, cycles):
    """An empty instruction (``amount == 0``) costs nothing."""
    xp = _xp(amount, cycles)
    if xp is np and np.ndim(amount) == 0 and np.ndim(cycles) == 0:
        return int(cycles) if amount > 0 else 0
    return xp.where(xp.asarray(amount) > 0, cycles, 0)


class Arith(NamedTuple):
    """The arithmetic a rule is evaluated in: its ceilings and its empty-instruction test."""

    name: str
    cdiv: Callable  # (a, b) -> blocks of b covering a
    ceil_rate: Callable  # (nbytes, rate) -> cycles
    when_nonzero: Callable  # (amount, cycles) -> cycles, 0 for an empty instruction


def _smooth_cdiv(a, b):
    """a / b blocks over reals, at least one (a trip count never falls under one): no ceiling."""
    return jnp.maximum(a / b, 1.0)


def _smooth_rate(nbytes, rate):
    """Bytes over a rate (a number or a :class:`Rate`) in float32, not ceilinged."""
    num, den = _num_den(rate)
    return jnp.asarray(nbytes, jnp.float32) * jnp.asarray(den, jnp.float32) / jnp.asarray(num, jnp.float32)


def _smooth_when_nonzero(amount, cycles):
    """No zero test: a relaxed size is never empty (and a switch would cut the gradient)."""
    return cycles


EXACT = Arith("exact", cdiv, ceil_rate, _when_nonzero)
"""Integer arithmetic (straight-through ceilings for jax floats): what the emulator and the exact
model compute."""
SMOOTH = Arith("smooth", _smooth_cdiv, _smooth_rate, _smooth_when_nonzero)
"""Real arithmetic without ceilings (jax arrays): a differentiable surrogate of the same rules."""


def round_up(a, m, *, arith: Arith = EXACT):
    """``a`` rounded up to a multiple of ``m``."""
    return arith.cdiv(a, m) * m


def k0(h: HwNumbers, itemsize):
    """Fractal depth K0 for an operand of ``itemsize`` bytes (16 for fp16, 8 for fp32)."""
    return h.cube_k_bytes // itemsize


def gm_rate(h: HwNumbers, active_cores) -> Rate:
    """One core's GM rate when ``active_cores`` cores move data at once: its port ``gm``, or, where
    the chip's rate binds, its share ``Rate(chip_gm, cores)`` (the fraction itself, not a rounded
    quotient: :func:`ceil_rate`)."""
    xp = _xp(h.gm, h.chip_gm, active_cores)
    cores = xp.maximum(1, active_cores)
    return slower(h.gm, Rate(h.chip_gm, cores))


# ---- the rules -----------------------------------------------------------------------------------
# Each takes ``arith`` (keyword, :data:`EXACT` by default): the arithmetic its ceilings are done in.
def _rows(h: HwNumbers, move, bursts, xp):
    """A GM DMA's transfer: its bytes' time ``move``, or one row (burst) per ``h.row`` cycles where that
    is longer (the DMA's row rate), then a gap per discontiguous burst after the first."""
    return xp.maximum(move, bursts * h.row) + xp.maximum(bursts - 1, 0) * h.burst


def dma(h: HwNumbers, nbytes, bursts, rate, startup, *, arith: Arith = EXACT):
    """A DMA between GM and a core (DataCopy on MTE2 / MTE3): start-up, then bytes at ``rate`` (at most
    a row per ``h.row`` cycles) and a gap per discontiguous burst after the first."""
    xp = _xp(nbytes, bursts, *_num_den(rate))
    return arith.when_nonzero(nbytes, startup + _rows(h, arith.ceil_rate(nbytes, rate), bursts, xp))


def dma_in(h: HwNumbers, nbytes, bursts, rate, hit_bytes=0, *, arith: Arith = EXACT):
    """DataCopy GM -> L1 / UB (MTE2): of its ``nbytes``, the ``hit_bytes`` already in L2 move at the
    L2 read rate, the rest (misses, brought in from HBM) at ``rate``, the core's share of HBM
    (:func:`gm_rate`), at most a row per ``h.row`` cycles; plus the start-up and a gap per
    discontiguous burst after the first."""
    xp = _xp(nbytes, bursts, hit_bytes, *_num_den(rate))
    move = arith.ceil_rate(nbytes - hit_bytes, rate) + arith.ceil_rate(hit_bytes, h.l2_read)
    return arith.when_nonzero(nbytes, h.mte2_su + _rows(h, move, bursts, xp))


def write_rate(h: HwNumbers, active_cores):
    """The rate of a core's writes to GM: into L2 (write-allocate; HBM takes them at the chip's
    level, :func:`kernel_cycles`); with no L2 (``l2 == 0``), straight to HBM at the core's share."""
    share = gm_rate(h, active_cores)
    xp = _xp(h.l2, h.l2_write, *share)
    if xp is np and np.ndim(h.l2) == 0:
        return h.l2_write if h.l2 > 0 else share
    return Rate(xp.where(h.l2 > 0, h.l2_write, share.num), xp.where(h.l2 > 0, 1, share.den))


def dma_out(h: HwNumbers, nbytes, bursts, rate, *, arith: Arith = EXACT):
    """DataCopy UB -> GM (MTE3): the write ``rate`` (:func:`write_rate`), capped by MTE3's UB -> GM
    port."""
    return dma(h, nbytes, bursts, slower(h.ub_gm_rate, rate), h.mte3_su, arith=arith)


def onchip(nbytes, rate, startup, *, arith: Arith = EXACT):
    """A move inside the core (L1 -> L0, L0C -> UB, a vector pass): start-up plus bytes at ``rate``."""
    return arith.when_nonzero(nbytes, startup + arith.ceil_rate(nbytes, rate))


def load_l0a_bytes(h: HwNumbers, rows, cols, itemsize, *, arith: Arith = EXACT):
    """Bytes an L0A load moves for an (M, K) window: whole (16 x K0) fractals."""
    kk = k0(h, itemsize)
    return round_up(rows, FRACTAL_ROWS, arith=arith) * round_up(cols, kk, arith=arith) * itemsize


def load_l0b_bytes(h: HwNumbers, rows, cols, itemsize, *, arith: Arith = EXACT):
    """Bytes an L0B load moves for a (K, N) window: whole (K0 x 16) fractals."""
    kk = k0(h, itemsize)
    return round_up(rows, kk, arith=arith) * round_up(cols, FRACTAL_ROWS, arith=arith) * itemsize


def load_l0a(h: HwNumbers, nbytes, *, arith: Arith = EXACT):
    """LoadData 2D / Load3D into L0A (MTE1)."""
    return onchip(nbytes, h.l0a_rate, h.mte1_su, arith=arith)


def load_l0b(h: HwNumbers, nbytes, *, arith: Arith = EXACT):
    """LoadData 2D into L0B (MTE1)."""
    return onchip(nbytes, h.l0b_rate, h.mte1_su, arith=arith)


def mmad(h: HwNumbers, m, n, k, itemsize, *, arith: Arith = EXACT):
    """Mmad (M): one (cube_m x K0 x cube_n) block per cycle, plus the pipeline's start-up.

    K0 is one 32-byte fractal row of the operand: 16 for fp16 / bf16, 8 for fp32, 32 for int8, so
    an int8 Mmad does 16 x 32 x 16 MACs a cycle, twice fp16's (Hot Chips 2019's DaVinci talk: 8192
    int8 MACs per cycle; the platform ini's ``[DtypeMKN]``: int8 16 32 16)."""
    blocks = arith.cdiv(m, h.cube_m) * arith.cdiv(n, h.cube_n) * arith.cdiv(k, k0(h, itemsize))
    return arith.when_nonzero(blocks, h.mmad_su + blocks)


def mmad_flops_issued(h: HwNumbers, m, n, k, itemsize, *, arith: Arith = EXACT):
    """FLOPs the Cube performs for an (m, n, k) Mmad: whole blocks, padding included."""
    kk = k0(h, itemsize)
    return (
        2
        * round_up(m, h.cube_m, arith=arith)
        * round_up(n, h.cube_n, arith=arith)
        * round_up(k, kk, arith=arith)
    )


def l0c_bytes(m, n, *, arith: Arith = EXACT):
    """Bytes of the fp32 L0C fractals an (m, n) result occupies (what Fixpipe / L0C->UB read)."""
    return round_up(m, FRACTAL_ROWS, arith=arith) * round_up(n, FRACTAL_ROWS, arith=arith) * L0C_ITEMSIZE


def fixpipe_gm(h: HwNumbers, m, n, out_bytes, bursts, rate, *, arith: Arith = EXACT):
    """Fixpipe L0C -> GM (FIX): reading L0C and writing GM overlap; the slower sets the time."""
    xp = _xp(m, n, out_bytes, bursts, *_num_den(rate))
    read = arith.ceil_rate(l0c_bytes(m, n, arith=arith), h.fix_rate)
    write = _rows(h, arith.ceil_rate(out_bytes, rate), bursts, xp)
    return arith.when_nonzero(out_bytes, h.fix_su + xp.maximum(read, write))


def fixpipe_l1(h: HwNumbers, m, n, *, arith: Arith = EXACT):
    """Fixpipe L0C -> L1 (FIX)."""
    return onchip(l0c_bytes(m, n, arith=arith), h.fix_rate, h.fix_su, arith=arith)


def l0c_to_ub(h: HwNumbers, m, n, *, arith: Arith = EXACT):
    """L0C -> UB on the Vector pipe (coupled chips)."""
    return onchip(l0c_bytes(m, n, arith=arith), h.l0c_ub_rate, h.vec_su, arith=arith)


def vector(h: HwNumbers, nbytes, conflict=False, cpr=(1, 1), *, arith: Arith = EXACT):
    """One vector instruction (V): a repeat (beat) of ``vec_rate`` bytes over its widest operand every
    ``cpr`` = (num, den) cycles (its op's rate: ``vecops.RATES``), twice that where its two sources
    collide in a UB bank group (``conflict``: :func:`ub_read_conflict`)."""
    beats = arith.ceil_rate(nbytes, h.vec_rate)  # whole repeats, each at the op's rate
    if tuple(cpr) != (1, 1):
        beats = arith.cdiv(beats * cpr[0], cpr[1])
    if conflict is not False:
        beats = beats + _xp(beats, conflict).where(conflict, beats, 0 * beats)
    return arith.when_nonzero(nbytes, h.vec_su + beats)


def vector_op(h: HwNumbers, repeats, cpr=(1, 1), conflict=False, *, arith: Arith = EXACT):
    """A vector instruction in the lane form (``repeats`` whole repeats): :func:`vector`'s rule."""
    return vector(h, repeats * h.vec_rate, conflict, cpr, arith=arith)


def ub_read_conflict(h: HwNumbers, a0, a1):
    """Whether a vector instruction's two sources, starting at UB byte addresses ``a0`` and ``a1``,
    collide in a bank group on every beat: the read-read conflict of the vendor's add_high_performance
    case 5, which its case 6 removes by moving y 256 B (aiv_vec_time 12.85 -> 6.95 us).

    UB is ``ub_groups`` bank groups (the 910B family: 16 x 3 banks x 4 KB of 32-B rows), consecutive
    rows in consecutive groups; a beat reads ``vec_rate / ub_row`` rows (8) of each source, in step, so
    a beat is clean when their groups' distance keeps the two windows apart, and takes a second cycle
    otherwise. Read-write and write-write conflicts are not modelled (no measurement isolates them).
    False where ``ub_groups`` is 0 (banks not published)."""
    xp = _xp(a0, a1, h.ub_groups, h.vec_rate)
    groups = xp.maximum(xp.asarray(h.ub_groups), 1)
    rows = xp.asarray(h.vec_rate).astype(np.int32) // h.ub_row  # rows one beat reads of each source
    d = ((xp.asarray(a1) - xp.asarray(a0)) // h.ub_row) % groups
    return (xp.asarray(h.ub_groups) > 0) & ((d < rows) | (d > groups - rows))


def scalar(h: HwNumbers, cycles):
    """Scalar work (S): the cycles the kernel states (address arithmetic, loop control)."""
    return cycles


# ---- the chip around the cores: L2 capacity, HBM, launches ---------------------------------------
def l2_keeps(h: HwNumbers, sizes, xp=np):
    """Which of a kernel's GM tensors (their logical bytes, ``sizes``) the L2 keeps: smallest
    first, while they fit together (ties: the earlier tensor first). A kept tensor's re-reads hit
    L2 and, written or read, it stays for the next kernel; the others stream through. Works on
    Python / numpy / jax sizes; returns a bool array in ``sizes``' order."""
    if not len(sizes):
        return xp.zeros((0,), bool)
    s = xp.stack(xp.broadcast_arrays(*(xp.asarray(v, xp.float32) for v in sizes)))
    i = xp.arange(s.shape[0]).reshape((-1,) + (1,) * (s.ndim - 1))  # sizes may carry more axes
    before = (s[None, :] < s[:, None]) | ((s[None, :] == s[:, None]) & (i[None, :] <= i[:, None]))
    return (before * s[None, :]).sum(axis=1) <= h.l2


def recency_priced(h: HwNumbers, span, emax, rest, xp=np):
    """Whether a closed form counting every re-read as a hit is exact under the recency policy
    (``core/l2.py``) for a kernel re-reading only within ``span`` consecutive items: ``span`` x the most
    one item brings in over all cores (``emax``: misses as if every re-read hit, and writes) plus
    ``rest`` (the prologue, every weight miss) stays under the capacity (:func:`l2_recent`). A bound,
    True without recency (``cost.many.recency_guard``, the chooser's, bounds each window itself)."""
    return (h.recency == 0) | l2_recent(h, span * emax + rest)


def l2_recent(h: HwNumbers, entered):
    """Whether a re-read surely hits under recency after at most ``entered`` bytes entered the L2 since
    the element's last read: under the capacity, less two 32-B units (the clock's rounding)."""
    return entered < h.l2 - 64


def hbm_cycles(h: HwNumbers, hbm_bytes, *, arith: Arith = EXACT):
    """The fewest cycles in which the chip's HBM moves ``hbm_bytes`` (read misses and writes of all
    cores together); 0 where the chip's rate is unbounded."""
    xp = _xp(hbm_bytes, h.chip_gm)
    if xp is np and np.isinf(h.chip_gm):
        return 0 * hbm_bytes
    return arith.ceil_rate(hbm_bytes, h.chip_gm)


def traffic_floors(h: HwNumbers, nbytes, cores: int):
    """The fewest cycles ``nbytes`` of GM traffic take through ``cores`` ports (each ``h.gm``) and through
    the chip's HBM (:func:`hbm_cycles`): a floor under any schedule that moves them."""
    return ceil_rate(nbytes, h.gm * cores), hbm_cycles(h, nbytes)


def kernel_cycles(h: HwNumbers, core_end, hbm_bytes, *, arith: Arith = EXACT):
    """A kernel's cycles: its launch, then the later of the last core's end and the time the chip's
    HBM needs for everything the kernel moved to and from it."""
    xp = _xp(core_end, hbm_bytes)
    return h.launch + xp.maximum(core_end, hbm_cycles(h, hbm_bytes, arith=arith))


def vector_pass(h: HwNumbers, in_bytes, out_bytes, work_bytes, vector_ops: int, rate):
    """An element-wise pass on one vector core, double-buffered (the precision lab's normalisation
    pass): GM -> UB, ``vector_ops`` instructions over ``work_bytes`` each, UB -> GM (none for 0
    ``out_bytes``); the slowest pipe sets the time, after the start-ups and a launch (no L2 credit)."""
    mte2 = ceil_rate(in_bytes, rate)
    vec = vector_ops * ceil_rate(work_bytes, h.vec_rate)
    mte3 = ceil_rate(out_bytes, rate) if out_bytes else 0
    startup = h.mte2_su + vector_ops * h.vec_su + (h.mte3_su if out_bytes else 0)
    return h.launch + startup + max(mte2, vec, mte3)


# ---- the unit flag: Mmad and Fixpipe synchronised per unit of L0C --------------------------------
UNIT_FLAG_BYTES = 512  # the unit the flag tracks (vendor: "512B size fine-grained synchronization")


def unit_flag_fixpipe_wait(h: HwNumbers, m, n, mm, nn, kk, itemsize):
    """Cycles a unit-flag Fixpipe of an (m, n) L0C block waits beyond its own L0C read, started with the
    block's last Mmad (``mm`` x ``nn`` x ``kk``; unitFlag 3 on both): "whenever a 512B data result
    calculation is completed, FIXPIPE immediately moves out the 512B data" (asc-devkit
    ``.../matmul_high_performance/README.md``, case 8), so it ends no earlier than the Mmad plus its last
    unit's drain; the wait counts as busy, as aic_fixpipe_time does ("includes the waiting time")."""
    drain = ceil_rate(UNIT_FLAG_BYTES, h.fix_rate)
    read = ceil_rate(l0c_bytes(m, n), h.fix_rate)
    return max(0, mmad(h, mm, nn, kk, itemsize) + drain - read)

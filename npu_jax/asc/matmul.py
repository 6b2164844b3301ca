"""``asc.Matmul``: the vendor's high-level matrix API, written on the basic asc calls.

The vendor's kernels create a ``Matmul`` object, register it with the pipe and a host tiling
(``REGIST_MATMUL_OBJ(&pipe, workspace, mm, &tiling)``), point it at A, B (and a bias) in GM, then
either ``IterateAll(c)`` or ``while (mm.Iterate()) mm.GetTensorC(...)``, and ``End()``. Here the
object allocates its queues (A1 / B1 / A2 / B2 / CO1) from the pipe and computes each base block
with the same DataCopy (Nd2Nz), LoadData, Mmad and Fixpipe a user would write: one machine, no
second path. A core computes its ``single_core_m`` x ``single_core_n`` block of C in base blocks of
``base_m`` x ``base_n``, each accumulating over K in steps of ``base_k``.
"""

from __future__ import annotations

import dataclasses
import math

from npu_jax.asc import cube, ops, runtime
from npu_jax.asc.launcher import loop
from npu_jax.asc.pipe import TBuf, TPipe, TQue
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import GlobalTensor, LocalTensor
from npu_jax.asc.types import (
    DataCopyParams,
    FixpipeParamsV220,
    LoadData2DParams,
    MmadParams,
    Nd2NzParams,
    QuantMode,
    TPosition,
    bfloat16,
    float32,
    half,
)
from npu_jax.hw.config import FRACTAL_ROWS


@dataclasses.dataclass(frozen=True)
class TCubeTiling:
    """The host tiling of a Matmul (the vendor's ``TCubeTiling``, from ``MultiCoreMatmulTiling``):
    the whole problem (m, n, k), one core's block (``single_core_*``) and the base block (``base_*``)."""

    m: int
    n: int
    k: int
    single_core_m: int
    single_core_n: int
    single_core_k: int
    base_m: int
    base_n: int
    base_k: int
    # L1 caching (the vendor's TCubeTiling fields): A1 holds depth_a1 base blocks of A (base_m x base_k),
    # filled step_ka blocks along K at a time (step_m = step_n = 1); depth_a1 / step_ka = 2 is L1 double
    # buffering. B alike. db_l0a / db_l0b: L0A / L0B buffers (2: MTE1 fills one while the Cube reads the other).
    depth_a1: int = 1
    depth_b1: int = 1
    step_ka: int = 1
    step_kb: int = 1
    db_l0a: int = 1
    db_l0b: int = 1

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"TCubeTiling.{f.name} is a positive int, got {v!r}.")
        for whole, part in (
            ("single_core_m", "base_m"),
            ("single_core_k", "base_k"),
            ("m", "single_core_m"),
            ("k", "single_core_k"),
        ):
            if getattr(self, whole) % getattr(self, part):
                raise ValueError(
                    f"TCubeTiling: {whole} ({getattr(self, whole)}) must be a multiple of {part} "
                    f"({getattr(self, part)}) (edge blocks in M and K are not emulated yet; see docs/kernels.md)."
                )
        for depth, step in (("depth_a1", "step_ka"), ("depth_b1", "step_kb")):
            if getattr(self, depth) not in (getattr(self, step), 2 * getattr(self, step)):
                raise ValueError(
                    f"TCubeTiling: {depth} ({getattr(self, depth)}) is {step} or 2 x {step} (one L1 buffer "
                    f"of {step} base blocks, or two: double buffering); got {step} = {getattr(self, step)}."
                )
        if self.db_l0a > 2 or self.db_l0b > 2:
            raise ValueError(f"TCubeTiling: db_l0a / db_l0b are 1 or 2, got {self.db_l0a} / {self.db_l0b}.")
        if self.single_core_k % (self.base_k * math.lcm(self.step_ka, self.step_kb)):
            raise ValueError(
                f"TCubeTiling: single_core_k ({self.single_core_k}) must be a multiple of base_k x "
                f"lcm(step_ka, step_kb) = {self.base_k * math.lcm(self.step_ka, self.step_kb)}."
            )


@dataclasses.dataclass(frozen=True)
class MatmulConfig:
    """What the vendor's ``MatmulConfig`` turns on (``CFG_NORM`` / ``CFG_MDL``, ``enUnitFlag``), each a
    mechanism of the emulated machine:

    * ``mdl`` (CFG_MDL, "large package transfer"): one MTE2 copy brings ``step_ka`` (``step_kb``) base
      blocks along K into L1, ``step_ka x base_k`` elements a GM row, where the NORM template copies one
      base block at a time (and keeps its L1 depth at one block; steps > 1 need ``mdl``).
    * ``unit_flag`` (enUnitFlag): Mmad and Fixpipe synchronise per 512-B unit of L0C instead of per
      instruction: the Fixpipe of a block starts with the block's last Mmad
      (``costs.unit_flag_fixpipe_wait``) rather than after it.
    * ``constant_tiling`` (a ``MatmulApiStaticTiling`` known at compile time): the host tiling is not
      read from GM and no Scalar work computes addresses between iterations. The emulator does not
      charge the Scalar unit for the API's bookkeeping either way, so this changes no cycle here (the
      vendor measured -0.9% from it: docs/fidelity.md).
    """

    mdl: bool = False
    unit_flag: bool = False
    constant_tiling: bool = False


class Matmul:
    """``Matmul<A, B, C, Bias, CFG>``: C = A @ B over one core's block, A and B of ``a_dtype`` (half,
    bfloat16 or float32, as the chip's Cube takes them; ND in GM, B possibly stored transposed, [N, K]),
    C in GM.

    Example:
        >>> mm = asc.Matmul(pipe, tiling, c_dtype=asc.float32)      # doctest: +SKIP
        >>> mm.set_tensor_a(a_gm); mm.set_tensor_b(b_gm)             # doctest: +SKIP
        >>> mm.iterate_all(c_gm); mm.end()                           # doctest: +SKIP
    """

    def __init__(
        self,
        pipe: TPipe,
        tiling: TCubeTiling,
        c_dtype=half,
        config: MatmulConfig | None = None,
        a_dtype=half,
    ):
        if not isinstance(tiling, TCubeTiling):
            raise TypeError(f"asc.Matmul takes an asc.TCubeTiling, got {type(tiling).__name__}.")
        cfg = MatmulConfig() if config is None else config
        if not isinstance(cfg, MatmulConfig):
            raise TypeError(f"asc.Matmul's config is an asc.MatmulConfig, got {type(cfg).__name__}.")
        t = tiling
        if not cfg.mdl and (t.step_ka > 1 or t.step_kb > 1):
            raise ValueError(
                f"asc.Matmul: step_ka / step_kb > 1 ({t.step_ka} / {t.step_kb}) load several base blocks a copy: "
                "that is the MDL template's (MatmulConfig(mdl=True)); the NORM template copies one."
            )
        run = runtime.current()
        if a_dtype not in (half, bfloat16, float32):
            raise NotImplementedError(
                f"asc.Matmul: a_dtype {a_dtype} is not supported (half, bfloat16 and float32 are; the Cube's "
                "int8 path is the built-in npu_jax.matmul's)."
            )
        if a_dtype.fmt not in run.hw.cube_operands:
            raise AscError(
                f"asc.Matmul: {run.hw.name}'s Cube takes {' / '.join(run.hw.cube_operands)} operands (the vendor's "
                f"Mmad page), not {a_dtype}: cast A and B to half first."
            )
        self.t, self.c_dtype, self.cfg, self.ab = t, c_dtype, cfg, a_dtype
        size = a_dtype.itemsize
        n_a1, n_b1 = t.depth_a1 // t.step_ka, t.depth_b1 // t.step_kb  # L1 buffers (2: double buffering)
        self.q_a1, self.q_b1 = TQue(TPosition.A1, n_a1), TQue(TPosition.B1, n_b1)
        self.q_a2, self.q_b2 = TQue(TPosition.A2, t.db_l0a), TQue(TPosition.B2, t.db_l0b)
        self.q_c1 = TQue(TPosition.CO1, 1)
        pipe.init_buffer(self.q_a1, n_a1, t.base_m * t.step_ka * t.base_k * size)
        pipe.init_buffer(self.q_b1, n_b1, t.step_kb * t.base_k * t.base_n * size)
        pipe.init_buffer(self.q_a2, t.db_l0a, t.base_m * t.base_k * size)
        pipe.init_buffer(self.q_b2, t.db_l0b, t.base_k * t.base_n * size)
        pipe.init_buffer(self.q_c1, 1, t.base_m * t.base_n * 4)
        self.coupled = run.hw.coupled
        if self.coupled:  # 910 / 310P: L0C leaves through UB (CO2) and MTE3, no Fixpipe
            if cfg.unit_flag:
                raise ValueError(f"asc.Matmul: the unit flag is a Fixpipe mechanism; {run.hw.name} has none.")
            self.q_c2 = TQue(TPosition.CO2, 1)
            pipe.init_buffer(self.q_c2, 1, t.base_m * t.base_n * c_dtype.itemsize)
        self.a = self.b = None
        self.b_trans = False
        self.event = run.events.get("MTE2_V", 0)  # an MTE2_V id of its own (queues hand out the others)
        run.events["MTE2_V"] = self.event + 1
        self.event_fix = run.events.get("MTE2_FIX", 0)  # the bias row's MTE2 <-> FIX pair
        run.events["MTE2_FIX"] = self.event_fix + 1
        if cfg.unit_flag:  # the M -> FIX flag set as a block's last Mmad starts (its units drain as they end)
            self.event_unit = run.events.get("M_FIX", 0)
            run.events["M_FIX"] = self.event_unit + 1
        self.pipe, self.bias = pipe, None
        self.done = 0  # base blocks iterated so far (static: Iterate is a Python loop)
        self.c1 = None

    # ---- inputs -----------------------------------------------------------------------------------
    def set_tensor_a(self, gm: GlobalTensor, is_transpose: bool = False) -> None:
        """``SetTensorA(gm)``: A's rows of this core's block, row-major (ND) with rows ``k`` long."""
        if is_transpose:
            raise NotImplementedError(
                "asc.Matmul.set_tensor_a(is_transpose=True) is not supported yet; see docs/kernels.md."
            )
        self.a = gm

    def set_tensor_b(self, gm: GlobalTensor, is_transpose: bool = False) -> None:
        """``SetTensorB(gm)``: B's columns of this core's block: row-major (ND) with rows ``n`` long, or,
        ``is_transpose``, B stored as [N, K] (rows ``k`` long, from this core's first column on): each
        B1 copy then takes ``base_n`` rows of K and LoadData turns them (ifTranspose) into L0B's (K, N)."""
        self.b, self.b_trans = gm, bool(is_transpose)

    def set_bias(self, gm: GlobalTensor) -> None:
        """``SetBias(gm)``: this core's ``single_core_n`` float32 bias values (one per column of C, from
        ``gm`` on), added to every row of each block in fp32 before the conversion. They go GM -> L1 (C1)
        once per call, and the Fixpipe adds them (the chip's C1 -> C2 bias table, its load folded into
        the Fixpipe as in the built-in kernels: the sum is (A @ B) + bias, rounded once more than a bias
        in L0C's initial value would be). 910B only: the coupled chips have no Fixpipe."""
        run = runtime.current()
        if self.coupled:
            raise NotImplementedError(
                f"asc.Matmul.set_bias on {run.hw.name} (coupled, no Fixpipe) is not supported yet; see docs/kernels.md."
            )
        t = self.t
        if self.bias is None:
            self.bias_buf = TBuf(TPosition.C1)
            self.pipe.init_buffer(self.bias_buf, t.single_core_n * float32.itemsize)
            self.bias = self.bias_buf.get(float32)
            cube.bias_row(self.bias, "asc.Matmul.set_bias")
        else:  # the Fixpipes that read the last bias are done before it is overwritten
            ops.set_flag("FIX_MTE2", self.event_fix)
            ops.wait_flag("FIX_MTE2", self.event_fix)
        cube.data_copy(self.bias, gm, t.single_core_n)
        ops.set_flag("MTE2_FIX", self.event_fix)
        ops.wait_flag("MTE2_FIX", self.event_fix)

    # ---- computing ------------------------------------------------------------------------------
    @property
    def _blocks(self) -> tuple[int, int]:
        t = self.t
        return t.single_core_m // t.base_m, -(-t.single_core_n // t.base_n)

    def _copy_a(self, row0, k0):
        """A1 <- A's rows ``row0``.. of ``step_ka`` base blocks along K from ``k0`` (one copy: MDL)."""
        t = self.t
        a1 = self.q_a1.alloc_tensor(self.ab)
        width = t.step_ka * t.base_k
        cube.data_copy(a1, self.a[row0 * t.k + k0 :], Nd2NzParams(1, t.base_m, width, 0, t.k, t.base_m, 1, 0))
        self.q_a1.enque(a1)
        return self.q_a1.deque(self.ab)

    def _copy_b(self, col0, k0, n_valid: int):
        """B1 <- ``step_kb`` base blocks of B along K from ``k0``, columns ``col0``.. (``n_valid`` of them)."""
        t = self.t
        b1 = self.q_b1.alloc_tensor(self.ab)
        width = t.step_kb * t.base_k
        if self.b_trans:  # B^T's rows col0.. (n_valid of base_n), k0.. of K: NZ (width / C0, base_n, C0)
            p = Nd2NzParams(1, n_valid, width, 0, t.k, t.base_n, 1, 0)
            cube.data_copy(b1, self.b[col0 * t.k + k0 :], p)
        else:
            if n_valid != t.base_n:
                raise NotImplementedError(
                    "asc.Matmul: an N edge block (single_core_n not a multiple of base_n) needs B stored "
                    "transposed (set_tensor_b(..., is_transpose=True)); see docs/kernels.md."
                )
            p = Nd2NzParams(1, width, t.base_n, 0, t.n, width, 1, 0)
            cube.data_copy(b1, self.b[k0 * t.n + col0 :], p)
        self.q_b1.enque(b1)
        return self.q_b1.deque(self.ab)

    def _k_chunk(self, c1, row0, col0, chunk, n_valid: int, last: bool) -> None:
        """``lcm(step_ka, step_kb)`` K steps of base block (row0, col0): the A1 / B1 copies they need,
        LoadData of each base block to L0A / L0B, one Mmad each. ``last``: the block's final chunk."""
        t = self.t
        steps = math.lcm(t.step_ka, t.step_kb)
        c0 = runtime.current().hw.c0(self.ab.itemsize)
        for s in range(steps):
            kt = chunk * steps + s
            if s % t.step_ka == 0:
                a1 = self._copy_a(row0, kt * t.base_k)
            if s % t.step_kb == 0:
                b1 = self._copy_b(col0, kt * t.base_k, n_valid)
            a2, b2 = self.q_a2.alloc_tensor(self.ab), self.q_b2.alloc_tensor(self.ab)
            # the base block's fractals: K block (s % step) of the NZ tile, whose columns hold base_m /
            # base_n rows of C0 each (start_index counts fractals down a column block, then across)
            ia, ib = s % t.step_ka, s % t.step_kb
            cube.load_data(a2, a1, LoadData2DParams(ia * t.base_k // c0 * (t.base_m // FRACTAL_ROWS)))
            start_b = (
                ib * t.base_k // c0 * (t.base_n // FRACTAL_ROWS)
                if self.b_trans
                else ib * t.base_k // FRACTAL_ROWS
            )
            cube.load_data(b2, b1, LoadData2DParams(start_b, if_transpose=self.b_trans))
            if ia == t.step_ka - 1:
                self.q_a1.free_tensor(a1)
            if ib == t.step_kb - 1:
                self.q_b1.free_tensor(b1)
            self.q_a2.enque(a2)
            self.q_b2.enque(b2)
            a2, b2 = self.q_a2.deque(self.ab), self.q_b2.deque(self.ab)
            final = last and s == steps - 1
            unit = (3 if final else 2) if self.cfg.unit_flag else 0
            if final and self.cfg.unit_flag:  # the Fixpipe may start as this Mmad does
                ops.set_flag("M_FIX", self.event_unit)
            cube.mmad(c1, a2, b2, MmadParams(t.base_m, n_valid, t.base_k, unit, False, kt == 0))
            self.q_a2.free_tensor(a2)
            self.q_b2.free_tensor(b2)

    def _compute(self, i, j, n_valid: int | None = None) -> LocalTensor:
        """Base block (i, j) of the core's block (ints or traced) into a CO1 tensor, ready for output."""
        if self.a is None or self.b is None:
            raise AscError(
                f"asc.Matmul at {runtime.where()}: set_tensor_a and set_tensor_b before iterating."
            )
        t = self.t
        n_valid = t.base_n if n_valid is None else n_valid
        c1 = self.q_c1.alloc_tensor(float32)
        row0, col0 = i * t.base_m, j * t.base_n
        chunks = t.single_core_k // (t.base_k * math.lcm(t.step_ka, t.step_kb))
        peel = 1 if self.cfg.unit_flag else 0  # the last chunk apart: its last Mmad carries unit flag 3

        @loop(chunks - peel)
        def _(chunk):
            self._k_chunk(c1, row0, col0, chunk, n_valid, False)

        if peel:
            self._k_chunk(c1, row0, col0, chunks - 1, n_valid, True)
            return c1
        self.q_c1.enque(c1)
        return self.q_c1.deque(float32)

    def _bias(self, j):
        return None if self.bias is None else self.bias[j * self.t.base_n :]

    def _out(self, c1: LocalTensor, dst: GlobalTensor, i, j, n_valid: int | None = None) -> None:
        """Fixpipe base block (i, j) into C (rows ``n`` long), converted to C's dtype; free CO1. On a
        coupled chip: CO1 -> CO2 (UB, converted on the way) and MTE3 rows into C."""
        t = self.t
        n_valid = t.base_n if n_valid is None else n_valid
        if self.coupled:
            if n_valid != t.base_n:
                raise NotImplementedError("asc.Matmul: N edge blocks on a coupled chip; see docs/kernels.md.")
            c2 = self.q_c2.alloc_tensor(self.c_dtype)
            cube.data_copy(c2, c1, t.base_m * t.base_n)
            self.q_c1.free_tensor(c1)
            self.q_c2.enque(c2)
            c2 = self.q_c2.deque(self.c_dtype)
            per = runtime.current().hw.alignment("UB") // self.c_dtype.itemsize  # elements per 32-B block
            rows = DataCopyParams(t.base_m, t.base_n // per, 0, (t.n - t.base_n) // per)
            cube.data_copy(dst[i * t.base_m * t.n + j * t.base_n :], c2, rows)
            self.q_c2.free_tensor(c2)
            return
        quant = QuantMode(self.c_dtype.fmt)  # the Fixpipe conversion to C's dtype
        unit = 3 if self.cfg.unit_flag else 0
        if unit:  # set as the block's last Mmad started
            ops.wait_flag("M_FIX", self.event_unit)
        params = FixpipeParamsV220(n_valid, t.base_m, t.base_m, t.n, False, quant, unit_flag=unit)
        cube.fixpipe(dst[i * t.base_m * t.n + j * t.base_n :], c1, params, bias=self._bias(j))
        self.q_c1.free_tensor(c1)

    def iterate_all(self, c: GlobalTensor) -> None:
        """``IterateAll(c)``: every base block of the core's block, computed and written to ``c`` (one
        ``asc.loop``, row-major). Where ``single_core_n`` is not a multiple of ``base_n`` the last column
        of blocks is an edge block (``single_core_n % base_n`` columns, whole fractals on the Cube)."""
        t = self.t
        mi, ni = self._blocks
        tail = t.single_core_n - (ni - 1) * t.base_n
        full = ni if tail == t.base_n else ni - 1

        @loop(mi * full)
        def _(b):
            i, j = b // full, b % full
            self._out(self._compute(i, j), c, i, j)

        if full < ni:

            @loop(mi)
            def _(i):
                self._out(self._compute(i, ni - 1, tail), c, i, ni - 1, tail)

    def iterate(self) -> bool:
        """``Iterate()``: compute the next base block (row-major over the core's block) into L0C; False
        once every block is done (``while mm.iterate(): mm.get_tensor_c(...)``, a Python loop)."""
        if self.c1 is not None:
            raise AscError(f"asc.Matmul.iterate at {runtime.where()}: get_tensor_c the previous block first.")
        t = self.t
        if self.cfg.unit_flag or t.single_core_n % t.base_n:
            raise NotImplementedError(
                "asc.Matmul.iterate with the unit flag or an N edge block is not supported yet (iterate_all is); "
                "see docs/kernels.md."
            )
        mi, ni = self._blocks
        if self.done >= mi * ni:
            return False
        self.block = divmod(self.done, ni)
        self.c1 = self._compute(*self.block)
        self.done += 1
        return True

    def get_tensor_c(self, dst, workspace: GlobalTensor | None = None) -> None:
        """``GetTensorC(dst)``: the block ``iterate`` computed, into C in GM (``dst`` a GlobalTensor) or
        into a UB tensor. On a separated chip (910B) the Cube's result reaches the vector core through
        GM: ``workspace`` (a GM scratch of a base block) carries it, as the vendor's mix kernels do; on a
        coupled chip (910, 310P) L0C goes to UB directly (CO1 -> CO2) and ``workspace`` is not used."""
        if self.c1 is None:
            raise AscError(f"asc.Matmul.get_tensor_c at {runtime.where()}: iterate() first.")
        c1, (i, j), self.c1 = self.c1, self.block, None
        if isinstance(dst, GlobalTensor):
            return self._out(c1, dst, i, j)
        if self.coupled:  # 910 / 310P: CO1 -> CO2 straight into the user's UB tensor (V)
            cube.data_copy(dst, c1, self.t.base_m * self.t.base_n)
            self.q_c1.free_tensor(c1)
            return
        if workspace is None:
            raise AscError(
                f"asc.Matmul.get_tensor_c at {runtime.where()}: a UB destination needs workspace= (GM scratch of "
                f"base_m x base_n elements) on {runtime.current().hw.name}."
            )
        t = self.t
        quant = QuantMode(self.c_dtype.fmt)  # the Fixpipe conversion to C's dtype
        params = FixpipeParamsV220(t.base_n, t.base_m, t.base_m, t.base_n, False, quant)
        cube.fixpipe(workspace, c1, params, bias=self._bias(j))
        self.q_c1.free_tensor(c1)
        # the vector side reads the block back once Fixpipe wrote it and every earlier read of dst is done
        ops.pipe_barrier("ALL")
        cube.data_copy(dst, workspace, t.base_m * t.base_n)
        ops.set_flag("MTE2_V", self.event)
        ops.wait_flag("MTE2_V", self.event)

    def end(self) -> None:
        """``End()``: every block must have been taken out."""
        if self.c1 is not None:
            raise AscError(
                f"asc.Matmul.end at {runtime.where()}: the last block was computed but never taken out."
            )

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
    float32,
    half,
)


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

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"TCubeTiling.{f.name} is a positive int, got {v!r}.")
        for whole, part in (
            ("single_core_m", "base_m"),
            ("single_core_n", "base_n"),
            ("single_core_k", "base_k"),
            ("m", "single_core_m"),
            ("n", "single_core_n"),
            ("k", "single_core_k"),
        ):
            if getattr(self, whole) % getattr(self, part):
                raise ValueError(
                    f"TCubeTiling: {whole} ({getattr(self, whole)}) must be a multiple of {part} "
                    f"({getattr(self, part)}) (edge blocks are not emulated yet; see docs/kernels.md)."
                )


class Matmul:
    """``Matmul<A, B, C>``: C = A @ B over one core's block, fp16 A and B (ND in GM), C in GM.

    Example:
        >>> mm = asc.Matmul(pipe, tiling, c_dtype=asc.float32)      # doctest: +SKIP
        >>> mm.set_tensor_a(a_gm); mm.set_tensor_b(b_gm)             # doctest: +SKIP
        >>> mm.iterate_all(c_gm); mm.end()                           # doctest: +SKIP
    """

    def __init__(self, pipe: TPipe, tiling: TCubeTiling, c_dtype=half):
        if not isinstance(tiling, TCubeTiling):
            raise TypeError(f"asc.Matmul takes an asc.TCubeTiling, got {type(tiling).__name__}.")
        run = runtime.current()
        t = tiling
        self.t, self.c_dtype = t, c_dtype
        self.q_a1, self.q_b1 = TQue(TPosition.A1, 1), TQue(TPosition.B1, 1)
        self.q_a2, self.q_b2 = TQue(TPosition.A2, 1), TQue(TPosition.B2, 1)
        self.q_c1 = TQue(TPosition.CO1, 1)
        pipe.init_buffer(self.q_a1, 1, t.base_m * t.base_k * half.itemsize)
        pipe.init_buffer(self.q_b1, 1, t.base_k * t.base_n * half.itemsize)
        pipe.init_buffer(self.q_a2, 1, t.base_m * t.base_k * half.itemsize)
        pipe.init_buffer(self.q_b2, 1, t.base_k * t.base_n * half.itemsize)
        pipe.init_buffer(self.q_c1, 1, t.base_m * t.base_n * 4)
        self.coupled = run.hw.coupled
        if self.coupled:  # 910 / 310P: L0C leaves through UB (CO2) and MTE3, no Fixpipe
            self.q_c2 = TQue(TPosition.CO2, 1)
            pipe.init_buffer(self.q_c2, 1, t.base_m * t.base_n * c_dtype.itemsize)
        self.a = self.b = None
        self.event = run.events.get("MTE2_V", 0)  # an MTE2_V id of its own (queues hand out the others)
        run.events["MTE2_V"] = self.event + 1
        self.event_fix = run.events.get("MTE2_FIX", 0)  # the bias row's MTE2 <-> FIX pair
        run.events["MTE2_FIX"] = self.event_fix + 1
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
        """``SetTensorB(gm)``: B's columns of this core's block, row-major (ND) with rows ``n`` long."""
        if is_transpose:
            raise NotImplementedError(
                "asc.Matmul.set_tensor_b(is_transpose=True) is not supported yet; see docs/kernels.md."
            )
        self.b = gm

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
        return t.single_core_m // t.base_m, t.single_core_n // t.base_n

    def _compute(self, i, j) -> LocalTensor:
        """Base block (i, j) of the core's block (ints or traced) into a CO1 tensor, dequeued for output."""
        if self.a is None or self.b is None:
            raise AscError(
                f"asc.Matmul at {runtime.where()}: set_tensor_a and set_tensor_b before iterating."
            )
        t = self.t
        c1 = self.q_c1.alloc_tensor(float32)
        row0, col0 = i * t.base_m, j * t.base_n

        @loop(t.single_core_k // t.base_k)
        def _(kt):
            a1, b1 = self.q_a1.alloc_tensor(half), self.q_b1.alloc_tensor(half)
            k0 = kt * t.base_k
            cube.data_copy(
                a1, self.a[row0 * t.k + k0 :], Nd2NzParams(1, t.base_m, t.base_k, 0, t.k, t.base_m, 1, 0)
            )
            cube.data_copy(
                b1, self.b[k0 * t.n + col0 :], Nd2NzParams(1, t.base_k, t.base_n, 0, t.n, t.base_k, 1, 0)
            )
            self.q_a1.enque(a1)
            self.q_b1.enque(b1)
            a1, b1 = self.q_a1.deque(half), self.q_b1.deque(half)
            a2, b2 = self.q_a2.alloc_tensor(half), self.q_b2.alloc_tensor(half)
            cube.load_data(a2, a1, LoadData2DParams())
            cube.load_data(b2, b1, LoadData2DParams())
            self.q_a1.free_tensor(a1)
            self.q_b1.free_tensor(b1)
            self.q_a2.enque(a2)
            self.q_b2.enque(b2)
            a2, b2 = self.q_a2.deque(half), self.q_b2.deque(half)
            cube.mmad(c1, a2, b2, MmadParams(t.base_m, t.base_n, t.base_k, 0, False, kt == 0))
            self.q_a2.free_tensor(a2)
            self.q_b2.free_tensor(b2)

        self.q_c1.enque(c1)
        return self.q_c1.deque(float32)

    def _bias(self, j):
        return None if self.bias is None else self.bias[j * self.t.base_n :]

    def _out(self, c1: LocalTensor, dst: GlobalTensor, i, j) -> None:
        """Fixpipe base block (i, j) into C (rows ``n`` long), converted to C's dtype; free CO1. On a
        coupled chip: CO1 -> CO2 (UB, converted on the way) and MTE3 rows into C."""
        t = self.t
        if self.coupled:
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
        params = FixpipeParamsV220(t.base_n, t.base_m, t.base_m, t.n, False, quant)
        cube.fixpipe(dst[i * t.base_m * t.n + j * t.base_n :], c1, params, bias=self._bias(j))
        self.q_c1.free_tensor(c1)

    def iterate_all(self, c: GlobalTensor) -> None:
        """``IterateAll(c)``: every base block of the core's block, computed and written to ``c`` (one
        ``asc.loop``)."""
        mi, ni = self._blocks

        @loop(mi * ni)
        def _(b):
            i, j = b // ni, b % ni
            self._out(self._compute(i, j), c, i, j)

    def iterate(self) -> bool:
        """``Iterate()``: compute the next base block (row-major over the core's block) into L0C; False
        once every block is done (``while mm.iterate(): mm.get_tensor_c(...)``, a Python loop)."""
        if self.c1 is not None:
            raise AscError(f"asc.Matmul.iterate at {runtime.where()}: get_tensor_c the previous block first.")
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

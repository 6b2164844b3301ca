"""``asc.adv``: pyasc's high-level APIs on the emulator's: ``Matmul`` (on :class:`npu_jax.asc.Matmul`),
``quant`` (on the vector calls), ``softmax`` (on ``asc.softmax``), and their structs.

**Matmul.** pyasc builds the object from three ``MatmulType``s, registers it with the pipe and a
``TCubeTiling`` (``register_matmul(pipe, workspace, mm[, tiling])`` / ``mm.init(tiling)``), and walks
it with ``iterate_all(c)`` or the ``with mm.iterate() as count:`` loop (``asc.jit`` turns that ``with``
into a ``for``: :mod:`npu_jax.asc.pyasc.rewrite`). Here ``init`` makes the emulator's Matmul of the
tiling, which computes each base block with the same DataCopy / LoadData / Mmad / Fixpipe a kernel
would write. The loop walks the base blocks in the tiling's ``iterate_order`` (0, ORDER_M: M fastest,
the order pyasc's samples assume); ``get_tensor_c`` into UB brings a block through a GM workspace of
the launch's own (the Cube's result reaches the vector side through GM on the 910B), so the
``workspace`` argument pyasc passes (a byte buffer) is not used.
"""

from __future__ import annotations

import dataclasses
import enum
import sys

from npu_jax.asc import matmul, ops, runtime, vec
from npu_jax.asc.pyasc import state as pstate
from npu_jax.asc.pyasc.auto import auto_tensor
from npu_jax.asc.pyasc.lang import CubeFormat, LayoutMode
from npu_jax.asc.pyasc.structs import SoftmaxTiling, TCubeTiling
from npu_jax.asc.runtime import AscError
from npu_jax.asc.tensors import GlobalAddress, GlobalTensor, LocalTensor
from npu_jax.asc.types import RoundMode, TPosition, bfloat16, dtype_of, float32, half

__all__ = [
    "IterateOrder",
    "Matmul",
    "MatmulConfig",
    "MatmulIterator",
    "MatmulType",
    "QuantConfig",
    "SoftmaxTiling",
    "TCubeTiling",
    "quant",
    "register_matmul",
    "softmax",
]


class IterateOrder(enum.IntEnum):
    """The order of the base blocks (``TCubeTiling.iterate_order``): ORDER_M walks M fastest."""

    ORDER_M = 0
    ORDER_N = 1
    UNDEF = 2


@dataclasses.dataclass(frozen=True)
class MatmulType:
    """``MatmulType(position, format, dtype, is_trans=False, layout=LayoutMode.NONE)``: one operand."""

    position: TPosition
    format: CubeFormat
    dtype: object
    is_trans: bool = False
    layout: LayoutMode = LayoutMode.NONE


_CONFIG_DEFAULTS = dict(
    do_norm=True, do_basic_block=False, do_multi_data_load=False, basic_m=0, basic_n=0, basic_k=0,
    intrinsics_check=False, is_n_batch=False, en_vec_nd2nz=False, do_special_basic_block=False,
    do_mte2_preload=0, single_core_m=0, single_core_n=0, single_core_k=0, step_m=0, step_n=0, base_mn=0,
    single_core_mn=0, en_unit_flag=True, is_per_tensor=False, has_anti_quant_offset=False,
    do_ib_share_norm=False, do_special_mdl=False, enable_init=True, batch_mode=1, enable_end=True,
    enable_get_tensor_c=True, enable_set_org_shape=True, enable_set_bias=True, enable_set_tail=True,
    enable_quant_vector=True, enable_set_define_data=True, iterate_mode=0, enable_reuse=True,
    enable_ub_reuse=False, enable_l1_cache_ub=False, intra_block_part_sum=False,
    iterate_order=IterateOrder.UNDEF, schedule_type=0, enable_double_cache=0, is_bias_batch=True,
    enable_static_pad_zeros=False, is_partial_output=False, enable_mix_dual_master=False,
    is_a2b2_shared=False, is_enable_channel_split=False, enable_kdim_reorder_load=False,
    is_co1_shared=False, shared_co1_buffer_size=64 * 1024, batch_out_mode=0,
)  # fmt: skip


class MatmulConfig:
    """``MatmulConfig(**fields)``: pyasc's keyword fields (``do_norm``, ``do_multi_data_load``, ...), all
    accepted. The emulator's Matmul takes ``do_multi_data_load`` (the MDL template: several base blocks
    along K a copy); the unit flag (``en_unit_flag``) is not turned on (its ``iterate`` does not take it)."""

    def __init__(self, **fields):
        unknown = sorted(set(fields) - set(_CONFIG_DEFAULTS))
        if unknown:
            raise TypeError(f"asc.adv.MatmulConfig has no field(s) {unknown}.")
        self.fields = {**_CONFIG_DEFAULTS, **fields}

    def __getattr__(self, name):
        if name != "fields" and name in _CONFIG_DEFAULTS:
            return self.fields[name]
        raise AttributeError(name)

    def emulated(self) -> matmul.MatmulConfig:
        return matmul.MatmulConfig(mdl=bool(self.fields["do_multi_data_load"]))


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    """``QuantConfig``: carried (the emulator's quant needs none of it)."""

    calc_count: int = 0
    offset_count: int = 0
    scale_count: int = 0
    work_local_size: int = 0


def _emulated_tiling(t: TCubeTiling, mdl: bool) -> matmul.TCubeTiling:
    """The emulator's TCubeTiling of pyasc's (K is ``k_a``; L1 depths as one or two buffers of steps)."""
    if int(t.k_b or t.k_a) != int(t.k_a):
        raise NotImplementedError(f"asc.adv.Matmul: k_a ({t.k_a}) != k_b ({t.k_b}) is not supported.")
    ska = max(1, int(t.step_k_a)) if mdl else 1
    skb = max(1, int(t.step_k_b)) if mdl else 1
    return matmul.TCubeTiling(
        m=int(t.m), n=int(t.n), k=int(t.k_a),
        single_core_m=int(t.single_core_m), single_core_n=int(t.single_core_n),
        single_core_k=int(t.single_core_k or t.k_a),
        base_m=int(t.base_m), base_n=int(t.base_n), base_k=int(t.base_k),
        depth_a1=2 * ska if t.depth_a1 >= 2 * ska else ska, depth_b1=2 * skb if t.depth_b1 >= 2 * skb else skb,
        step_ka=ska, step_kb=skb, db_l0a=2 if t.db_l0a >= 2 else 1, db_l0b=2 if t.db_l0b >= 2 else 1,
    )  # fmt: skip


class Matmul:
    """``asc.adv.Matmul(a=MatmulType, b=..., c=..., bias=None, matmul_config=None, matmul_policy=0)``.

    A and B: GM, ND, both half, bfloat16 or float32, as the chip's Cube takes them (A not transposed;
    B may be: ``is_trans`` / ``set_tensor_b(gm, True)``). C: GM (``iterate_all(c_gm)``,
    ``get_tensor_c(c_gm)``) or UB (VECCALC: ``get_tensor_c(ub)`` in the iterate loop, the base block
    row-major at the tensor's start). The bias: float32 in GM."""

    def __init__(self, a=None, b=None, c=None, bias=None, matmul_config=None, matmul_policy=0):
        for name, ty in (("a", a), ("b", b), ("c", c)):
            if not isinstance(ty, MatmulType):
                raise TypeError(f"asc.adv.Matmul: {name} is an asc.adv.MatmulType, got {ty!r}.")
        for name, ty in (("a", a), ("b", b)):
            if ty.position != TPosition.GM or ty.format != CubeFormat.ND:
                raise NotImplementedError(
                    f"asc.adv.Matmul: {name} at {ty.position.name} in {ty.format.name} is not supported (GM, ND are)."
                )
            if dtype_of(ty.dtype) not in (half, bfloat16, float32):
                raise NotImplementedError(
                    f"asc.adv.Matmul: {name} is {dtype_of(ty.dtype)}; half, bfloat16 and float32 operands are supported."
                )
        if dtype_of(a.dtype) != dtype_of(b.dtype):
            raise NotImplementedError(
                f"asc.adv.Matmul: A is {dtype_of(a.dtype)} and B {dtype_of(b.dtype)}; the Cube takes one operand type."
            )
        if a.is_trans:
            raise NotImplementedError("asc.adv.Matmul: a transposed A is not supported (B may be).")
        self.a_type, self.b_type, self.c_type, self.bias_type = a, b, c, bias or c
        self.config = matmul_config if matmul_config is not None else MatmulConfig()
        self.policy = matmul_policy
        self.mm: matmul.Matmul | None = None
        self.pipe = self.tiling = None
        pstate.state().needs.used = True

    # ---- registration ---------------------------------------------------------------------------
    def init(self, tiling: TCubeTiling) -> None:
        """``Init(&tiling)``: the emulator's Matmul of this tiling, its buffers from the registered pipe."""
        if self.pipe is None:
            raise AscError(
                f"asc.adv.Matmul.init at {runtime.where()}: register_matmul(pipe, workspace, mm) first."
            )
        if not isinstance(tiling, TCubeTiling):
            raise TypeError(f"Matmul.init takes an asc.adv.TCubeTiling, got {type(tiling).__name__}.")
        cfg = self.config.emulated()
        self.tiling = tiling
        self.mm = matmul.Matmul(
            self.pipe,
            _emulated_tiling(tiling, cfg.mdl),
            c_dtype=dtype_of(self.c_type.dtype),
            config=cfg,
            a_dtype=dtype_of(self.a_type.dtype),
        )
        if self.c_type.position != TPosition.GM:
            needs = pstate.state().needs
            needs.ws_elems = max(needs.ws_elems, int(tiling.base_m) * int(tiling.base_n))
            needs.ws_dtype = dtype_of(self.c_type.dtype)

    def _ready(self, call: str) -> matmul.Matmul:
        if self.mm is None:
            raise AscError(
                f"asc.adv.Matmul.{call} at {runtime.where()}: init(tiling) (or register_matmul with one) first."
            )
        return self.mm

    # ---- inputs ---------------------------------------------------------------------------------
    def set_tensor_a(self, tensor, transpose=False) -> None:
        self._ready("set_tensor_a").set_tensor_a(tensor, bool(transpose or self.a_type.is_trans))

    def set_tensor_b(self, tensor, transpose=False) -> None:
        self._ready("set_tensor_b").set_tensor_b(tensor, bool(transpose or self.b_type.is_trans))

    def set_bias(self, tensor) -> None:
        self._ready("set_bias").set_bias(tensor)

    def disable_bias(self) -> None:
        if self._ready("disable_bias").bias is not None:
            raise NotImplementedError("asc.adv.Matmul.disable_bias after set_bias is not supported.")

    def set_tail(self, tail_m=-1, tail_n=-1, tail_k=-1) -> None:
        """``SetTail``: the emulator's Matmul computes whole single-core blocks, so a tail is the block
        itself (-1, or the tiling's size); a traced tail cannot be checked and is taken as whole."""
        t = self._ready("set_tail").t
        for name, v, full in (("tail_m", tail_m, t.single_core_m), ("tail_n", tail_n, t.single_core_n),
                              ("tail_k", tail_k, t.single_core_k)):  # fmt: skip
            if isinstance(v, int) and v not in (-1, full):
                raise NotImplementedError(
                    f"asc.adv.Matmul.set_tail at {runtime.where()}: {name} {v} < the single-core block's {full}; "
                    f"tails are not emulated: size the tiling so that the blocks divide m and n "
                    f"(npu_jax.asc.lib.host.MultiCoreMatmulTiling does)."
                )

    def set_org_shape(self, org_m, org_n, org_ka, org_kb=None, org_kc=None) -> None:
        t = self._ready("set_org_shape").t
        if (org_m, org_n, org_ka) != (t.m, t.n, t.k):
            raise NotImplementedError(
                "asc.adv.Matmul.set_org_shape other than the tiling's is not supported."
            )

    def set_single_shape(self, single_m, single_n, single_k) -> None:
        t = self._ready("set_single_shape").t
        if (single_m, single_n, single_k) != (t.single_core_m, t.single_core_n, t.single_core_k):
            raise NotImplementedError(
                "asc.adv.Matmul.set_single_shape other than the tiling's is not supported."
            )

    # ---- computing ------------------------------------------------------------------------------
    def iterate_all(self, tensor, en_atomic=0, sync=True, en_sequential_write=None, wait_iterate_all=None,
                    fake_msg=None) -> None:  # fmt: skip
        """``IterateAll(c)``: the whole single-core block into C in GM (rows ``n`` long)."""
        if en_atomic:
            raise NotImplementedError("asc.adv.Matmul.iterate_all(en_atomic=...) is not supported.")
        self._ready("iterate_all").iterate_all(tensor)

    def iterate(self, en_partial_sum=False, sync=True, local_c_matrix=None) -> MatmulIterator:
        """``with mm.iterate() as count:`` (a loop over the base blocks; ``count`` 0, 1, ...)."""
        if en_partial_sum or local_c_matrix is not None:
            raise NotImplementedError(
                "asc.adv.Matmul.iterate(en_partial_sum / local_c_matrix) is not supported."
            )
        self._ready("iterate")
        return MatmulIterator(self)

    def _next(self) -> bool:
        """Compute the next base block into L0C (in the tiling's iterate_order); False when done."""
        mm = self.mm
        t = mm.t
        mi, ni = t.single_core_m // t.base_m, -(-t.single_core_n // t.base_n)
        if int(self.tiling.iterate_order) == IterateOrder.ORDER_N or mi == 1 or ni == 1:
            return mm.iterate()
        # npu_jax.asc.Matmul.iterate walks N fastest; ORDER_M walks M fastest: the same steps, reordered
        if mm.c1 is not None:
            raise AscError(f"asc.adv.Matmul at {runtime.where()}: get_tensor_c the previous block first.")
        if t.single_core_n % t.base_n:
            raise NotImplementedError("asc.adv.Matmul.iterate with an N edge block is not supported.")
        if mm.done >= mi * ni:
            return False
        mm.block = (mm.done % mi, mm.done // mi)
        mm.c1 = mm._compute(*mm.block)
        mm.done += 1
        return True

    def get_tensor_c(self, *args, **kwargs):
        """``GetTensorC(tensor, en_atomic=0, en_sequential_write=False, ...)``: the block ``iterate``
        computed, into C in GM (at the block's place) or into a UB tensor (the block, row-major)."""
        mm = self._ready("get_tensor_c")
        names = ("tensor", "en_atomic", "en_sequential_write", "sync", "optional_tensor")
        vals = {**dict(zip(names, args)), **kwargs}
        tensor = vals.get("tensor")
        if not isinstance(tensor, (GlobalTensor, LocalTensor)):
            raise NotImplementedError(
                "asc.adv.Matmul.get_tensor_c() returning a GlobalTensor is not supported."
            )
        if vals.get("en_atomic"):
            raise NotImplementedError("asc.adv.Matmul.get_tensor_c(en_atomic=...) is not supported.")
        if isinstance(tensor, GlobalTensor):
            if vals.get("en_sequential_write"):
                raise NotImplementedError("get_tensor_c(gm, en_sequential_write=True) is not supported.")
            return mm.get_tensor_c(tensor)
        return mm.get_tensor_c(tensor, workspace=self._workspace())

    def _workspace(self) -> GlobalTensor:
        """This block's part of the launch's Matmul workspace (GM): one base block of C."""
        run, st = runtime.current(), pstate.state()
        n = int(self.tiling.base_m) * int(self.tiling.base_n)
        addr = st.workspace
        if addr is None:
            if not run.planning:
                raise AscError("asc.adv.Matmul: get_tensor_c into UB needs a launch by an asc.jit kernel.")
            addr = GlobalAddress("__pyasc_workspace", 0, dtype_of(self.c_type.dtype), n)
        else:
            addr = addr + ops.get_block_idx() * st.ws_elems
        return GlobalTensor().set_global_buffer(addr, n)

    def end(self) -> None:
        self._ready("end").end()


class MatmulIterator:
    """``mm.iterate()``: iterated (the ``with`` that ``asc.jit`` rewrites into a ``for``), it computes
    each base block in turn and yields its count."""

    def __init__(self, mm: Matmul):
        self.mm = mm

    def __iter__(self):
        count = 0
        while self.mm._next():
            yield count
            count += 1

    def __enter__(self):
        raise AscError(
            "asc.adv.Matmul.iterate() is a loop (`with mm.iterate() as count:` runs its body once per base "
            "block): use it in an @asc.jit function, which runs the body as a loop."
        )

    def __exit__(self, *exc):
        return False


def register_matmul(pipe, workspace, matmul: Matmul, tiling: TCubeTiling | None = None) -> None:
    """``REGIST_MATMUL_OBJ(&pipe, workspace, mm[, &tiling])``: ``workspace`` is taken and not used (the
    launch gives the Matmul a GM workspace of its own)."""
    if not isinstance(matmul, Matmul):
        raise TypeError(f"register_matmul takes an asc.adv.Matmul, got {type(matmul).__name__}.")
    matmul.pipe = pipe
    if tiling is not None:
        matmul.init(tiling)


def quant(dst, src, scale, offset, count=None, temp_buffer=None, reuse_source=False, config=None) -> None:
    """``AscendQuant``: ``dst`` (int8) = round-half-to-even(src * scale + offset), the product and the
    sum in src's type (scale and offset converted to it first), on the vector unit: Muls, Adds, then a
    Cast with CAST_RINT (saturating). The intermediate goes to ``src`` when ``reuse_source``, else to a
    UB buffer of the call's own (``temp_buffer`` is taken and not needed)."""
    n = src.get_size() if count is None else count
    tmp = src if reuse_source else auto_tensor(src.dtype, n, "asc.adv.quant")
    vec.muls(tmp, src, scale, n)
    vec.adds(tmp, tmp, offset, n)
    vec.cast(dst, tmp, RoundMode.CAST_RINT, n)


def softmax(dst, sum, max, src, tiling, temp_buffer=None, reuse_source=False, basic_block=False,  # noqa: A002
            data_format_nz=False) -> None:  # fmt: skip
    """``SoftMax``: the rows of ``src`` (its ShapeInfo's last axis), by ``npu_jax.asc.softmax``."""
    fn = getattr(sys.modules.get("npu_jax.asc"), "softmax", None)
    if fn is None:
        raise NotImplementedError(
            "asc.adv.softmax calls npu_jax.asc.softmax, which this version does not have."
        )
    extra = {
        k: v
        for k, v, d in (("temp_buffer", temp_buffer, None), ("reuse_source", reuse_source, False),
                        ("basic_block", basic_block, False), ("data_format_nz", data_format_nz, False))
        if v != d
    }  # fmt: skip
    return fn(dst, sum, max, src, tiling, **extra)

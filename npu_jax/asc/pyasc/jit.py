"""``asc.jit``: pyasc's kernel decorator and launch, on the emulator.

``@asc.jit`` (or ``@asc.jit(**options)``) makes an asc kernel (:class:`npu_jax.asc.launcher.Kernel`);
``kernel[core_num, stream](args...)`` or ``kernel[core_num](args...)`` launches it as pyasc does:

* **Arguments**, positional or by keyword. A numpy array (or a torch CPU tensor) is GM; after the run
  every GM argument's final contents are written back into it, in place (pyasc copies every memory
  argument back). Python scalars, ``asc.ConstExpr[...]`` parameters (type-checked) and tiling structs
  are static; a struct is passed as a copy (the kernel's assignments stay in the kernel).
* **Options**: the decorator's and the call's (pyasc's ``CompileOptions`` / ``CodegenOptions`` /
  ``LaunchOptions`` fields, merged, the call's winning) are accepted; an unknown one is a TypeError.
  ``kernel_type``, ``matmul_cube_only`` and ``insert_sync`` act; the others concern pyasc's compiler.
  The emulator's own launch keywords (``hw``, ``checks``, ``jit``, ``timing_only``, ``board``, ``trace``,
  ``policy``, ``name``) follow the kernel's arguments, unless the kernel has a parameter of the name.
  ``hw`` defaults to the platform of ``config.set_platform`` (pyasc's Model default, the Ascend910B1:
  ``npu_jax.presets.ascend910b1()``).
* **Kernel type**: ``kernel_type``, or pyasc's inference: a kernel that makes an ``asc.adv.Matmul``
  is MIX_AIC_1_2 (AIC_ONLY with ``matmul_cube_only=True``), any other AIV_ONLY. An AIV kernel runs
  ``core_num`` vector blocks, an AIC kernel ``core_num`` cube blocks. A MIX_AIC_1_2 launch of
  ``core_num`` groups (1 AIC + 2 AIV each) runs **2 x core_num blocks**, ``get_block_idx()`` in
  ``[0, 2 x core_num)`` as on the chip's vector side: each block is one AIV's program with the Cube
  work its Matmul asks for, on one emulated core with every pipe; blocks beyond the chip's cube cores
  run in waves, so two AIVs' blocks share a core in time as they share an AIC on the chip (their
  vector work, parallel on the chip, is serial here).
* **Returns** the launch's :class:`~npu_jax.report.report.Report` (pyasc returns nothing; the
  outputs are in the arrays).

Called from inside a kernel, an ``@asc.jit`` function is a plain call (pyasc's device functions).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing

import numpy as np

from npu_jax.asc import launcher, runtime
from npu_jax.asc.launcher import Kernel
from npu_jax.asc.pyasc import auto, lang
from npu_jax.asc.pyasc import state as pstate
from npu_jax.asc.pyasc.rewrite import rewrite_iterate
from npu_jax.asc.pyasc.structs import Frozen, Struct
from npu_jax.asc.runtime import AscError, config
from npu_jax.asc.tensors import GlobalAddress
from npu_jax.asc.types import dtype_of
from npu_jax.core.buffers import DTYPES

KT = config.KernelType


@dataclasses.dataclass(frozen=True)
class CodegenOptions:
    capture_exceptions: bool = True
    ir_multithreading: bool = True


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    debug: bool = False
    strip_loc: bool = False
    verify_sync: bool = False
    print_ir_before_all: bool = False
    run_passes: bool = True
    kernel_type: object = None
    opt_level: int | None = 3
    auto_sync: bool | None = True
    auto_sync_log: str | None = ""
    bisheng_options: tuple | None = None
    always_compile: bool = False
    matmul_cube_only: bool = False
    insert_sync: bool | None = None


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    core_num: int = 0
    stream: object = None


OPTIONS = frozenset(
    f.name for cls in (CodegenOptions, CompileOptions, LaunchOptions) for f in dataclasses.fields(cls)
)
EMULATOR = ("hw", "checks", "jit", "timing_only", "trace", "policy", "name", "board")
WORKSPACE = "__pyasc_workspace__"  # the hidden GM argument of the Matmuls' workspace


def _check_options(options: dict, where: str) -> None:
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise TypeError(f"{where}: unknown option(s) {unknown}; pyasc's options: {sorted(OPTIONS)}.")


def jit(fn=None, **options):
    """``@asc.jit`` / ``@asc.jit(always_compile=True, matmul_cube_only=..., insert_sync=...,
    kernel_type=config.KernelType.AIV_ONLY, ...)``: a kernel, launched with ``kernel[core_num,
    stream](args...)`` (module docstring)."""
    _check_options(options, "asc.jit")
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)


def _in_launch() -> bool:
    try:
        runtime.current()
    except AscError:
        return False
    return True


def _is_torch(v) -> bool:
    return type(v).__module__.split(".")[0] == "torch" and hasattr(v, "numpy")


class JitFunction(Kernel):
    """An ``@asc.jit`` function: launch with ``kernel[core_num, stream](args...)``; called inside a
    kernel it is a plain function call."""

    def __init__(self, fn, **options):
        super().__init__(rewrite_iterate(fn))
        self.source = fn
        self.options = options
        self.signature = inspect.signature(fn)
        clash = sorted(set(self.signature.parameters) & OPTIONS)
        if clash:
            raise TypeError(
                f"asc.jit: parameter(s) {clash} of {fn.__name__} clash with pyasc's option names."
            )
        self._entries: dict = {}
        self._needs: dict = {}

    def __repr__(self) -> str:
        return f"asc.jit({self.fn.__name__})"

    def __call__(self, *args, **kwargs):
        if _in_launch():
            return self.fn(*args, **kwargs)
        raise TypeError(
            f"launch an asc.jit kernel with {self.fn.__name__}[core_num, stream](args...) (or [core_num]); "
            f"called directly it is a device function of another kernel."
        )

    def __getitem__(self, launch_options):
        opts = (
            LaunchOptions(*launch_options)
            if isinstance(launch_options, tuple)
            else LaunchOptions(launch_options)
        )
        n = opts.core_num
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise AscError(f"{self.fn.__name__}[core_num, stream]: core_num is an int > 0, got {n!r}.")
        return functools.partial(self._run, int(n))

    # ---- the launch -----------------------------------------------------------------------------
    def _hints(self) -> dict:
        try:
            return typing.get_type_hints(self.source)
        except Exception:  # an annotation that does not evaluate: only the evaluated ones count
            return {k: v for k, v in self.source.__annotations__.items() if not isinstance(v, str)}

    def _run(self, core_num: int, *args, **kwargs):
        params = self.signature.parameters
        emu = {k: kwargs.pop(k) for k in EMULATOR if k in kwargs and k not in params}
        opts = dict(self.options)
        for k in [k for k in kwargs if k in OPTIONS and k not in params]:
            opts[k] = kwargs.pop(k)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.fn.__name__}: {e}") from None
        bound.apply_defaults()
        hints = self._hints()
        names, values, gm = [], [], []
        for name, p in params.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"asc.jit: {self.fn.__name__} has *{name}; a kernel's parameters are named.")
            v = lang.ConstExpr.unwrap(bound.arguments[name])
            if lang.is_constexpr(hints.get(name)):
                lang.check_constexpr(name, hints[name], v)
            if _is_torch(v):
                arr = _torch_numpy(v, name)
                gm.append((v, arr))
                v = arr
            elif isinstance(v, np.ndarray):
                gm.append((v, v))
            elif isinstance(v, Struct):
                v = v.freeze()
            names.append(name)
            values.append(v)
        hw = emu.pop("hw", None) or config.hardware()
        cube_only = bool(opts.get("matmul_cube_only", False))
        sync = opts.get("insert_sync", None) is not False
        kt = opts.get("kernel_type")
        needs = self._preplan(hw, names, values, core_num, pstate.AIC if cube_only else pstate.AIV, sync)
        if kt is None:
            kt = (KT.AIC_ONLY if cube_only else KT.MIX_AIC_1_2) if needs.used else KT.AIV_ONLY
            explicit = False
        else:
            kt, explicit = KT(kt), True
        side, core, blocks = _layout(kt, explicit, core_num)
        ws = needs.ws_elems if needs.used else 0
        extra = ()
        if ws:
            extra = (np.zeros(blocks * ws, np.dtype(DTYPES[dtype_of(needs.ws_dtype).fmt])),)
        kern = self._entry(tuple(names), side, core, sync, ws)
        outs, report = launcher.launch(kern, blocks, *values, *extra, hw=hw, **emu)
        for (orig, arr), out in zip(gm, outs):
            if out is not None:
                _write_back(orig, arr, out)
        return report

    def _preplan(self, hw, names, values, n, side, sync) -> pstate.MatmulNeeds:
        """Run the kernel's plan once to learn what pyasc's compiler knows before a launch: whether it
        makes a Matmul (the kernel type) and how much GM its get_tensor_c into UB needs."""
        key = (hw.name, n, side, sync, tuple(_key(v) for v in values))
        try:
            hit = self._needs.get(key)
        except TypeError:  # an unhashable argument: the launch will say so
            key, hit = None, None
        if hit is not None:
            return hit
        gm_args = {
            p: (int(v.size), dtype_of(v.dtype), tuple(v.shape))
            for p, v in zip(names, values)
            if isinstance(v, np.ndarray)
        }
        plan = runtime.KernelRun(runtime.PLAN, hw, n_blocks=n, gm_args=gm_args)
        st = pstate.attach(plan, pstate.PassState(side=side, insert_sync=sync))
        call = [
            GlobalAddress(p, 0, gm_args[p][1], gm_args[p][0]) if p in gm_args else _thaw(v)
            for p, v in zip(names, values)
        ]
        with runtime.active(plan):
            self.fn(*call)
        if key is not None:
            self._needs[key] = st.needs
        return st.needs

    def _entry(self, names: tuple, side: str, core, sync: bool, ws: int) -> Kernel:
        """The function the emulator's launcher runs (one per layout, kept: its compiled programs are
        reused): the kernel, with the pass's pyasc state, struct copies and the hidden workspace."""
        key = (names, side, core, sync, ws)
        kern = self._entries.get(key)
        if kern is not None:
            return kern
        fn = self.fn

        def entry(*args):
            run = runtime.current()
            st = pstate.attach(run, pstate.PassState(side=side, insert_sync=sync, ws_elems=ws))
            if ws:
                st.workspace, args = args[-1], args[:-1]
            run.on_operand = auto.on_operand  # the asc calls report their operands (insert_sync)
            fn(*(_thaw(a) for a in args))

        P = inspect.Parameter
        entry.__signature__ = inspect.Signature(
            [P(n, P.POSITIONAL_OR_KEYWORD) for n in names + ((WORKSPACE,) if ws else ())]
        )
        entry.__name__ = entry.__qualname__ = fn.__name__
        kern = self._entries[key] = Kernel(entry, core)
        return kern


def _layout(kt: KT, explicit: bool, n: int) -> tuple[str, str | None, int]:
    """(side, the emulator's core kind, blocks) of a kernel type launched on ``n`` cores / groups."""
    if kt in (KT.AIC_ONLY, KT.MIX_AIC_1_0):
        return pstate.AIC, "cube", n
    if kt in (KT.MIX_AIC_1_2, KT.MIX_AIC_HARD_SYNC):
        return pstate.MIX, "mix", 2 * n
    if kt == KT.MIX_AIC_1_1:
        return pstate.MIX, "mix", n
    return pstate.AIV, "vector" if explicit else None, n


def _thaw(v):
    return v.thaw() if isinstance(v, Frozen) else v


def _key(v):
    if isinstance(v, np.ndarray):
        return ("gm", v.shape, v.dtype.str)
    hash(v)
    return v


def _torch_numpy(t, name: str) -> np.ndarray:
    if getattr(t, "device", None) is not None and getattr(t.device, "type", "cpu") != "cpu":
        raise TypeError(f"argument {name!r} is a torch tensor on {t.device}; the emulator takes CPU tensors.")
    try:
        return t.detach().numpy()
    except TypeError as e:  # bfloat16 has no numpy type
        raise TypeError(f"argument {name!r}: {e}; pass a float16 / float32 tensor.") from None


def _write_back(orig, arr: np.ndarray, out) -> None:
    """The GM argument's final contents into the caller's array (or tensor), in place."""
    out = np.asarray(out).reshape(arr.shape)
    if _is_torch(orig):
        import torch  # an optional dependency, present when a torch tensor was passed

        orig.copy_(torch.from_numpy(np.array(out)))  # a writable copy: torch warns on a read-only one
    elif orig.flags.writeable:
        np.copyto(orig, out)

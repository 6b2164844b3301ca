"""Arguments every public entry point shares, checked and canonicalised once, at the boundary.

One layer: types (real bools, real ints, array-likes converted once with their dtype checked),
ranges, finiteness, and the size of what a call would allocate, estimated and refused above a
limit the user can raise (:func:`set_max_bytes`, ``NPU_JAX_MAX_BYTES``). Every error is one of the
package's own (:mod:`npu_jax.errors`) and names the entry point, the parameter, the value and the fix.
The primitive checks (``check_bool``, ``check_int``, ...) live in :mod:`npu_jax.errors`, the lowest
layer, so that the search (below this layer) uses the same ones.

Gradients: the emulated kernels are bit arithmetic (rounding by integer operations), whose
derivative is zero almost everywhere, so ``jax.grad`` through them would return zeros in silence.
:func:`no_grad` refuses it with a :class:`~npu_jax.errors.GradientError` (docs/errors.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.core.checks.columns import LW, SLACK
from npu_jax.core.policy import Policy
from npu_jax.core.sanitize import Checks
from npu_jax.errors import (
    GradientError,
    InputError,
    InputTypeError,
    check_bool,
    check_int,
    check_seed,
    check_size,
    max_bytes,
    set_max_bytes,
)
from npu_jax.hw import presets
from npu_jax.hw.config import FRACTAL_ROWS, HardwareConfig
from npu_jax.workload.conv import ConvGeometry

TRACE_DEFAULT = 4096  # events per core that ``trace=True`` keeps
TRACE_EVENT_BYTES = 24  # pipe, op (int32) and start, end (wide: two int32 each)


def state_bytes(fn: str, hw: HardwareConfig, cores: int, gm_bytes: int, cap: int, checks: Checks) -> int:
    """Estimate (and refuse above the limit) what a launch allocates: per core, the on-chip buffers
    (at most the chip's capacities), its copy of the GM tensors (``gm_bytes``, written masks
    included), the event trace and the sanitizer log."""
    onchip = sum(hw.buffer_bytes(b) for b in ("L1", "L0A", "L0B", "L0C", "UB"))
    log = (checks.capacity + SLACK) * LW * 4 if checks.enabled else 0
    parts = {
        "on-chip buffers": cores * onchip,
        "GM tensors": cores * int(gm_bytes),
        f"trace ({cap} events/core)": cores * cap * TRACE_EVENT_BYTES,
        f"sanitizer log ({checks.capacity} rows/core)": cores * log,
    }
    return check_size(fn, parts)


# ---- the shared arguments ---------------------------------------------------------------------------
def check_hw(hw, fn: str) -> HardwareConfig:
    hw = presets.ascend910b() if hw is None else hw
    if not isinstance(hw, HardwareConfig):
        raise InputTypeError(
            f"{fn}: hw must be a HardwareConfig (e.g. npu_jax.presets.get({hw!r}) for a preset "
            f"name), got {type(hw).__name__}."
        )
    return hw


def check_policy(policy, fn: str) -> Policy:
    policy = Policy() if policy is None else policy
    if not isinstance(policy, Policy):
        hint = f"Policy(operand={policy!r})" if isinstance(policy, str) else "Policy(operand='bf16')"
        raise InputTypeError(
            f"{fn}: policy must be an npu_jax.Policy or None, got {type(policy).__name__} "
            f"{policy!r}; e.g. {hint}."
        )
    check_seed(fn, "policy.seed", policy.seed)
    return policy


def check_trace(trace, fn: str) -> int:
    """``trace``: a bool (True = 4096 events per core) or an int capacity in [0, 2**31 - 1]."""
    if isinstance(trace, (bool, np.bool_)):
        return TRACE_DEFAULT if trace else 0
    return check_int(fn, "trace", trace, 0, 2**31 - 1, fix="pass a bool or an event capacity >= 0")


def check_common(hw, policy, checks, trace, fn: str):
    """The arguments every kernel entry point shares, checked and canonicalised once.

    Returns (hw, policy, checks, trace capacity): ``hw`` None -> ``presets.ascend910b()``, ``policy``
    None -> ``Policy()``, ``checks`` -> a :class:`~npu_jax.core.sanitize.Checks` (None = the process
    default), ``trace`` True -> 4096 events, False -> 0, an int >= 0 -> itself.
    """
    hw = check_hw(hw, fn)
    policy = check_policy(policy, fn)
    if checks is not None and not isinstance(checks, (str, Checks, list, tuple, set, frozenset)):
        raise InputTypeError(
            f"{fn}: checks must be None, 'all', 'none', check names or a Checks, got "
            f"{type(checks).__name__} {checks!r}."
        )
    try:
        checks = Checks.parse(checks)
    except (TypeError, ValueError) as e:
        raise InputError(f"{fn}: {e}") from None
    return hw, policy, checks, check_trace(trace, fn)


def check_flag(name: str, v, fn: str = "conv2d") -> bool:
    """A bool option (numpy bools count; ``"no"`` or ``1`` do not)."""
    return check_bool(fn, name, v)


def as_array(fn: str, name: str, v, *, floating: bool = True):
    """``v`` converted once to a jax array whose dtype is a real float (``floating``) or a real
    number; None, strings, dicts, object and complex arrays are refused naming ``name``."""
    if v is None or isinstance(v, (str, bytes, dict)):
        raise InputTypeError(f"{fn}: {name} must be an array, got {type(v).__name__}.")
    if not isinstance(v, (jax.Array, np.ndarray)):
        try:
            v = np.asarray(v)
        except (TypeError, ValueError, OverflowError) as e:
            raise InputTypeError(
                f"{fn}: {name} must be an array-like of numbers, got {type(v).__name__} ({e})."
            ) from None
    dt = np.dtype(v.dtype)
    if dt.kind == "c":
        raise InputTypeError(
            f"{fn}: {name} must be real, got dtype {dt}; the emulated chip has no complex arithmetic "
            f"(pass {name}.real and {name}.imag separately)."
        )
    is_float = jnp.issubdtype(dt, jnp.floating)  # bfloat16 and fp8 included (numpy kind 'V')
    if not is_float and dt.kind not in "iub":
        raise InputTypeError(
            f"{fn}: {name} must be a numeric array, got dtype {dt}; convert it, e.g. np.asarray({name}, "
            f"np.float32)."
        )
    if floating and not is_float:
        raise InputTypeError(f"{fn}: {name} must be a float array, got {dt}; cast it first.")
    if not isinstance(v, jax.Array):
        # the copy to the device is an allocation too: estimated from the shape before it is made (a
        # broadcast view or a memory map of tens of GB would otherwise be materialised, then refused)
        item = min(dt.itemsize, 4) if dt.kind in "fiu" and not jax.config.jax_enable_x64 else dt.itemsize
        check_size(
            fn, {f"{name} {tuple(v.shape)} {dt} on the device": int(np.prod(v.shape, dtype=object)) * item}
        )
    return jnp.asarray(v)


def check_arrays(x, w, fn: str = "conv2d"):
    """x and w as float jax arrays (see :func:`as_array`)."""
    return as_array(fn, "x", x), as_array(fn, "w", w)


def int8_operand(fn: str, name: str, v):
    """``v`` as an int8 jax array: an integer array whose values (when concrete) lie in [-128, 127].
    Floats are refused, not rounded: quantising is the caller's choice (scale, zero point)."""
    v = as_array(fn, name, v, floating=False)
    if jnp.issubdtype(v.dtype, jnp.floating):
        raise InputTypeError(
            f"{fn}: with int8 operands {name} must be an integer array in [-128, 127], got {v.dtype}; quantise it "
            f"first (precision.quantize(x, scale, zero_point))."
        )
    if not isinstance(v, jax.core.Tracer) and v.size:
        lo, hi = int(jnp.min(v)), int(jnp.max(v))
        if lo < -128 or hi > 127:
            raise InputError(
                f"{fn}: with int8 operands {name} must lie in [-128, 127], got values in [{lo}, {hi}]; an uint8 "
                f"tensor is shifted by -128 (its zero point too)."
            )
    return v.astype(jnp.int8)


def check_quant(fn: str, policy: Policy, scale, offset, channels: int):
    """The dequantisation's ``scale`` (None, or fp32 (``channels``,)) and ``offset`` (an int), checked
    against the policy: int8 operands with fp16 / int8 output need a scale; nothing else takes one."""
    if not policy.quantised:
        if scale is not None or offset:
            raise InputError(
                f"{fn}: scale / offset dequantise an int32 accumulator; they need "
                f"Policy(operand='int8', output='fp16' or 'int8'), got operand {policy.operand!r}."
            )
        return None, 0
    if policy.output == "int32":
        if scale is not None or offset:
            raise InputError(f"{fn}: output 'int32' returns the exact sums: pass no scale or offset.")
        return None, 0
    if scale is None:
        raise InputError(
            f"{fn}: Policy(operand='int8', output={policy.output!r}) needs scale= (x_scale * w_scale, a number or "
            f"one per output channel ({channels},); divided by the output's scale for int8)."
        )
    if isinstance(offset, bool) or not isinstance(offset, int | np.integer) or not -128 <= int(offset) <= 127:
        raise InputError(
            f"{fn}: offset (the int8 output's zero point) must be an int in [-128, 127], got {offset!r}."
        )
    if offset and policy.output != "int8":
        raise InputError(
            f"{fn}: offset is the int8 output's zero point; output {policy.output!r} takes none."
        )
    s = as_array(fn, "scale", scale, floating=False).astype(jnp.float32)
    if s.ndim > 1 or (s.ndim == 1 and s.shape[0] != channels):
        raise InputError(
            f"{fn}: scale must be a number or one value per output channel ({channels},), got shape {tuple(s.shape)}."
        )
    if not isinstance(s, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(s))):
        raise InputError(f"{fn}: scale must be finite, got {np.asarray(s)}.")
    return jnp.broadcast_to(s, (channels,)), int(offset)


def check_shared_scale(fn: str, g: ConvGeometry, hw, scale) -> None:
    """A grouped int8 conv run as several super-groups (``ConvGeometry.dense_view``) reads one
    super-group's row of scales for all: its per-channel scales must repeat every super-group."""
    sgroups = g.supergroups(hw.c0(1), FRACTAL_ROWS)
    if sgroups == 1 or isinstance(scale, jax.core.Tracer):
        return
    s = np.asarray(scale).reshape(sgroups, -1)
    if not (s == s[:1]).all():
        raise InputError(
            f"{fn}: {g.describe()} runs as {sgroups} super-groups, which read one row of scales: pass a scale "
            f"every super-group shares (a number), or output='int32' and npu_jax.requantize per channel."
        )


def nbytes(*arrays, itemsize: int | None = None) -> int:
    """Bytes of ``arrays`` (at ``itemsize`` per element when given)."""
    return sum(int(np.prod(a.shape, dtype=np.int64)) * (itemsize or a.dtype.itemsize) for a in arrays)


def conv_gm_bytes(g: ConvGeometry) -> int:
    """GM bytes of a conv (x, w, y at 4 B an element, the widest format, and y's written mask)."""
    out = g.n * g.k * max(g.ho, 1) * max(g.wo, 1)
    return 4 * (g.n * g.c * g.h * g.w + g.k * g.c * g.kh * g.kw) + 5 * out


_BOUND_FIELDS = ("n", "c", "h", "w", "k", "kh", "kw")


def check_bound(fn: str, g, bound, x=None, w=None) -> None:
    """``g`` and ``bound`` ConvGeometry values, ``x`` and ``w`` at the bound's shapes, and ``g`` inside
    ``bound`` wherever ``g``'s fields are concrete (a traced layer is the caller's promise): a layer
    larger than its bound would give an output of the bound's shape, silently cut."""
    for name, v in (("g", g), ("bound", bound)):
        if not isinstance(v, ConvGeometry):
            raise InputTypeError(
                f"{fn}: {name} must be a ConvGeometry (npu_jax.workload.conv.canonicalize(x_shape, "
                f"w_shape, ...)), got {type(v).__name__}."
            )
    xs, ws = (bound.n, bound.c, bound.h, bound.w), (bound.k, bound.c, bound.kh, bound.kw)
    if x is not None and (tuple(x.shape) != xs or tuple(w.shape) != ws):
        raise InputError(
            f"{fn}: x {tuple(x.shape)} and w {tuple(w.shape)} must have the bound's shapes {xs} and {ws} "
            f"(the layer's data in their leading corner)."
        )
    over = []
    for f in _BOUND_FIELDS:
        gv, bv = getattr(g, f), getattr(bound, f)
        if isinstance(gv, (int, np.integer)) and int(gv) > bv:
            over.append(f"{f}={int(gv)} > {bv}")
    ho_b = bound.h + bound.pads[0] + bound.pads[1]
    wo_b = bound.w + bound.pads[2] + bound.pads[3]
    try:
        if int(g.ho) > ho_b or int(g.wo) > wo_b:
            over.append(f"output {int(g.ho)}x{int(g.wo)} > {ho_b}x{wo_b}")
    except (TypeError, jax.errors.ConcretizationTypeError):
        pass  # traced: the caller's promise
    if over:
        raise InputError(
            f"{fn}: the layer g does not fit its bound ({', '.join(over)}); give a bound at least as "
            f"large as every layer in every field (e.g. bound=g for one layer)."
        )


# ---- gradients --------------------------------------------------------------------------------------
def no_grad(fn: str, *arrays):
    """``arrays`` unchanged; any JAX differentiation through them (``grad``, ``jvp``, ``vjp``,
    ``jacfwd``...) raises a :class:`GradientError` naming ``fn``. Arrays that are not being
    differentiated pass at no cost (the rule runs only inside a differentiation)."""
    return _no_grad(fn)(*arrays)


@functools.cache
def _no_grad(fn: str):
    @jax.custom_jvp
    def ident(*xs):
        return xs

    @ident.defjvp
    def _refuse(primals, tangents):
        raise GradientError(
            f"{fn}: jax.grad (or any JAX differentiation) through an emulated kernel is not supported: "
            f"its rounding is bit arithmetic whose derivative is zero almost everywhere, so the gradient "
            f"would be silently wrong. Differentiate the reference (jnp.dot / lax.conv_general_dilated "
            f"at the same precision) instead, or wrap the inputs in jax.lax.stop_gradient."
        )

    return ident


__all__ = [
    "as_array",
    "check_arrays",
    "check_bound",
    "check_common",
    "check_flag",
    "check_hw",
    "check_policy",
    "check_size",
    "check_trace",
    "conv_gm_bytes",
    "max_bytes",
    "nbytes",
    "no_grad",
    "set_max_bytes",
    "state_bytes",
]

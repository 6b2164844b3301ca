"""Tilings as JAX pytrees: integer fields that may be Python ints, stacked arrays or tracers.

:class:`~npu_jax.mapping.conv.ConvTiling` and :class:`~npu_jax.mapping.gemm.MatmulTiling` are frozen
dataclasses whose every field is a pytree leaf, so a batch of tilings is one tiling whose fields
carry a leading axis (``jax.tree.map(lambda *a: jnp.stack(a), *tilings)``) and ``jax.vmap`` /
``jax.jit`` pass them like any other pytree. Their checks run on *concrete* values (Python ints,
or numpy / jax arrays holding values, entry by entry) and skip traced ones; unflattening (what JAX
does inside its transformations) never checks, so it never raises on JAX's placeholders.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np


def register(cls):
    """Register the dataclass ``cls`` as a pytree whose leaves are all its fields (keyed by name);
    unflattening builds the instance without running ``__post_init__``. Returns ``cls``."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    keys = tuple(jax.tree_util.GetAttrKey(n) for n in names)

    def flatten_with_keys(t):
        return tuple(zip(keys, (getattr(t, n) for n in names))), None

    def flatten(t):
        return tuple(getattr(t, n) for n in names), None

    def unflatten(_, children):
        return unchecked(cls, **dict(zip(names, children)))

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls


def unchecked(cls, **values):
    """An instance of the frozen dataclass ``cls`` built without its checks: for values that were
    checked elsewhere (the search's batches, whose legality ``search.exact.legal`` decides) or that
    JAX hands back from a transformation. Omitted fields take their defaults."""
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.name in values:
            v = values[f.name]
        elif f.default is not dataclasses.MISSING:
            v = f.default
        else:
            raise TypeError(f"{cls.__name__}: field {f.name!r} has no default; pass {f.name}=...")
        object.__setattr__(obj, f.name, v)
    return obj


def concrete(v):
    """``v`` as a numpy array when its value is known now (Python numbers, numpy values, concrete
    jax arrays); None for a traced value (inside ``jit``/``vmap``/``grad``), which is not checked."""
    if isinstance(v, jax.core.Tracer):
        return None
    return np.asarray(v)


def is_int_value(v, a: np.ndarray) -> bool:
    """Whether a field's value is integral: a Python int (not bool) or an integer numpy/jax array."""
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, int):
        return True
    return isinstance(v, (np.ndarray, np.generic, jax.Array)) and np.issubdtype(a.dtype, np.integer)


def bad_entries(a: np.ndarray, ok: np.ndarray) -> str:
    """'' for a scalar; for an array, which entries fail (for the error message)."""
    if a.ndim == 0:
        return ""
    idx = np.argwhere(~np.asarray(ok))
    shown = ", ".join(str(tuple(int(j) for j in i) if len(i) > 1 else int(i[0])) for i in idx[:4])
    more = f" and {len(idx) - 4} more" if len(idx) > 4 else ""
    return f" (bad at index {shown}{more})"


def check_ints(cls_name: str, name: str, v, ok, what: str, error, why: str = "") -> None:
    """Raise ``error`` unless every entry of the integer field ``v`` satisfies ``ok`` (a function of
    a numpy array). ``what`` completes "must be ..."; ``why`` follows the value. Traced values pass
    unchecked."""
    if type(v) is int and ok(v):  # the common case, without numpy
        return
    a = concrete(v)
    if a is None:
        return
    good = is_int_value(v, a) and bool(np.all(ok(a)))
    if not good:
        where = bad_entries(a, ok(a)) if is_int_value(v, a) else ""
        raise error(f"{cls_name}.{name} must be {what}, got {v!r}{where}{why}.")


def check_flags(cls_name: str, name: str, v, error) -> None:
    """Raise ``error`` unless the bool field ``v`` is a bool (or, stacked, a bool or 0/1 integer array):
    a string such as ``"no"`` would otherwise count as True. Traced values pass unchecked."""
    a = concrete(v)
    if a is None or isinstance(v, (bool, np.bool_)):
        return
    ok = a.dtype == np.bool_ or (is_int_value(v, a) and bool(np.all((a == 0) | (a == 1))))
    if not ok:
        raise error(f"{cls_name}.{name} must be True or False, got {type(v).__name__} {v!r}.")


__all__ = ["bad_entries", "check_flags", "check_ints", "concrete", "is_int_value", "register", "unchecked"]

"""Arguments every public entry point shares, checked and canonicalised once, at the boundary."""

from __future__ import annotations

import jax.numpy as jnp

from npu_jax.core.policy import Policy
from npu_jax.core.sanitize import Checks
from npu_jax.hw import presets
from npu_jax.hw.config import HardwareConfig


def check_common(hw, policy, checks, trace, fn: str):
    """The arguments every kernel entry point shares, checked and canonicalised once.

    Returns (hw, policy, checks, trace capacity): ``hw`` None -> ``presets.ascend910b()``, ``policy``
    None -> ``Policy()``, ``checks`` -> a :class:`~npu_jax.core.sanitize.Checks` (None = the process
    default), ``trace`` True -> 4096 events, False -> 0, an int >= 0 -> itself.
    """

    hw = presets.ascend910b() if hw is None else hw
    if not isinstance(hw, HardwareConfig):
        raise TypeError(
            f"{fn}: hw must be a HardwareConfig (e.g. npu_jax.presets.get({hw!r}) for a preset "
            f"name), got {type(hw).__name__}."
        )
    policy = Policy() if policy is None else policy
    if not isinstance(policy, Policy):
        raise TypeError(
            f"{fn}: policy must be an npu_jax.Policy or None, got {type(policy).__name__} "
            f"{policy!r}; e.g. Policy(operand='bf16')."
        )
    checks = Checks.parse(checks)
    if isinstance(trace, bool):
        cap = 4096 if trace else 0
    elif isinstance(trace, int) and trace >= 0:
        cap = trace
    else:
        raise ValueError(f"{fn}: trace must be a bool or an event capacity >= 0, got {trace!r}.")
    return hw, policy, checks, cap


def check_flag(name: str, v) -> None:
    if not isinstance(v, (bool, jnp.bool_)):
        raise TypeError(f"conv2d: {name} must be True or False, got {v!r}.")


def check_arrays(x, w):
    for name, arr in (("x", x), ("w", w)):
        if arr is None or isinstance(arr, (str, bytes, dict)):
            raise TypeError(f"conv2d: {name} must be an array, got {type(arr).__name__}.")
    x, w = jnp.asarray(x), jnp.asarray(w)
    for name, arr in (("x", x), ("w", w)):
        if not jnp.issubdtype(arr.dtype, jnp.floating):
            raise TypeError(f"conv2d: {name} must be a float array, got {arr.dtype}; cast it first.")
    return x, w

"""The tile search's arguments, checked before any work (the shared checks of :mod:`npu_jax.errors`).

A count of starts, steps or evaluations past its limit is refused rather than run for hours, a
seed past 63 bits or a string where a count is asked is named, and ``hw`` must be a configuration.
"""

from __future__ import annotations

from npu_jax.errors import (
    InputTypeError,
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_seed,
)
from npu_jax.hw import presets
from npu_jax.hw.config import HardwareConfig

MAX_EVALS_LIMIT = 1 << 24  # exact evaluations one search may spend (far past any layer's 1% budget)
MAX_STARTS = 1 << 12  # points descended at once (a vmap axis: memory grows with it)
MAX_STEPS = 1 << 16


def check_search_args(
    fn: str,
    *,
    hw,
    fused,
    objective,
    objectives,
    starts,
    steps,
    seed,
    round_every,
    finalists,
    verify,
    budget,
    max_evals,
    width,
    learning_rate,
    optimizer,
) -> HardwareConfig:
    """Check every argument of :func:`~npu_jax.search.optimise.tile_search`; returns ``hw``."""
    hw = presets.ascend910b() if hw is None else hw
    if not isinstance(hw, HardwareConfig):
        raise InputTypeError(
            f"{fn}: hw must be a HardwareConfig (e.g. npu_jax.presets.get('910b')), got {type(hw).__name__}."
        )
    check_bool(fn, "fused", fused)
    check_bool(fn, "verify", verify)
    check_choice(fn, "objective", objective, objectives)
    if starts is not None:
        check_int(fn, "starts", starts, 1, MAX_STARTS)
    check_int(fn, "steps", steps, 1, MAX_STEPS)
    check_seed(fn, "seed", seed)
    check_int(fn, "round_every", round_every, 1, MAX_STEPS)
    check_int(fn, "finalists", finalists, 0, 64)
    check_number(fn, "budget", budget, 0.0, 1.0, open_lo=True)
    if max_evals is not None:
        check_int(fn, "max_evals", max_evals, 1, MAX_EVALS_LIMIT, fix="or pass None for the budget's share")
    check_int(fn, "width", width, 1, 1024)
    check_number(fn, "learning_rate", learning_rate, 0.0, open_lo=True)
    if optimizer is not None and not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise InputTypeError(
            f"{fn}: optimizer must be an optax.GradientTransformation or None, got {type(optimizer).__name__}."
        )
    return hw


__all__ = ["MAX_EVALS_LIMIT", "check_search_args"]

"""``@asc.autotune``: a kernel's configurations priced without data, the fastest kept, in Triton's manner.

    @asc.autotune(configs=[{"tile_num": 8, "buffer_num": 2}, {"tile_num": 4, "buffer_num": 1}],
                  key=["block_length"])
    @asc.kernel
    def add_custom(x, y, z, block_length: int, tile_num: int = 8, buffer_num: int = 2): ...

    (_, _, z), report = add_custom[8](x, y, z, 2048, hw=hw)  # first call for this key: every config priced
    add_custom.best_config(2048)                              # the config kept for block_length 2048

Each config gives keyword arguments of the kernel (the arguments the call leaves out). The first call
for a key (the values of the arguments ``key`` names, with the block count, the chip and the policy)
runs every config timing-only (:func:`npu_jax.asc.launch` with ``timing_only=True, board=True``, no
sanitizers: the model's cycles on the timing Board of ``core/board.py``, no data moved, nothing
compiled), keeps the one with the fewest cycles (ties: the first listed), runs it on the call's data
and returns its outputs and report (named ``kernel[config]``); later calls for the key run the kept
config at once. A config the chip refuses (a buffer that overflows, a bad
alignment, any :class:`~npu_jax.asc.runtime.AscError`) is skipped and its error kept
(:meth:`Autotuned.timings`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

import jax
import numpy as np

from npu_jax.asc.launcher import Kernel, launch
from npu_jax.asc.runtime import AscError
from npu_jax.errors import NpuError
from npu_jax.hw import presets


def label(cfg: Mapping) -> str:
    """A config as ``tile_num=8, buffer_num=2`` (report names, tables, errors)."""
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


def _key_value(v):
    """An argument as a key: an array by its shape and dtype, anything else as it is."""
    if hasattr(v, "shape") and hasattr(v, "dtype") and not np.isscalar(v):
        return (tuple(v.shape), str(v.dtype))
    return v


class Autotuned:
    """An ``@asc.kernel`` with configurations: launch it as the kernel (``kern[num_blocks](args...,
    hw=...)``); see the module's docstring."""

    def __init__(self, kern: Kernel, configs: Sequence[Mapping], key: Sequence[str]):
        self.kernel = kern
        self._sig = inspect.signature(kern.fn)
        params = list(self._sig.parameters)
        configs = [dict(c) for c in configs]
        if not configs:
            raise AscError(
                "asc.autotune(configs=...): give at least one config (a dict of kernel arguments)."
            )
        for c in configs:
            unknown = sorted(set(c) - set(params))
            if unknown:
                raise AscError(
                    f"asc.autotune: config {c} names {unknown}, not arguments of {kern.fn.__name__}"
                    f"({', '.join(params)})."
                )
        names = {tuple(sorted(c)) for c in configs}
        if len(names) != 1:
            raise AscError(
                f"asc.autotune: every config sets the same arguments; got {sorted(names)}. Give each the same keys."
            )
        if isinstance(key, str):
            key = [key]
        unknown = sorted(set(key) - set(params))
        if unknown:
            raise AscError(
                f"asc.autotune(key=...): {unknown} are not arguments of {kern.fn.__name__}({', '.join(params)})."
            )
        tuned = set(configs[0])
        if tuned & set(key):
            raise AscError(
                f"asc.autotune: {sorted(tuned & set(key))} are both tuned (configs) and key arguments."
            )
        self.configs, self.key = configs, tuple(key)
        self._picks: dict = {}  # (num_blocks, hw, policy, key values) -> (config, timings)
        self._latest: dict = {}  # key values -> the latest pick's config
        self.__name__ = kern.fn.__name__
        self.__doc__ = kern.fn.__doc__

    def __getitem__(self, num_blocks):
        return lambda *args, **kw: self._launch(num_blocks, args, kw)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"launch a kernel with {self.__name__}[num_blocks](args..., hw=hw).")

    def __repr__(self) -> str:
        return f"asc.autotune({self.__name__}, {len(self.configs)} configs, key={list(self.key)})"

    def _bind(self, args: tuple, cfg: Mapping) -> tuple:
        return bind(self._sig, self.__name__, args, cfg, "asc.autotune")

    def _key_of(self, args: tuple) -> tuple:
        bound = self._sig.bind_partial(*args)
        bound.apply_defaults()
        missing = [k for k in self.key if k not in bound.arguments]
        if missing:
            raise TypeError(f"{self.__name__}: the key arguments {missing} must be passed.")
        return tuple(_key_value(bound.arguments[k]) for k in self.key)

    def _launch(self, num_blocks, args: tuple, kw: dict):
        clash = sorted(set(kw) & set(self._sig.parameters))
        if clash:
            raise AscError(
                f"{self.__name__}: pass the kernel's arguments positionally, as a launch takes them; got "
                f"{clash} by keyword (a tuned one comes from the kept config: leave it out)."
            )
        hw = kw.get("hw") or presets.ascend910b()
        kv = self._key_of(args)
        at = (num_blocks, hw, kw.get("policy"), kv)
        if at not in self._picks:
            self._picks[at] = self._tune(num_blocks, args, hw, kw.get("policy"))
        cfg, _ = self._picks[at]
        self._latest[kv] = cfg
        kw = {"name": f"{self.__name__}[{label(cfg)}]", **kw, "hw": hw}
        return launch(self.kernel, num_blocks, *self._bind(args, cfg), **kw)

    def _tune(self, num_blocks, args: tuple, hw, policy):
        shapes = shapes_of(args)
        timings = [
            (cfg, price(self.kernel, num_blocks, self._bind(shapes, cfg), hw, policy)) for cfg in self.configs
        ]
        priced = [(c, t) for c, t in timings if isinstance(t, int)]
        if not priced:
            lines = "\n".join(f"  {label(c)}: {t}" for c, t in timings)
            raise AscError(f"asc.autotune: {self.__name__} refused every config on {hw.name}:\n{lines}")
        best = min(priced, key=lambda ct: ct[1])[0]  # min keeps the first of equal cycles
        return best, tuple(timings)

    def best_config(self, *key_values) -> dict:
        """The config kept for these key values (the latest call's, if several chips or block counts
        were tuned for them)."""
        kv = tuple(_key_value(v) for v in key_values)
        if kv not in self._latest:
            known = sorted(map(str, self._latest)) or "none yet"
            raise KeyError(
                f"{self.__name__}: no call tuned for key {dict(zip(self.key, key_values))}; tuned: {known}."
            )
        return dict(self._latest[kv])

    def timings(self, *key_values) -> list[tuple[dict, int | str]]:
        """Every config's model cycles (or the error that refused it), for the latest tuning of these key
        values."""
        kv = tuple(_key_value(v) for v in key_values)
        for (_, _, _, k), (_, t) in reversed(list(self._picks.items())):
            if k == kv:
                return [(dict(c), v) for c, v in t]
        raise KeyError(f"{self.__name__}: no call tuned for key {dict(zip(self.key, key_values))}.")


def bind(sig: inspect.Signature, name: str, args: tuple, cfg: Mapping, who: str) -> tuple:
    """A kernel's arguments in order: ``args`` (positional, the call's) with ``cfg``'s keyword
    arguments and the defaults filled in; a tuned argument also passed is refused (``who`` tunes it)."""
    try:
        bound = sig.bind_partial(*args)
    except TypeError:
        raise TypeError(f"{name}: too many arguments ({len(args)}).") from None
    given = sorted(set(bound.arguments) & set(cfg))
    if given:
        raise AscError(
            f"{name}: {given} are tuned by {who}; leave them out of the call (the config gives them)."
        )
    bound.arguments.update(cfg)
    try:
        full = sig.bind(**bound.arguments)
    except TypeError as e:
        raise TypeError(f"{name}: {e}") from None
    full.apply_defaults()
    return tuple(full.arguments[p] for p in sig.parameters)


def shapes_of(args: tuple) -> tuple:
    """Array arguments as their shapes and dtypes (what pricing needs), the others as they are."""
    return tuple(
        jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") and not np.isscalar(a) else a
        for a in args
    )


def price(kern: Kernel, num_blocks: int, args: tuple, hw, policy) -> int | str:
    """A kernel's cycles with these (bound) arguments, timing-only (no data, no sanitizers), or the
    error that refused it (a buffer that overflows, a bad alignment: ``"CapacityError: ..."``)."""
    try:
        _, rep = launch(
            kern, num_blocks, *args, hw=hw, policy=policy, checks="none", timing_only=True, board=True
        )
    except (AscError, NpuError) as e:
        return f"{type(e).__name__}: {e}"
    return int(rep.cycles)


def autotune(configs: Sequence[Mapping], key: Sequence[str] = ()):
    """``@asc.autotune(configs=[{...}, ...], key=[...])`` above ``@asc.kernel``: see
    :mod:`npu_jax.asc.tune`."""

    def deco(kern):
        if not isinstance(kern, Kernel):
            raise AscError("@asc.autotune goes above @asc.kernel: decorate the kernel first.")
        return Autotuned(kern, configs, key)

    return deco


__all__ = ["Autotuned", "autotune"]  # bind, label, price, shapes_of: for npu_jax.search.kernel

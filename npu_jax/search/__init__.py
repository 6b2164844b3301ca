"""Differentiable tile-size search for the img2col Conv2D kernel (plain or fused Conv + bias + ReLU).

``tile_search`` finds a tiling within a budget of cost-model evaluations (1% of the layer's space by
default): gradient descent (optax, one start per discrete choice under ``vmap``) on a relaxed cost
model that equals the exact one at legal integer points, periodic rounding to legal tilings, an
exact coordinate search, and the emulator's verdict on the last few. Baselines (exhaustive, random,
the chooser), sharded sweeps and hardware co-design live beside it. ``kernel_search`` searches a
user's ``asc`` kernel's own tiling parameters (``search/kernel.py``). See ``docs/search.md``.

The default tiling chooser (``search.choose``) sits in this layer too; the package loads
``tile_search`` lazily so that the chooser does not pull in the whole search.
"""

import importlib

__all__ = ["KernelSearch", "SearchResult", "baselines", "codesign", "kernel_search", "tile_search"]
_SUBMODULES = ("baselines", "codesign")  # public modules of the package, loaded on first use


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"npu_jax.search.{name}")
    if name in ("KernelSearch", "kernel_search"):  # the search on a user's kernel (npu_jax.asc)
        return getattr(importlib.import_module("npu_jax.search.kernel"), name)
    if name in __all__:
        return getattr(importlib.import_module("npu_jax.search.optimise"), name)
    raise AttributeError(f"module 'npu_jax.search' has no attribute {name!r}")

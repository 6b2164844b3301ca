"""Differentiable tile-size search for the img2col Conv2D kernel.

``tile_search`` finds a tiling by gradient descent (optax, many starts under ``vmap``) on a relaxed
cost model that equals the exact one at legal integer points, rounds to legal tilings
periodically, and lets the emulator decide among the last few. Baselines (exhaustive, random, the
chooser), sharded sweeps and hardware co-design live beside it. See ``docs/search.md``.
"""

from npu_jax.search.optimise import SearchResult, tile_search

__all__ = ["SearchResult", "tile_search"]

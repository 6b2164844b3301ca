"""Compatibility names (removed once importers move): see search/choose.py."""

from npu_jax.search.choose import candidate_tilings, choose_tiling

__all__ = ["candidate_tilings", "choose_tiling"]

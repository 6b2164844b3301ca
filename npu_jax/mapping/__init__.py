"""Mappings: how a workload is laid onto the core (strategy, tiling, plan, allocation)."""

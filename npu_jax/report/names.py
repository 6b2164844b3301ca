"""Per-pipe figures keyed by the profiler's lane names (CUBE, FIXP, VECTOR, ...), in lane order.

The kernels and the instruction set name the pipes as the programming model does (M, FIX, V, S);
reports speak the profiler's names. :class:`LaneDict` is the dict every report returns per pipe: asked
for a programming-model name, it raises a KeyError that names the lane to ask for instead.

Example:
    >>> busy = by_lane([5, 0, 7, 0, 0, 0, 0])
    >>> busy["CUBE"]
    7
    >>> busy["M"]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    KeyError: "'M' is the programming model's name of lane 'CUBE'; ... use 'CUBE'."
"""

from __future__ import annotations

from npu_jax.core.pipes import LANE_ORDER, LANES, PIPES


class LaneDict(dict):
    """A dict keyed by lane name whose KeyError for a programming-model pipe name names its lane."""

    def __missing__(self, key):
        lane = LANES.get(key) if isinstance(key, str) else None
        if lane is not None and lane != key:
            raise KeyError(
                f"{key!r} is the programming model's name of lane {lane!r}; reports are keyed by the "
                f"profiler's lane names ({', '.join(LANE_ORDER)}): use {lane!r}."
            )
        raise KeyError(key)


def by_lane(values) -> LaneDict:
    """A LaneDict of ``values`` given per pipe in ``PIPES`` order."""
    return LaneDict((LANES[p], v) for p, v in zip(PIPES, values, strict=True))


__all__ = ["LaneDict", "by_lane"]

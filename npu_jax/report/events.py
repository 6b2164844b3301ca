"""A core's trace buffer (``npu_jax.core.trace``) read back as Python events, in the profiler's names.

* :func:`instr_events`: one dict per instruction -- lane, op, start and end cycle, bytes moved and on
  which path, the tile coordinates the kernel named with ``core.at_tile``;
* :func:`sync_events`: one dict per SetFlag / WaitFlag -- the flag (``"MTE2_MTE1"``, as the kernel
  wrote it), its lanes, event id, cycle (SetFlag: when it fired; WaitFlag: when it released its
  lane), and its place in program order;
* :func:`pair_flows`: each SetFlag with the WaitFlag that consumed it. A flag is a binary semaphore
  per (src, dst, id): a WaitFlag consumes the latest SetFlag of its flag not yet consumed (a second
  SetFlag before the wait overwrites the first, as on the hardware); a WaitFlag with nothing set
  pairs with nothing (synccheck reports it).

Times are cycles from the start of the run plus ``offset`` (a part's start in a sequence).
"""

from __future__ import annotations

import numpy as np

from npu_jax.core import wide
from npu_jax.core.isa import OPS
from npu_jax.core.pipes import LANES, PATHS, PIPES
from npu_jax.core.trace import F_AT, F_DST, F_ID, F_KIND, F_SRC, N_TILE, SET, tile_names

_LANE = [LANES[p] for p in PIPES]


def _core_trace(trace: dict, core: int) -> dict:
    if not trace:
        raise ValueError("this run kept no trace; pass trace=True (or trace_capacity=N).")
    return {k: np.asarray(v)[core] for k, v in trace.items()}


def instr_events(trace: dict, core: int = 0, offset: int = 0) -> list[dict]:
    """Instructions of one core, in issue order."""
    t = _core_trace(trace, core)
    n = min(int(t["n"]), t["pipe"].shape[0])
    start, end = wide.to_numpy(t["start"][:n]), wide.to_numpy(t["end"][:n])
    out = []
    for i in range(n):
        path, nbytes = (int(v) for v in t["moved"][i])
        tile = t["tile"][i]
        names = tile_names(int(tile[N_TILE]))
        out.append(
            {
                "lane": _LANE[int(t["pipe"][i])],
                "op": OPS[int(t["op"][i])],
                "start": int(start[i]) + offset,
                "end": int(end[i]) + offset,
                "seq": i,
                "path": PATHS[path] if path >= 0 else None,
                "bytes": nbytes if path >= 0 else 0,
                "tile": {name: int(v) for name, v in zip(names, tile)},
            }
        )
    return out


def sync_events(trace: dict, core: int = 0, offset: int = 0) -> list[dict]:
    """SetFlag / WaitFlag operations of one core, in program order. ``after`` is the number of
    instructions issued before the operation (its place among :func:`instr_events`' ``seq``)."""
    t = _core_trace(trace, core)
    n = min(int(t["nf"]), t["flag"].shape[0])
    cycle = wide.to_numpy(t["flag_cycle"][:n])
    out = []
    for i in range(n):
        row = [int(v) for v in t["flag"][i]]
        src, dst = PIPES[row[F_SRC]], PIPES[row[F_DST]]
        out.append(
            {
                "kind": "SetFlag" if row[F_KIND] == SET else "WaitFlag",
                "flag": f"{src}_{dst}",
                "src": LANES[src],
                "dst": LANES[dst],
                "id": row[F_ID],
                "cycle": int(cycle[i]) + offset,
                "after": row[F_AT],
                "order": i,
            }
        )
    return out


def pair_flows(sync: list[dict]) -> list[dict]:
    """(SetFlag, WaitFlag) pairs of one core's :func:`sync_events`, as dicts ``set`` and ``wait``."""
    pending: dict[tuple[str, int], dict] = {}
    flows = []
    for ev in sync:
        key = (ev["flag"], ev["id"])
        if ev["kind"] == "SetFlag":
            pending[key] = ev
        elif key in pending:
            flows.append({"set": pending.pop(key), "wait": ev})
    return flows


def dropped(trace: dict) -> int:
    """Instructions and flag operations counted but not kept, over all cores."""
    if not trace:
        return 0
    n, nf = np.asarray(trace["n"]), np.asarray(trace["nf"])
    cap = np.shape(trace["pipe"])[1]
    return int(np.maximum(n - cap, 0).sum() + np.maximum(nf - cap, 0).sum())


__all__ = ["dropped", "instr_events", "pair_flows", "sync_events"]

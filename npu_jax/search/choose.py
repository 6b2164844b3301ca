"""The tiling chooser: enumerate legal tilings of a strategy, rank them by the cost model."""

from __future__ import annotations

import dataclasses
import functools
import itertools

from npu_jax.core import diskcache
from npu_jax.cost.conv import predict_many
from npu_jax.errors import NpuError
from npu_jax.hw.config import FRACTAL_ROWS, HardwareConfig
from npu_jax.hw.costs import round_up
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.conv import SPECS, ConvTiling, make_plan
from npu_jax.workload.conv import ConvGeometry


def _cands(limit: int, base=(1, 2, 4, 7, 8, 14, 16, 28, 32, 56, 64)) -> list[int]:
    vals = sorted({v for v in base if v <= limit} | {limit})
    return vals


_CANDIDATES: dict = {}  # (layer without its batch, strategy, hw.legality_key(), ...) -> tilings
_CANDIDATES_KEPT = 512


def candidate_tilings(
    g: ConvGeometry, strategy: str, hw: HardwareConfig, operand: str = "fp16", output: str = "fp16", epi=None
) -> list[ConvTiling]:
    """Every legal tiling in a coarse grid (legal = validates against every buffer). A grouped layer's
    grid is its dense view's (``ConvGeometry.dense_view``: one super-group's channels).

    Legality reads neither the batch nor the machine's rates, L2 or launch cost, so the list is
    enumerated once per layer shape and :meth:`HardwareConfig.legality_key` and kept (512 lists): a
    sweep over batches or L2 sizes validates each layer's grid once."""
    key = (dataclasses.replace(g, n=1), strategy, hw.legality_key(), operand, output, epi)
    kept = _CANDIDATES.get(key)
    if kept is None:
        if len(_CANDIDATES) >= _CANDIDATES_KEPT:
            del _CANDIDATES[next(iter(_CANDIDATES))]
        kept = _CANDIDATES[key] = tuple(_enumerate(g, strategy, hw, operand, output, epi))
    return list(kept)


def _enumerate(g: ConvGeometry, strategy: str, hw: HardwareConfig, operand: str, output: str, epi):
    sp = SPECS[strategy]
    c0 = hw.c0(itemsize(operand))
    f = FRACTAL_ROWS
    full, g = g, g.dense_view(c0, f)
    c1 = -(-g.c // c0)
    ns = sorted({min(round_up(g.k, f), f << s) for s in range(5)})  # 1, 2, 4, 8, 16 fractals
    k_l0s = [c0] if not sp.deep_k else sorted({c0 * v for v in (2, 4, 8, 16)})
    cin1s = sorted({min(c1, v) for v in (1, 2, 4, 8, c1)})
    one_group = full.supergroups(c0, f) == 1  # resident weights hold one super-group's
    resident = (False, True) if sp.resident_weights_allowed and one_group else (False,)
    splits = sorted({s for s in (1, 2, 4, 5, 10, 20, hw.num_cores) if s <= hw.num_cores})
    out = []
    for ho, wo, n, k_l0, cin1, res, cs in itertools.product(
        _cands(g.ho), _cands(g.wo), ns, k_l0s, cin1s, resident, splits
    ):
        if cs > -(-g.k // n) or (cs > 1 and hw.num_cores % cs):
            continue
        if res and cin1 < c1:
            continue
        if ho * wo > 4096 or ho * wo < min(16, g.ho * g.wo):
            continue  # a tile below one fractal of positions wastes the Cube
        for stages in (2, 1):  # ping-pong where it fits, else serial
            t = ConvTiling(
                ho=ho,
                wo=wo,
                n=n,
                cin1=cin1,
                k_l0=k_l0,
                weights_resident=res,
                l1_stages=stages,
                l0_stages=stages,
                cout_split=cs,
            )
            try:
                make_plan(full, strategy, t, hw, operand, output, epi=epi)
            except NpuError:
                continue
            out.append(t)
            break
    return out


@functools.lru_cache(maxsize=256)
def choose_tiling(
    g: ConvGeometry, strategy: str, hw: HardwareConfig, operand: str = "fp16", output: str = "fp16", epi=None
) -> ConvTiling:
    """The legal tiling with the fewest model cycles (ties: fewer GM bytes).

    ``epi`` (a fused epilogue) adds its buffers to the capacity checks and its instructions to the
    cost, so a fused kernel's pick can differ from the conv alone's.

    Candidates: a grid of tile sizes, Cout blocks, channel parts, Mmad depths and (where the
    strategy allows) resident weights, each double-buffered where it fits (else serial); every one
    validated against every buffer. A branch and bound over two lower bounds of each tiling's
    cycles costs exactly (closed-form schedule) every tiling that could be the cheapest, so the pick
    is the grid's cheapest (:func:`npu_jax.cost.conv.predict_many`).

    Picks are kept in memory (256) and, once :func:`npu_jax.enable_persistent_cache` is on, on disk
    across processes (:mod:`npu_jax.core.diskcache`, keyed on every argument and the package's source)."""
    key = (g, strategy, hw, operand, output, epi)
    kept = diskcache.load("choose_tiling", key)
    if kept is not None:
        try:
            return ConvTiling(**kept)
        except (TypeError, NpuError):
            pass  # not a tiling: chosen again and written over
    cands = candidate_tilings(g, strategy, hw, operand, output, epi)
    if not cands:
        extra = f" with epilogue {epi}" if epi is not None else ""
        raise NpuError(
            f"no legal tiling of {g.describe()} for strategy {strategy!r} on {hw.name}{extra}: "
            f"even the smallest tiles overflow a buffer."
        )
    cyc, gm = predict_many(g, strategy, cands, hw, operand, output, epi=epi)
    best = cands[min(range(len(cands)), key=lambda i: (cyc[i], gm[i]))]
    diskcache.store("choose_tiling", key, dataclasses.asdict(best))
    return best

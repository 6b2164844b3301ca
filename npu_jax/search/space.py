"""The search space of the img2col kernel's tiling, and rounding into it.

One point of the space is a :class:`~npu_jax.mapping.conv.ConvTiling` of the img2col strategy:

====================  ===============================================  ==========================
dimension             values                                           vendor name
====================  ===============================================  ==========================
``ho``, ``wo``        balanced sizes of Ho, Wo (below)                 hoL1, woL1 (L1 tile)
``n``                 16 x balanced sizes of ceil(K / 16)              nL0 (Cout block)
``cin1``              balanced sizes of C1 = ceil(C / 16)              kBL1 / (kh kw C0)
``k_l0``              16 x balanced sizes of cin1 kh kw                kL0 (L0 / Mmad depth)
``resident``          0, or 1 when cin1 = C1 (the whole reduction)      loop order: weights stay
``stages``            1 or 2 (L1 and L0 ping-pong together)             pBufferFlag
``cout_split``        divisors of the core count, at most ceil(K / n)   the split over cores
====================  ===============================================  ==========================

*Balanced sizes* of an extent X are ``ceil(X / t)`` for t = 1..X: for each trip count t, the
smallest tile that achieves it (a larger tile with the same trip count only moves work from the
last tile to the others, and needs more buffer). There are about 2 sqrt(X) of them. Tiles of fewer
than 16 output positions (one fractal of M) are left out when the layer has 16 or more, as the
chooser does. Every point is then checked against every buffer (:func:`exact.legal`, which
agrees with ``make_plan``; tested).

The continuous parameters of the relaxed search are the logs of the five sizes and of the
split (pinned to the start's choice); :func:`snap` rounds a continuous point to nearby points of the space (the nearest, each size
one balanced step either way, and a one-step-smaller repair for points that overflow a buffer), all in JAX, so the rounding runs inside ``vmap`` and sharded sweeps.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from npu_jax.errors import check_size
from npu_jax.hw.config import FRACTAL_ROWS, HardwareConfig
from npu_jax.hw.costs import HwNumbers, cdiv
from npu_jax.mapping.conv import ConvTiling
from npu_jax.search import exact
from npu_jax.workload.conv import ConvGeometry

DIMS = ("ho", "wo", "n", "cin1", "k_l0")  # the continuous (log-space) dimensions


def balanced(x: int) -> np.ndarray:
    """Sorted distinct ``ceil(x / t)`` for t = 1..x.

    Example:
        >>> balanced(7).tolist()
        [1, 2, 3, 4, 7]
    """
    t = np.arange(1, x + 1)
    return np.unique(-(-x // t))


@dataclasses.dataclass(frozen=True)
class Space:
    """The legal img2col tilings of one layer on one hardware config.

    Attributes:
        g: the layer; hw: the hardware; fused: the Conv + bias + ReLU kernel's space (its
        epilogue needs buffers too); tilings: every legal point (a stacked :class:`ConvTiling`, numpy
        int32 arrays of length ``size``).
    """

    g: ConvGeometry
    hw: HardwareConfig
    tilings: ConvTiling
    fused: bool = False

    @property
    def size(self) -> int:
        return int(self.tilings.ho.shape[0])

    def axis_values(self, dim: str, cin1: int | None = None) -> np.ndarray:
        """The values a dimension takes (``k_l0``'s depend on ``cin1``)."""
        g = self.g.dense_view(exact.C0, FRACTAL_ROWS)  # a grouped layer: one super-group's sizes
        c1 = cdiv(g.c, exact.C0)
        if dim == "ho":
            return balanced(g.ho)
        if dim == "wo":
            return balanced(g.wo)
        if dim == "n":
            return FRACTAL_ROWS * balanced(cdiv(g.k, FRACTAL_ROWS))
        if dim == "cin1":
            return balanced(c1)
        if dim == "k_l0":
            return exact.C0 * balanced(min(cin1 if cin1 is not None else c1, c1) * g.kh * g.kw)
        raise ValueError(f"dim must be one of {DIMS}, got {dim!r}.")

    def discrete_configs(self) -> list[tuple[int, int, int]]:
        """The (resident, stages, cout_split) combinations that occur in the space."""
        t = self.tilings
        return sorted(set(zip(t.weights_resident.tolist(), t.l1_stages.tolist(), t.cout_split.tolist())))

    def contains(self, rows: np.ndarray) -> np.ndarray:
        """Which (k, 8) integer rows are points of the space."""
        keys = _keys(np.asarray(rows))
        i = np.searchsorted(self._sorted_keys, keys)
        return self._sorted_keys[np.minimum(i, self.size - 1)] == keys

    @functools.cached_property
    def _sorted_keys(self) -> np.ndarray:
        return np.sort(_keys(exact.rows_of(self.tilings)))


_BITS = (12, 12, 12, 10, 14, 1, 2, 6)  # per column; every column of a legal row fits
_SHIFTS = np.cumsum((0,) + _BITS[::-1])[:-1][::-1].astype(np.int64)


def _keys(rows: np.ndarray) -> np.ndarray:
    """One int64 per row (mixed radix over the 8 columns); -1 for rows that cannot be points."""
    r = np.asarray(rows, np.int64).reshape(-1, 8)
    k = (r << _SHIFTS).sum(1)
    fits = ((r >= 0) & (r < (1 << np.asarray(_BITS, np.int64)))).all(1)
    return np.where(fits, k, -1)


def splits(hw: HardwareConfig) -> list[int]:
    """Core-group counts along Cout: the divisors of the core count."""
    return splits_of(hw.num_cores)


@functools.lru_cache(maxsize=64)
def build(g: ConvGeometry, hw: HardwareConfig, fused: bool = False) -> Space:
    """Enumerate the space of ``g`` on ``hw`` and keep its legal points (numpy: no compile).

    Example:
        >>> import npu_jax
        >>> from npu_jax.workload.conv import canonicalize
        >>> g = canonicalize((1, 512, 7, 7), (512, 512, 3, 3), 1, 1)
        >>> build(g, npu_jax.presets.ascend910b()).size > 1000
        True
    """
    layer, g = g, g.dense_view(exact.C0, FRACTAL_ROWS)  # a grouped layer: one super-group's sizes
    c1 = cdiv(g.c, exact.C0)
    hos, wos = balanced(g.ho), balanced(g.wo)
    hw_pairs = [(a, b) for a, b in itertools.product(hos, wos) if a * b >= min(FRACTAL_ROWS, g.ho * g.wo)]
    ns = FRACTAL_ROWS * balanced(cdiv(g.k, FRACTAL_ROWS))
    rows = []
    for cin1 in balanced(c1):
        for k_l0 in exact.C0 * balanced(int(cin1) * g.kh * g.kw):
            for res in (0, 1) if cin1 == c1 else (0,):
                for n in ns:
                    ncb = -(-g.k // int(n))
                    for cs in splits(hw):
                        if cs > ncb:
                            continue
                        for st in (1, 2):
                            rows.append((n, cin1, k_l0, res, st, cs))
    rest = np.asarray(rows, np.int64)
    sp = np.asarray(hw_pairs, np.int64)
    # every candidate row (8 int64 columns) and the legality pass's temporaries, before allocating
    n = len(sp) * len(rest)
    check_size("tile_search", {f"the space of {n:,} candidate tilings of {g.ho}x{g.wo}x{g.k}": n * 8 * 8 * 4})
    full = np.concatenate([np.repeat(sp, len(rest), 0), np.tile(rest, (len(sp), 1))], axis=1)
    t = exact.from_rows(full)
    ok = legal_mask(layer, hw, t, fused)
    return Space(
        layer, hw, exact.tilings(*(np.ascontiguousarray(a[ok], np.int32) for a in exact.columns(t))), fused
    )


def legal_mask(g: ConvGeometry, hw: HardwareConfig, t: ConvTiling, fused: bool = False) -> np.ndarray:
    """Which rows of ``t`` are legal img2col tilings of ``g`` on ``hw`` (numpy)."""
    L = exact.Layer(*(np.int64(v) for v in exact.layer_of(g)))
    exact.check_hw(hw)
    t = jax.tree.map(lambda a: np.asarray(a, np.int64), t)
    ok = exact.legal(L, t, HwNumbers.of(hw), hw.num_cores, hw.coupled, fused, np, exact.alignments(hw))
    return np.asarray(ok)


def in_space(L: exact.Layer, t: ConvTiling):
    """The space's own restriction beyond legality: tiles of at least one fractal of positions
    (16) when the layer has that many."""
    return t.ho * t.wo >= jnp.minimum(FRACTAL_ROWS, L.ho * L.wo)


def _bal(v, X):
    """Nearest balanced size of extent X to the real v: (size, trip count)."""
    t = jnp.clip(jnp.round(X / jnp.maximum(v, 1e-3)), 1, X).astype(jnp.int32)
    return cdiv(X, t), t


def _bal_at(X, t):
    t = jnp.clip(t, 1, X)
    return cdiv(X, t)


def snap(x, disc, L: exact.Layer, num_cores: int) -> ConvTiling:
    """Space points near one continuous point, as a (NEAR,) batch of tilings.

    ``x`` holds the logs of (ho, wo, n, cin1, k_l0, cout_split); ``disc`` is (resident, stages,
    cout_split), the start's discrete choices. Rows: every size rounded to its nearest balanced
    value; then, per size, that point with the size one balanced step larger and one smaller (10);
    ho and wo moved together, both ways (4); and the point with ho, wo, n and k_l0 all one step
    smaller (a repair for points that overflow a buffer). ``cout_split`` is the start's, and the
    Cout block is capped so that there are at least that many blocks. Rows may repeat or be
    illegal: check them with :func:`exact.legal` and :func:`in_space`.
    """
    v = jnp.exp(x)
    res = disc[0] > 0
    c1 = cdiv(L.c, exact.C0)
    taps = L.kh * L.kw
    divs = jnp.asarray(splits_of(num_cores), jnp.float32)
    want = disc[2].astype(jnp.float32)
    X = dict(ho=L.ho, wo=L.wo, n=cdiv(L.k, FRACTAL_ROWS), cin1=c1)
    vals = dict(ho=v[0], wo=v[1], n=v[2] / FRACTAL_ROWS, cin1=v[3])
    base, trip = {}, {}
    for d in ("ho", "wo", "n", "cin1"):
        base[d], trip[d] = _bal(vals[d], X[d])
    base["cin1"] = jnp.where(res, c1, base["cin1"])
    trip["cin1"] = jnp.where(res, 1, trip["cin1"])

    def k_of(cin1, kv):
        Xk = jnp.minimum(cin1, c1) * taps
        k, tk = _bal(kv, Xk)
        return k, tk, Xk

    kb, tk, Xk = k_of(base["cin1"], v[4] / exact.C0)

    # the largest balanced Cout block (in 16s) that still makes the start's cout_split blocks
    n_most = _bal_at(X["n"], cdiv(X["n"], jnp.maximum(X["n"] // disc[2], 1)))

    def row(ho, wo, n, cin1, k):
        n = jnp.minimum(n, n_most)
        # a divisor of the core count within both the start's split and the Cout blocks
        ncb = cdiv(L.k, n * FRACTAL_ROWS)
        c = jnp.max(jnp.where(divs <= jnp.minimum(want, ncb), divs, 1.0)).astype(jnp.int32)
        return jnp.stack([ho, wo, n * FRACTAL_ROWS, cin1, k * exact.C0, disc[0], disc[1], c]).astype(
            jnp.int32
        )

    b = [base["ho"], base["wo"], base["n"], base["cin1"], kb]
    rows = [row(*b)]
    for step in (-1, 1):  # trip count +1 = one balanced step smaller
        for i, d in enumerate(("ho", "wo", "n")):
            r = list(b)
            r[i] = _bal_at(X[d], trip[d] - step)
            rows.append(row(*r))
        cin1 = jnp.where(res, c1, _bal_at(c1, trip["cin1"] - step))
        k2, _, _ = k_of(cin1, v[4] / exact.C0)
        rows.append(row(b[0], b[1], b[2], cin1, k2))
        rows.append(row(*b[:4], _bal_at(Xk, tk - step)))
    for dh, dw in ((-1, -1), (-1, 1), (1, -1), (1, 1)):  # the tile's shape and area together
        rows.append(row(_bal_at(X["ho"], trip["ho"] - dh), _bal_at(X["wo"], trip["wo"] - dw), *b[2:]))
    rows.append(
        row(
            _bal_at(X["ho"], trip["ho"] + 1),
            _bal_at(X["wo"], trip["wo"] + 1),
            _bal_at(X["n"], trip["n"] + 1),
            b[3],
            _bal_at(Xk, tk + 1),
        )
    )
    a = jnp.stack(rows)
    return exact.from_rows(a)


NEAR = 16  # rows of snap()


def splits_of(num_cores: int) -> list[int]:
    return [s for s in range(1, num_cores + 1) if num_cores % s == 0]

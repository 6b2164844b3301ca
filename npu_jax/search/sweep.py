"""Sweeps: many layers x hardware variants x starts in one program, sharded over JAX devices.

Every (layer, hardware, start) triple is one row of a flat batch; :func:`search_rows` runs the
descent-and-rounding part of the search for a batch on device -- descent (optax), rounding
(:func:`space.snap`), exact costing of the rounded points, moving each start to its best,
``rounds`` times -- with no host round trip (the exact coordinate search of
:func:`optimise.search_model` is host-side and not part of it), so the batch axis can be sharded with ``jax.sharding``: XLA's SPMD partitioner splits
the rows over the devices (``NamedSharding`` over a one-axis mesh). Rows are independent, so the
answer is the same on 1 and on N devices, bit for bit (tested with 4 host devices).

Rows that share ``num_cores`` and ``coupled`` (static to the program) share one compile; layers
and every other hardware figure are data.

Example:
    >>> import npu_jax
    >>> from npu_jax.workload.resnet50 import RESNET50_REFERENCE
    >>> hws = [npu_jax.presets.ascend910b().replace(l1_bytes=s * 1024) for s in (256, 512)]
    >>> res = sweep([l.geometry() for l in RESNET50_REFERENCE], hws, starts=8)  # doctest: +SKIP
    >>> res.cycles.shape
    (5, 2)
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from npu_jax.hw.config import HardwareConfig
from npu_jax.search import exact, optimise, relaxed, space
from npu_jax.workload.conv import ConvGeometry

BIG = np.int32(2**31 - 1)


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """Best tiling per (layer, hardware): ``cycles`` (layers, hws) int, ``tilings`` (layers, hws, 8)
    int rows (``exact.ROW`` order), ``start_cycles`` (layers, hws, starts) each start's best."""

    cycles: np.ndarray
    tilings: np.ndarray
    start_cycles: np.ndarray
    devices: int

    def tiling(self, i: int, j: int = 0):
        return exact.tiling_at(exact.from_rows(self.tilings[i, j, None]))


def _stack(trees):
    return jax.tree.map(lambda *a: jnp.stack(a), *trees)


@functools.cache
def _program(num_cores: int, coupled: bool, steps: int, rounds: int, learning_rate: float):
    """The on-device search of one batch of rows: (x, disc, L, hw) -> best (cycles, rows)."""
    opt = optax.adam(learning_rate)

    def obj(x, disc, L, hw):
        return relaxed.objective(x, disc, L, hw, num_cores, coupled)

    def near(x, disc, L, hw):
        t = space.snap(x, disc, L, num_cores)
        ok = jax.vmap(lambda tt: exact.legal(L, tt, hw, num_cores, coupled) & space.in_space(L, tt))(t)
        cyc = jax.vmap(lambda tt: exact.cycles(L, tt, hw, num_cores, coupled))(t)
        cyc = jnp.where(ok, cyc, BIG)
        i = jnp.argmin(cyc)
        return cyc[i], jax.tree.map(lambda a: a[i], t)

    def one(x, disc, L, hw):
        state = opt.init(x)
        best_c, best_t = BIG, exact.tilings(*([jnp.int32(0)] * 8))
        for _ in range(rounds):

            def body(carry, _):
                x, state = carry
                g = jax.grad(obj)(x, disc, L, hw)
                g = jnp.where(jnp.isfinite(g), g, 0.0)
                upd, state = opt.update(g, state, x)
                return (relaxed.project(optax.apply_updates(x, upd), disc, L, num_cores), state), None

            (x, state), _ = jax.lax.scan(body, (x, state), None, length=steps // rounds)
            c, t = near(x, disc, L, hw)
            better = c < best_c
            best_c = jnp.where(better, c, best_c)
            best_t = jax.tree.map(lambda a, b, keep=better: jnp.where(keep, a, b), t, best_t)
            found = c < BIG
            xt = jnp.log(jnp.stack([t.ho, t.wo, t.n, t.cin1, t.k_l0, t.cout_split]).astype(jnp.float32))
            x = jnp.where(found, xt, x)
            state = opt.init(x)
        return best_c, jnp.stack(exact.columns(best_t))

    return jax.vmap(one)


def search_rows(
    x,
    disc,
    L,
    H,
    *,
    num_cores: int,
    coupled: bool,
    steps: int = 24,
    rounds: int = 3,
    learning_rate: float = 0.1,
    devices=None,
):
    """Run the on-device search on a flat batch of rows, sharded over ``devices`` (default: all).

    Args:
        x: (B, 6) starting log sizes; disc: (B, 3) (resident, stages, cout_split); L: :class:`exact.Layer` of (B,) arrays; H:
            :class:`exact.Hw` of (B,) arrays. B is padded to a multiple of the device count.
    Returns:
        (cycles (B,), tiling rows (B, 8)) as numpy arrays.
    """
    devices = list(jax.devices()) if devices is None else list(devices)
    nd = len(devices)
    b = x.shape[0]
    pad = (-b) % nd
    fn = _program(num_cores, coupled, steps, rounds, learning_rate)
    args = jax.tree.map(
        lambda a: jnp.concatenate([a, jnp.repeat(a[:1], pad, 0)]) if pad else a, (x, disc, L, H)
    )
    mesh = Mesh(np.asarray(devices), ("rows",))
    shard = NamedSharding(mesh, PartitionSpec("rows"))
    args = jax.device_put(args, shard)
    c, t = jax.jit(fn, out_shardings=(shard, shard))(*args)
    return np.asarray(c)[:b], np.asarray(t)[:b]


def sweep(
    layers: list[ConvGeometry],
    hws: list[HardwareConfig],
    *,
    starts: int = 8,
    steps: int = 24,
    rounds: int = 3,
    seed: int = 0,
    learning_rate: float = 0.1,
    devices=None,
    chunk_layers: int = 8,
    progress: bool = False,
) -> SweepResult:
    """Search every layer on every hardware variant, ``starts`` starts each, sharded over devices.

    The hardware variants must share ``num_cores`` and ``coupled``. ``progress=True`` shows a tqdm
    bar over chunks of ``chunk_layers`` layers (all hardware variants and starts of a chunk run as
    one sharded batch).
    """
    if not layers or not hws:
        raise ValueError("sweep needs at least one layer and one hardware config.")
    nc, cp = hws[0].num_cores, hws[0].coupled
    if any(h.num_cores != nc or h.coupled != cp for h in hws):
        raise ValueError(
            "sweep: every hardware config must have the same num_cores and coupled "
            f"(got {[(h.name, h.num_cores, h.coupled) for h in hws]}); sweep them separately."
        )
    nl, nh = len(layers), len(hws)
    cyc = np.empty((nl, nh, starts), np.int64)
    rows = np.empty((nl, nh, starts, 8), np.int32)
    Hs = [exact.hw_of(h) for h in hws]
    chunks = range(0, nl, chunk_layers)
    if progress:
        try:
            from tqdm.auto import tqdm

            chunks = tqdm(chunks, desc="sweep", unit=f"x{chunk_layers} layers")
        except ImportError:  # tqdm is a dev extra; the sweep runs without a bar
            pass
    for c0 in chunks:
        block = layers[c0 : c0 + chunk_layers]
        xs, ds, Ls, Hb = [], [], [], []
        for li, g in enumerate(block):
            L = exact.layer_of(g)
            for hj, H in enumerate(Hs):
                key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), c0 + li), hj)
                x, d = optimise.init_points(key, L, starts, nc)
                xs.append(x)
                ds.append(d)
                Ls += [L] * starts
                Hb += [H] * starts
        x = jnp.concatenate(xs)
        d = jnp.concatenate(ds)
        c, t = search_rows(
            x,
            d,
            _stack(Ls),
            _stack(Hb),
            num_cores=nc,
            coupled=cp,
            steps=steps,
            rounds=rounds,
            learning_rate=learning_rate,
            devices=devices,
        )
        cyc[c0 : c0 + len(block)] = c.reshape(len(block), nh, starts)
        rows[c0 : c0 + len(block)] = t.reshape(len(block), nh, starts, 8)
    best = np.argmin(cyc, axis=2)
    take = np.take_along_axis
    return SweepResult(
        cycles=take(cyc, best[..., None], 2)[..., 0],
        tilings=take(rows, best[..., None, None], 2)[:, :, 0],
        start_cycles=cyc,
        devices=len(jax.devices()) if devices is None else len(list(devices)),
    )

"""The tile search on a user's asc kernel (``npu_jax.search.kernel_search``): the exact search is the
fewest cycles of every config priced on its own, refusals are kept, the pick is verified by a full
run, and a relaxed cost prices only the configs around where its descent ends."""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import npu_jax
from npu_jax.asc.runtime import AscError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
from add_custom import add_custom  # noqa: E402

HW = npu_jax.presets.ascend910b()
BLOCK = 2048
SPACE = {"tile_num": [1, 2, 4, 8, 16], "buffer_num": [1, 2]}


def _fits(c):
    return BLOCK % (c["tile_num"] * c["buffer_num"]) == 0


def test_the_exact_search_is_the_fewest_cycles_of_each_config_on_its_own(rng):
    x, y = (rng.uniform(-4, 4, 8 * BLOCK).astype(np.float16) for _ in range(2))
    z = np.zeros_like(x)
    r = npu_jax.search.kernel_search(add_custom, 8, x, y, z, BLOCK, space=SPACE, constraint=_fits, hw=HW)
    assert r.grid == 10 and len(r.priced) == 10 and r.relaxed_at is None
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (x, y, z)]
    own = {}
    for c, t in r.priced:
        _, rep = add_custom[8](
            *shapes, BLOCK, c["tile_num"], c["buffer_num"], hw=HW, checks="none", timing_only=True
        )
        own[tuple(c.values())] = int(rep.cycles)
        assert t == own[tuple(c.values())], c
    assert r.cycles == min(own.values()) and own[tuple(r.best.values())] == r.cycles
    np.testing.assert_array_equal(r.outputs[2], x + y)  # the verifying run, on the data
    assert int(r.report.cycles) == r.cycles
    assert r.table().splitlines()[0].endswith(f"{r.cycles:,} cycles")


def test_a_config_the_chip_refuses_is_kept_with_its_reason():
    shapes = [jax.ShapeDtypeStruct((8 * 65536,), np.float16) for _ in range(3)]
    r = npu_jax.search.kernel_search(
        add_custom, 8, *shapes, 65536, space={"tile_num": [1, 8], "buffer_num": [2]}, hw=HW
    )
    refused = [t for _, t in r.priced if not isinstance(t, int)]
    assert len(refused) == 1 and "CapacityError" in refused[0]  # 3 x 2 x 64 KiB of UB at one tile
    assert r.best == {"tile_num": 8, "buffer_num": 2} and r.report is None  # no data: nothing to verify


def test_a_relaxed_cost_prices_only_the_configs_around_its_minimum():
    shapes = [jax.ShapeDtypeStruct((8 * BLOCK,), np.float16) for _ in range(3)]

    def relaxed(p):  # a user's model: a fixed cost a tile, and each tile's bytes (a copy's start-up hides)
        tiles = p["tile_num"] * p["buffer_num"]
        return 300.0 * tiles + 3 * BLOCK * 2 / 64 / jnp.sqrt(p["buffer_num"])

    r = npu_jax.search.kernel_search(
        add_custom, 8, *shapes, BLOCK, space=SPACE, constraint=_fits, relaxed=relaxed, around=2, hw=HW
    )
    assert r.relaxed_at["tile_num"] < 2 and len(r.priced) < r.grid
    assert {tuple(c.values()) for c, _ in r.priced} <= {(1, 1), (1, 2), (2, 1), (2, 2)}
    exact = npu_jax.search.kernel_search(add_custom, 8, *shapes, BLOCK, space=SPACE, constraint=_fits, hw=HW)
    assert r.best == exact.best and r.cycles == exact.cycles  # this model leads to the exact pick


def test_bad_spaces_are_refused_by_name():
    shapes = [jax.ShapeDtypeStruct((8 * BLOCK,), np.float16) for _ in range(3)]
    with pytest.raises(AscError, match="not parameters of add_custom"):
        npu_jax.search.kernel_search(add_custom, 8, *shapes, BLOCK, space={"tiles": [1]}, hw=HW)
    with pytest.raises(AscError, match="non-empty list"):
        npu_jax.search.kernel_search(add_custom, 8, *shapes, BLOCK, space={"tile_num": []}, hw=HW)
    with pytest.raises(AscError, match="leaves no config"):
        npu_jax.search.kernel_search(
            add_custom, 8, *shapes, BLOCK, space={"tile_num": [3]}, constraint=lambda c: False, hw=HW
        )
    with pytest.raises(AscError, match="@asc.kernel"):
        npu_jax.search.kernel_search(add_custom.fn, 8, *shapes, BLOCK, space={"tile_num": [1]}, hw=HW)
    with pytest.raises(AscError, match="relaxed cost takes numbers"):
        npu_jax.search.kernel_search(
            add_custom,
            8,
            *shapes,
            BLOCK,
            space={"tile_num": [1, "two"]},
            relaxed=lambda p: p["tile_num"],
            hw=HW,
        )
    with pytest.raises(AscError, match="tuned by kernel_search"):
        npu_jax.search.kernel_search(add_custom, 8, *shapes, BLOCK, 4, space={"tile_num": [1]}, hw=HW)

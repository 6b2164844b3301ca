"""``@asc.autotune``: every config priced timing-only, the fewest cycles kept and run, the choice cached
per key; refused configs skipped with their error; bad configs and keys refused by name."""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
import pytest

import npu_jax
from npu_jax import asc
from npu_jax.asc import tune as autotune_mod

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
from add_custom import add_custom as add  # noqa: E402  (its block length, tiles and buffers are arguments)

HW = npu_jax.presets.ascend910b()


CONFIGS = [{"tile_num": 4, "buffer_num": 2}, {"tile_num": 1, "buffer_num": 1}]


def test_the_fewest_cycles_are_kept_run_and_cached(rng, monkeypatch):
    tuned = asc.autotune(configs=CONFIGS, key=["block_length"])(add)
    x, y = (rng.standard_normal(4 * 1024).astype(np.float16) for _ in range(2))
    (_, _, z), rep = tuned[4](x, y, np.zeros_like(x), 1024, hw=HW)
    np.testing.assert_array_equal(z, (x + y).astype(np.float16))  # one fp16 rounding, as numpy's
    timings = tuned.timings(1024)
    assert [c for c, _ in timings] == CONFIGS and all(isinstance(t, int) for _, t in timings)
    # each config's cycles are its own launch's (with data), and the pick has the fewest
    for cfg, cycles in timings:
        args = (x, y, np.zeros_like(x), 1024, cfg["tile_num"], cfg["buffer_num"])
        _, alone = asc.launch(add, 4, *args, hw=HW, checks="none")
        assert alone.cycles == cycles, cfg
    best = min(timings, key=lambda ct: ct[1])[0]
    assert tuned.best_config(1024) == best and rep.cycles == min(t for _, t in timings)
    assert rep.name == f"add_custom[tile_num={best['tile_num']}, buffer_num={best['buffer_num']}]"
    # a second call for the key runs the kept config alone; a new key value tunes again
    calls = []
    real = autotune_mod.launch
    monkeypatch.setattr(autotune_mod, "launch", lambda *a, **k: calls.append(k) or real(*a, **k))
    tuned[4](x, y, np.zeros_like(x), 1024, hw=HW)
    assert len(calls) == 1 and not calls[0].get("timing_only")
    x2 = np.ones(4 * 512, np.float16)
    (_, _, z2), _ = tuned[4](x2, x2, np.zeros_like(x2), 512, hw=HW, checks="none")
    assert len(calls) == 1 + len(CONFIGS) + 1 and (z2 == 2).all()
    assert set(map(str, [tuned.best_config(512), tuned.best_config(1024)])) <= set(map(str, CONFIGS))
    with pytest.raises(KeyError, match="no call tuned"):
        tuned.best_config(256)


def test_refused_configs_are_skipped_with_their_error():
    # one tile of 64 K halves a queue, three queues: 384 KB, past the 910B's 192 KB UB
    tuned = asc.autotune(
        configs=[{"tile_num": 1, "buffer_num": 1}, {"tile_num": 16, "buffer_num": 2}], key=["block_length"]
    )(add)
    shapes = [jax.ShapeDtypeStruct((2 * 65536,), np.float16)] * 3
    _, rep = tuned[2](*shapes, 65536, hw=HW, timing_only=True)
    (big, err), (small, cycles) = tuned.timings(65536)
    assert isinstance(err, str) and "UB" in err and isinstance(cycles, int)
    assert tuned.best_config(65536) == small and rep.cycles == cycles
    only_big = asc.autotune(configs=[{"tile_num": 1, "buffer_num": 1}], key=["block_length"])(add)
    with pytest.raises(asc.AscError, match="refused every config"):
        only_big[2](*shapes, 65536, hw=HW, timing_only=True)


def test_bad_configs_keys_and_calls_are_refused_by_name():
    with pytest.raises(asc.AscError, match=r"names \['tiles'\]"):
        asc.autotune(configs=[{"tiles": 4}])(add)
    with pytest.raises(asc.AscError, match="at least one config"):
        asc.autotune(configs=[])(add)
    with pytest.raises(asc.AscError, match="same arguments"):
        asc.autotune(configs=[{"tile_num": 4}, {"buffer_num": 1}])(add)
    with pytest.raises(asc.AscError, match=r"\['length'\] are not arguments"):
        asc.autotune(configs=CONFIGS, key=["length"])(add)
    with pytest.raises(asc.AscError, match="both tuned"):
        asc.autotune(configs=CONFIGS, key=["tile_num"])(add)
    with pytest.raises(asc.AscError, match="above @asc.kernel"):
        asc.autotune(configs=CONFIGS)(add.fn)
    tuned = asc.autotune(configs=CONFIGS, key=["block_length"])(add)
    x = np.zeros(1024, np.float16)
    with pytest.raises(asc.AscError, match=r"\['tile_num'\] are tuned"):
        tuned[1](x, x, x, 1024, 4, hw=HW)
    with pytest.raises(asc.AscError, match=r"positionally.*\['tile_num'\]"):
        tuned[1](x, x, x, 1024, tile_num=4, hw=HW)

"""The tiling chooser's picks on disk across processes (``npu_jax.core.diskcache``)."""

from __future__ import annotations

import json
import os

import pytest

from npu_jax import presets
from npu_jax.core import diskcache
from npu_jax.search import choose
from npu_jax.workload.conv import canonicalize


@pytest.fixture
def cache_dir(tmp_path):
    was = diskcache.directory()
    diskcache.set_dir(tmp_path)
    choose.choose_tiling.cache_clear()
    yield tmp_path / "npu-jax-results"
    diskcache._dir[0] = was
    choose.choose_tiling.cache_clear()


def _layer(seed_c: int):
    return canonicalize((1, seed_c, 9, 11), (24, seed_c, 3, 3), 1, 1, 1, 1)


def test_a_pick_is_read_back_without_choosing_again(cache_dir, monkeypatch):
    hw = presets.tiny()
    g = _layer(20)
    first = choose.choose_tiling(g, "img2col", hw)
    (entry,) = list(cache_dir.iterdir())
    assert json.loads(entry.read_text())["value"]["ho"] == first.ho
    choose.choose_tiling.cache_clear()

    def no_choosing(*a, **k):
        raise AssertionError("chose again")

    monkeypatch.setattr(choose, "predict_many", no_choosing)
    monkeypatch.setattr(choose, "candidate_tilings", no_choosing)
    assert choose.choose_tiling(g, "img2col", hw) == first
    with pytest.raises(AssertionError, match="chose again"):  # another key (the strategy) is a miss
        choose.choose_tiling(g, "input_tiled", hw)


def test_a_bad_or_foreign_entry_is_a_miss_and_written_again(cache_dir):
    hw = presets.tiny()
    g = _layer(12)
    first = choose.choose_tiling(g, "relayout", hw)
    (entry,) = list(cache_dir.iterdir())
    for junk in ("{not json", json.dumps({"key": "another key", "value": {"ho": 1}}), '{"key": 1}'):
        entry.write_text(junk)
        choose.choose_tiling.cache_clear()
        assert choose.choose_tiling(g, "relayout", hw) == first
        assert json.loads(entry.read_text())["value"]["ho"] == first.ho  # written over
    text = json.loads(entry.read_text())
    text["value"] = {"ho": -3}  # the right key but no tiling: refused by ConvTiling, chosen again
    entry.write_text(json.dumps(text))
    choose.choose_tiling.cache_clear()
    assert choose.choose_tiling(g, "relayout", hw) == first


def test_off_by_default_in_the_suite_and_keyed_on_the_source():
    assert diskcache.directory() is None  # conftest: NPU_JAX_CACHE_DIR=off; nothing written
    assert diskcache.load("choose_tiling", ("x",)) is None
    v = diskcache.code_version()
    assert len(v) == 64 and v == diskcache.code_version()
    assert diskcache._text("k", object()) is None  # an address in the key: never kept


def test_an_unwritable_directory_only_costs_the_saving(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    was = diskcache.directory()
    try:
        diskcache.set_dir(ro)
        diskcache.store("k", ("a",), {"v": 1})  # no error
        assert diskcache.load("k", ("a",)) in (None, {"v": 1})  # root may write anyway
    finally:
        diskcache._dir[0] = was
        os.chmod(ro, 0o700)

"""``import npu_jax`` reaches its subpackages ``cost`` and ``search`` as attributes (PEP 562)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import npu_jax


def test_search_and_cost_are_attributes_in_a_fresh_interpreter():
    """In a new process, so that nothing imported them before: the attribute is the module itself."""
    code = (
        "import sys, npu_jax\n"
        "assert npu_jax.search is sys.modules['npu_jax.search'], 'search'\n"
        "assert npu_jax.cost is sys.modules['npu_jax.cost'], 'cost'\n"
        "assert callable(npu_jax.search.tile_search)\n"
        "assert {'cost', 'search'} <= set(dir(npu_jax))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_attributes_and_unknown_names():
    for name in ("cost", "search"):
        module = importlib.import_module(f"npu_jax.{name}")
        assert npu_jax.__getattr__(name) is module and getattr(npu_jax, name) is module
    assert {"cost", "search", "conv2d", "matmul"} <= set(dir(npu_jax))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        npu_jax.nope  # noqa: B018


# one public name per defining module (the import a name triggers is its module's)
_FIRST_NAME_PER_MODULE = sorted({m: n for n, m in sorted(npu_jax._LAZY_NAMES.items())}.values())


@pytest.mark.parametrize("name", _FIRST_NAME_PER_MODULE)
def test_each_lazy_module_is_reached_first_in_a_fresh_interpreter(name):
    """A public name as the first thing a process touches (an import cycle shows only so)."""
    subprocess.run([sys.executable, "-c", f"import npu_jax; npu_jax.{name}"], check=True)

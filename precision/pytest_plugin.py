"""pytest plugin: the ``assert_precision`` fixture and the ``--precision-update-baselines`` option.

Register it with ``pytest_plugins = ["precision.pytest_plugin"]`` in a conftest.py. A test then
reads::

    def test_conv3x3_mixed(assert_precision):
        assert_precision(baselines.measure("conv3x3_fp16_mixed"), baseline="conv3x3_fp16_mixed")

Run pytest with ``--precision-update-baselines`` to rewrite the baselines those tests touch
instead of comparing (a deliberate update, like ``npu-jax precision --update-baselines``).
"""

from __future__ import annotations

import pytest

from precision import baselines


def pytest_addoption(parser):
    parser.addoption(
        "--precision-update-baselines",
        action="store_true",
        default=False,
        help="rewrite the precision baselines that tests assert against, instead of comparing",
    )


@pytest.fixture
def assert_precision(request):
    """``assert_precision(result, baseline=name, rtol=None, directory=None)``: compare ``result``
    (Metrics, or (out, ref[, abs_ref])) with the golden baseline; fails with the drift per metric."""
    update = request.config.getoption("--precision-update-baselines")

    def check(result, baseline: str, **kw):
        return baselines.assert_precision(result, baseline=baseline, update=update, **kw)

    return check

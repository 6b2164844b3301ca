"""The API reference (docs/api, Sphinx autodoc + napoleon) builds from the docstrings, warnings as errors.

Any docstring that breaks the reST (an unbalanced ``|``, a bad indent, an ambiguous reference) or a
public name that moves fails this test, so the reference cannot rot. The build runs in a child
process so that Sphinx's global state (docutils roles, logging) stays out of the test process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "api"

# page -> objects whose entries the reference must have (autodoc's anchors are the dotted names)
EXPECTED = {
    "npu_jax.html": (
        "npu_jax.conv2d",
        "npu_jax.conv2d_bounded",
        "npu_jax.matmul",
        "npu_jax.hw.presets.ascend910b",
        "npu_jax.hw.presets.get",
        "npu_jax.HardwareConfig",
        "npu_jax.Assumed",
        "npu_jax.ConvTiling",
        "npu_jax.MatmulTiling",
        "npu_jax.Policy",
        "npu_jax.OperandCastWarning",
        "npu_jax.Report",
        "npu_jax.Report.summary",
        "npu_jax.cost.predict",
        "npu_jax.search.tile_search",
        "npu_jax.set_program_cache_size",
        "npu_jax.program_cache_info",
    ),
    "fusion.html": ("fusion.conv_relu", "fusion.conv2d_fused", "fusion.analyze"),
    "precision.html": ("precision.round_to", "precision.compare", "precision.layer_budget"),
}


def test_api_reference_builds_without_warnings(tmp_path):
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html"]
        + ["-d", str(tmp_path / "doctrees"), str(SOURCE), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"sphinx failed (rc {proc.returncode}):\n{proc.stderr[-6000:]}"
    for page, names in EXPECTED.items():
        html = (out / page).read_text(encoding="utf-8")
        missing = [n for n in names if f'id="{n}"' not in html]
        assert not missing, f"{page} has no entry for {missing}"
    # the entries carry their docstrings, napoleon's sections rendered (not the raw "Args:" text)
    conv = (out / "npu_jax.html").read_text(encoding="utf-8")
    entry = conv[conv.index('id="npu_jax.conv2d"') : conv.index('id="npu_jax.conv2d_bounded"')]
    text = re.sub(r"<[^>]+>", "", entry)
    assert "Conv2D on the emulated AI Core" in text and "OperandCastWarning" in text
    assert "Parameters" in text and "Args:" not in text

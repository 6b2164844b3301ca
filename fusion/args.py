"""Argument types of ``npu-jax fuse``: an epilogue chain, a list of presets, a reference layer.

Like :mod:`npu_jax.cli.types` (which has the shared ones): text in, a value or one
``ArgumentTypeError`` out, the parameter named by argparse in front.

Example:
    >>> from fusion.args import epilogue_steps
    >>> [str(s) for s in epilogue_steps("bias,leaky_relu:0.1")]
    ['bias', 'leaky_relu(0.1)']
"""

from __future__ import annotations

import argparse

from npu_jax.hw import presets
from npu_jax.mapping.epilogue import canonical_steps
from npu_jax.workload.resnet50 import RESNET50_REFERENCE


def epilogue_steps(text: str):
    """``bias,relu`` / ``leaky_relu:0.1`` / ``clipped_relu:6`` / ``residual`` / ``cast:bf16`` -> steps."""
    spec = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            raise argparse.ArgumentTypeError(f"empty step in {text!r}; write steps like bias,relu")
        op, sep, arg = item.partition(":")
        if not sep:
            spec.append(op)
        elif op == "cast":
            spec.append((op, arg))
        else:
            try:
                spec.append((op, float(arg)))
            except ValueError:
                raise argparse.ArgumentTypeError(f"{op} takes a number after ':', got {item!r}") from None
    try:
        return canonical_steps(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).rstrip(".")) from None


def _get_preset(name: str):
    key = name.strip().lower().replace("_", "-")
    if key in ("tiny-coupled", "tinycoupled"):
        return presets.tiny(coupled=True)
    return presets.get(name.strip())


def preset_list(text: str):
    """One preset or a comma list (``910b,910``); ``tiny-coupled`` is the tiny core with a UB path."""
    try:
        return tuple(_get_preset(t) for t in text.split(","))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).rstrip(".") + " (or tiny-coupled)") from None


def reference_layer(text: str):
    """A ResNet-50 reference layer by its stage name: ``conv1``, ``conv2_x``, ..., ``conv5_x``."""
    by_stage = {lay.name.split()[0]: lay for lay in RESNET50_REFERENCE}
    if text not in by_stage:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(by_stage)}, got {text!r}")
    return by_stage[text]


__all__ = ["epilogue_steps", "preset_list", "reference_layer"]

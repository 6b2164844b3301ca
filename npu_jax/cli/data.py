"""The data the commands run on: random fp16 operands, the float reference of a Conv2D, the demo's layers.

``fusion``'s command and study use them too (the same operands, reference and layers as the Conv2D
command and the demo).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jax import lax

from npu_jax.hw.config import HardwareConfig
from npu_jax.workload.resnet50 import RESNET50_REFERENCE


def random_operands(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A (M, K) and B (K, N), standard normal, in fp16."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    return a, b


def conv_reference(x, w, g) -> np.ndarray:
    """``lax.conv_general_dilated`` in fp32 at HIGHEST precision on the given (fp16-rounded) inputs,
    NCHW x OIHW with the strides, pads and dilation of the canonical geometry ``g``; float64 out."""
    pt, pb, pl, pr = g.pads
    return np.asarray(
        lax.conv_general_dilated(
            x.astype(np.float32),
            w.astype(np.float32),
            window_strides=g.stride,
            padding=((pt, pb), (pl, pr)),
            rhs_dilation=g.dilation,
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
            precision=lax.Precision.HIGHEST,
        ),
        np.float64,
    )


def demo_layers(hw: HardwareConfig) -> tuple:
    """The ResNet-50 reference layers; on the tiny test preset two of them at half height and
    width, so that ``npu-jax demo --preset tiny`` stays quick (each run's time is mostly compiling
    its kernel, whatever the layer's size)."""
    if not hw.name.startswith("tiny"):
        return RESNET50_REFERENCE
    return tuple(
        dataclasses.replace(
            layer,
            name=f"{layer.name.split()[0]}/2 {layer.kh}x{layer.kw} {layer.h // 2}x{layer.w // 2}x{layer.c}",
            h=layer.h // 2,
            w=layer.w // 2,
        )
        for layer in RESNET50_REFERENCE
        if layer.name.startswith(("conv2_x", "conv4_x"))
    )


def demo_fusion_layers(hw: HardwareConfig) -> tuple:
    """The demo's fusion section: the first and the last 3x3 reference layer (conv2_x, conv5_x: the
    largest and the smallest intermediate), or the tiny preset's pair; ``npu-jax fuse --reference``
    runs every reference layer."""
    if hw.name.startswith("tiny"):
        return demo_layers(hw)
    return tuple(layer for layer in RESNET50_REFERENCE if layer.name.startswith(("conv2_x", "conv5_x")))


def demo_layers_text(hw: HardwareConfig) -> str:
    """What :func:`demo_layers` returns, in words, for a section's title."""
    return (
        "two ResNet-50 reference layers at half height and width (tiny preset)"
        if hw.name.startswith("tiny")
        else "the ResNet-50 reference layers"
    )


__all__ = ["conv_reference", "demo_fusion_layers", "demo_layers", "demo_layers_text", "random_operands"]

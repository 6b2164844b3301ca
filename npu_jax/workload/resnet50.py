"""Reference workloads: the ResNet-50 convolutions (batch 1, NCHW, 224x224 input).

``RESNET50_REFERENCE`` holds the layers the kernel engineer's figures are quoted on (the four 3x3
stages and the 7x7 stride-2 stem); ``resnet50_convs()`` lists all 53 conv layers of the network
(torchvision's v1.5 layout: the stride sits on the 3x3 of each first bottleneck).
"""

from __future__ import annotations

import dataclasses

from npu_jax.workload.conv import canonicalize


@dataclasses.dataclass(frozen=True)
class ConvLayer:
    """One conv layer: x (n, c, h, w), w (k, c, kh, kw), stride, padding."""

    name: str
    n: int
    c: int
    h: int
    w: int
    k: int
    kh: int
    kw: int
    stride: int = 1
    padding: int = 0

    @property
    def x_shape(self):
        return (self.n, self.c, self.h, self.w)

    @property
    def w_shape(self):
        return (self.k, self.c, self.kh, self.kw)

    def geometry(self):
        return canonicalize(self.x_shape, self.w_shape, self.stride, self.padding, 1)


RESNET50_REFERENCE = (
    ConvLayer("conv1 7x7/2 (C=3)", 1, 3, 224, 224, 64, 7, 7, 2, 3),
    ConvLayer("conv2_x 3x3 56x56x64", 1, 64, 56, 56, 64, 3, 3, 1, 1),
    ConvLayer("conv3_x 3x3 28x28x128", 1, 128, 28, 28, 128, 3, 3, 1, 1),
    ConvLayer("conv4_x 3x3 14x14x256", 1, 256, 14, 14, 256, 3, 3, 1, 1),
    ConvLayer("conv5_x 3x3 7x7x512", 1, 512, 7, 7, 512, 3, 3, 1, 1),
)


def resnet50_convs(batch: int = 1) -> tuple[ConvLayer, ...]:
    """All 53 conv layers of ResNet-50 (downsample 1x1 convs included), in network order."""
    layers = [ConvLayer("conv1", batch, 3, 224, 224, 64, 7, 7, 2, 3)]
    c_in, size = 64, 56
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=2):
        out = width * 4
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 2) else 1
            h_in = size * stride if b == 0 and stage > 2 else size
            p = f"conv{stage}_{b + 1}"
            layers.append(ConvLayer(f"{p}a 1x1", batch, c_in, h_in, h_in, width, 1, 1, 1, 0))
            layers.append(ConvLayer(f"{p}b 3x3", batch, width, h_in, h_in, width, 3, 3, stride, 1))
            layers.append(ConvLayer(f"{p}c 1x1", batch, width, size, size, out, 1, 1, 1, 0))
            if b == 0:
                layers.append(ConvLayer(f"{p} downsample", batch, c_in, h_in, h_in, out, 1, 1, stride, 0))
            c_in = out
        size //= 2 if stage < 5 else 1
    return tuple(layers)

"""MindStudio Advisor's "L2 fusion (dynamic batch slicing)" example beside the model: ResNet-50 int8 at batch
4 and 8, per operator.

    python benchmarks/advisor_l2_example.py [--preset 310p]

The published figures are the page's (``atlasadvisor_16_0008``: ``resnet50_int8_8batch`` against 4 batch,
each operator's time in us and the whole network's); the chip is not named there. The model's are
``Model.estimate`` under an int8 policy, the layer schedule (the page measures a model compiled without
the slicing it recommends), each layer's ``time_us``.
"""

from __future__ import annotations

import argparse

import npu_jax
from npu_jax.model import zoo

# operator (the page's Caffe name) -> (torchvision's layer, published us at batch 4, at batch 8)
PUBLISHED = {
    "res2a_branch2c": ("layer1.0.conv3", 38.284, 200.63),
    "res2b_branch2c": ("layer1.1.conv3", 40.527, 189.97),
    "res2c_branch2c": ("layer1.2.conv3", 38.533, 147.84),
    "res3a_branch1": ("layer2.0.downsample.0", 31.109, 74.00),
}
NETWORK = (954.0, 2031.0)  # the page's whole-network time, us, batch 4 / 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="310p")
    args = ap.parse_args()
    hw = npu_jax.presets.get(args.preset)
    m = npu_jax.model.load(zoo.build("resnet50"))
    i8 = npu_jax.Policy(operand="int8", output="int8")
    reps = {b: m.estimate(batch=b, hw=hw, policy=i8) for b in (4, 8)}
    print(
        f"| operator (ours) | published b4 / b8 us | b8 / b4 | model, {hw.name} int8: b4 / b8 us | b8 / b4 |"
    )
    print("|---|---:|---:|---:|---:|")
    for op, (ours, p4, p8) in PUBLISHED.items():
        a, b = reps[4].layer(ours).time_us, reps[8].layer(ours).time_us
        print(f"| {op} ({ours}) | {p4:.2f} / {p8:.2f} | {p8 / p4:.2f} | {a:.1f} / {b:.1f} | {b / a:.2f} |")
    a, b = reps[4].time_us, reps[8].time_us
    print(
        f"| the whole network | {NETWORK[0]:,.0f} / {NETWORK[1]:,.0f} | {NETWORK[1] / NETWORK[0]:.2f} | "
        f"{a:,.0f} / {b:,.0f} | {b / a:.2f} |"
    )


if __name__ == "__main__":
    main()

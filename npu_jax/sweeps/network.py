"""The default point of a sweep: a network's estimate (``npu_jax.model``, which needs onnx)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from npu_jax import model
from npu_jax.core.policy import Policy
from npu_jax.hw import HardwareConfig, presets
from npu_jax.model import zoo

KEYS = ("hw", "network", "batch", "policy", "strategy", "fused", "search", "schedule")  # network_point's
ESTIMATE_KEYS = ("strategy", "fused", "search", "schedule")  # passed to model.estimate as they are


def _hw(spec):
    if isinstance(spec, HardwareConfig):
        return spec
    if isinstance(spec, Mapping):
        spec = dict(spec)
        base = spec.pop("preset", None)
        if base is None:
            raise ValueError(f"an hw dict names its base preset: {{'preset': '910b', ...}}, got {spec!r}.")
        return _hw(base).replace(**spec)
    if isinstance(spec, (str, os.PathLike)) and str(spec).endswith(".ini"):
        return HardwareConfig.from_ini(spec)
    return presets.get(spec)


def _policy(name):
    if name in (None, "fp16"):
        return None  # the hardware's default: fp16 operands, fp32 accumulation
    if name == "int8":  # as deployed: int32 sums requantised to int8 activations between layers
        return Policy(operand="int8", output="int8")
    if isinstance(name, Policy):
        return name
    raise ValueError(f"policy must be 'fp16', 'int8' or an npu_jax.Policy, got {name!r}.")


_MODELS: dict = {}  # per worker: a network loads once


def network_point(point: Mapping) -> dict:
    """The default point: ``model.estimate`` of ``network`` (a zoo name or an ONNX path) at ``batch``
    on ``hw`` (a preset name, an .ini path, or ``{"preset": ..., field: value}``) under ``policy``
    (``"fp16"`` or ``"int8"``); ``strategy``, ``fused``, ``search`` and ``schedule`` (``"layer"`` or
    ``"l2"``) as :meth:`Model.estimate <npu_jax.model.network.Model.estimate>` takes them. Returns
    cycles, images/s, % of peak, GM bytes, launches, the DRAM bytes of the kernels, the stacks (1 a
    layer under the layer schedule) and the bottleneck of the most cycles."""
    unknown = set(point) - set(KEYS)
    missing = {"hw", "network"} - set(point)
    if unknown or missing:
        raise ValueError(
            f"a network sweep's grid has keys {KEYS} (hw and network required); got unknown "
            f"{sorted(unknown)} and missing {sorted(missing)}. For other figures pass fn=."
        )
    net = point["network"]
    if net not in _MODELS:
        _MODELS[net] = model.load(zoo.build(net) if net in zoo.NETWORKS else net)
    rep = _MODELS[net].estimate(
        batch=int(point.get("batch", 1)),
        hw=_hw(point["hw"]),
        policy=_policy(point.get("policy")),
        **{k: point[k] for k in ESTIMATE_KEYS if k in point},
    )
    by_lane: dict[str, int] = {}
    for la in rep.layers:
        by_lane[la.bottleneck] = by_lane.get(la.bottleneck, 0) + la.cycles
    return {
        "cycles": rep.cycles,
        "images_per_second": rep.images_per_second,
        "pct_peak": rep.pct_peak,
        "gm_bytes": rep.gm_bytes,
        "launches": rep.launches,
        "dram_bytes": sum(k.hbm_bytes for la in rep.layers for k in la.kernels),
        "stacks": len(rep.schedule.stacks) or len(rep.layers),
        "bottleneck": max(by_lane, key=by_lane.get),
    }


__all__ = ["ESTIMATE_KEYS", "KEYS", "network_point"]

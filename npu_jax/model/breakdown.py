"""Where a network's time and bytes go: by kind of layer, by bottleneck, and GM bytes by tensor role.

:func:`breakdown` reads an estimate (a :class:`~npu_jax.model.report.NetworkReport`) and, for the
convs, the closed-form instruction costs of the plans it priced (``cost.many.stacked_arrays``: the
same arrays the schedule sums), so the bytes by role add up to the GM bytes of each conv kernel (a
vector kernel after one, where the epilogue does not fuse, counts in its kind's bytes, not by role).

Kinds: ``stem`` (the first conv), ``conv3x3`` / ``conv1x1`` (``+res``: with a fused residual add;
``/2``: strided), ``pool``, ``gemm``, ``eltwise``. Roles of a conv's GM bytes: ``input``,
``weights`` (streamed parts and resident copies), ``bias``, ``residual``, ``output``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_jax.cost.conv import layer_of
from npu_jax.cost.many import stacked_arrays
from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize
from npu_jax.model.kernels import _conv_plan
from npu_jax.model.report import NetworkReport

ROLES = ("input", "weights", "bias", "residual", "output")


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """Cycles per kind and per bottleneck, GM bytes per role (convs) and per kind; ``total`` cycles."""

    total: int
    by_kind: dict  # kind -> (layers, cycles, gm bytes)
    by_bottleneck: dict  # lane -> cycles
    roles: dict  # role -> bytes (convs only)
    roles_by_kind: dict  # kind -> {role: bytes}
    compulsory: int = 0  # GM bytes if every layer read its inputs and weights and wrote its output once
    port_cycles: int = 0  # the fewest cycles they take through every core's GM port together
    chip_cycles: int = 0  # ... through the chip's memory (0: unbounded)

    def table(self) -> str:
        t = max(1, self.total)
        lines = [f"{'kind':<14}{'layers':>7}{'cycles':>14}{'share':>8}{'GM MB':>10}"]
        for k, (n, c, b) in sorted(self.by_kind.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"{k:<14}{n:>7}{c:>14,}{100 * c / t:>7.1f}%{b / 1e6:>10.1f}")
        lines.append("")
        lines.append(
            "bottleneck    " + "  ".join(f"{k} {100 * v / t:.1f}%" for k, v in self.by_bottleneck.items())
        )
        lines.append("")
        lines.append(f"{'conv GM MB by role':<14}" + "".join(f"{r:>11}" for r in ROLES))
        rows = list(self.roles_by_kind.items()) + [("all convs", self.roles)]
        for k, roles in rows:
            lines.append(f"{k:<14}" + "".join(f"{roles.get(r, 0) / 1e6:>11.1f}" for r in ROLES))
        if self.compulsory:
            lines.append("")
            lines.append(
                f"compulsory GM bytes (each layer's inputs, weights and output once): {self.compulsory / 1e6:.1f} MB; "
                f"at the cores' ports {self.port_cycles:,} cycles"
                + (f", at the chip's memory {self.chip_cycles:,} cycles" if self.chip_cycles else "")
            )
        return "\n".join(lines)


def conv_roles(p) -> dict:
    """GM bytes of one conv plan by role, from the closed form's instruction arrays."""
    L = layer_of(p.g, p.c0)
    c, q, pro = stacked_arrays([p], L, costs.HwNumbers.of(p.hw))
    return {
        "input": int(c["x_bytes"].sum()),
        "weights": int((q["w_bytes"] * c["live"]).sum() + pro["wr_bytes"].sum()),
        "bias": int(pro["bias_bytes"].sum()),
        "residual": int(c["res_bytes"].sum()),
        "output": int(c["out_bytes"].sum()),
    }


def breakdown(model, rep: NetworkReport, cache_setting) -> Breakdown:
    """The breakdown of ``rep`` (an estimate of ``model`` under ``cache_setting``, a
    :class:`~npu_jax.model.kernels.Setting`)."""
    convs = [la for la in model.layers if la.op == "conv"]
    first = convs[0].name if convs else None
    by_kind: dict = {}
    by_bn: dict = {}
    roles = dict.fromkeys(ROLES, 0)
    roles_by_kind: dict = {}
    for la, lr in zip(model.layers, rep.layers):
        if la.op == "conv":
            k = "stem" if la.name == first else _conv_kind(la)
            x_shape = model.graph.shape(la.inputs[0], rep.batch)
            p = _conv_plan(la, x_shape, cache_setting, model._cache)[1]
            r = conv_roles(p)
            kr = roles_by_kind.setdefault(k, dict.fromkeys(ROLES, 0))
            for role, v in r.items():
                roles[role] += v
                kr[role] += v
        else:
            k = la.op
        n, cyc, b = by_kind.get(k, (0, 0, 0))
        by_kind[k] = (n + 1, cyc + lr.cycles, b + lr.gm_bytes)
        by_bn[lr.bottleneck] = by_bn.get(lr.bottleneck, 0) + lr.cycles
    hw = cache_setting.hw
    compulsory = compulsory_bytes(model, rep.batch, itemsize(cache_setting.policy.output))
    ports, chip = costs.traffic_floors(costs.HwNumbers.of(hw), compulsory, hw.num_cores)
    return Breakdown(rep.cycles, by_kind, by_bn, roles, roles_by_kind, compulsory, int(ports), int(chip))


def compulsory_bytes(model, batch: int, act_itemsize: int) -> int:
    """GM bytes no layer-at-a-time schedule avoids without keeping tensors on chip across kernels:
    each layer's activation inputs and output once in the activation format, its weights once."""
    total = 0
    for la in model.layers:
        acts = [model.graph.shape(t, batch) for t in (*la.inputs, la.output)]
        total += sum(int(np.prod(s)) for s in acts) * act_itemsize
        if la.weight is not None:
            total += la.weight.size * act_itemsize
    return total


def _conv_kind(la) -> str:
    kh, kw = la.weight.shape[2:]
    name = f"conv{kh}x{kw}"
    if any(s.op == "residual" for s in la.steps):
        name += "+res"
    if np.prod(la.attrs["stride"]) > 1:
        name += "/2"
    return name


__all__ = ["Breakdown", "ROLES", "breakdown", "compulsory_bytes", "conv_roles"]

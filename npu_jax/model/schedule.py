"""How a network's layers are scheduled: one at a time over the whole batch, or in stacks kept in L2.

``Model.estimate(schedule=...)`` and ``Model.run(schedule=...)`` take one of :data:`SCHEDULES`:

* ``"layer"``: every layer runs once over the whole batch, one kernel after another; what a kernel
  leaves in L2 follows the kernels' own rules (``core/l2.py``: a conv's input is resident where the
  relayout kernel keeps its NC1HWC0 copy).
* ``"l2"``: the vendor's compiled-model schedule (ATC's default ``--buffer_optimize=l2_optimize``;
  MindStudio Advisor's "L2 fusion (dynamic batch slicing)": when a layer's inputs and outputs exceed
  the L2, split the operators along the batch so that each layer's data fits). Consecutive layers form
  a **stack** that runs slice by slice (``images`` images a slice): every layer of the stack on slice
  0, then every layer on slice 1, ... A tensor made and used inside the stack never leaves the L2
  (``on_chip``); a tensor read from outside comes from DRAM once a slice (``from_ddr``; a second
  reader in the stack finds it in L2); a tensor read after the stack, or a graph output, is written
  back to DRAM (``to_ddr``); the stack's weights and bias rows are read from DRAM by its first slice
  and stay in L2 for the others. What each kernel finds in L2 is given to it as roles
  (``ConvPlan.l2_resident``, the vector kernels' ``l2_resident``) and priced by the same closed forms
  and emulator runs as the layer schedule: a role counts only where the kernel's own launch keeps the
  tensor too (``core/l2.py``), so the closed form and the emulator agree by construction.

**The working set** of a stack at ``images`` images a slice, the rule a stack must meet (``peak_bytes
<= hw.l2_bytes``): at each layer, the bytes of every activation live there (made in the stack and read
at or after it; read from DRAM and read again later in the stack; the layer's own inputs and output)
plus the weights: the whole stack's when it runs more than one slice (they stay across slices), else
the layer's own. Activations count their logical bytes at the format they are stored in (int8 where
the graph quantises them, else the policy's output format), weights at the operand's.

**The write-back**: a stack's ``to_ddr`` tensors reach DRAM after the kernel that wrote them (the
L2 keeps them, dirty, when the kernel ends; ``core/l2.py``), overlapped with the kernels after it.
The stack then takes at least its launches plus the DRAM time of everything it moves (the kernels'
DRAM bytes and the write-backs, ``costs.hbm_cycles``); where that is longer than its kernels, the
difference is charged to its last layer as ``LayerReport.wait_cycles``.

**The first layer of a one-slice stack** (and a layer alone, below) finds its input as the layer
schedule's kernels do (where the relayout kernel keeps its copy, the tensor a kernel before kept is
still there); in a stack of several slices, the whole batch of its input did not fit, so each
slice's comes from DRAM.

**The choice**: stacks of at most :data:`MAX_LAYERS` kernel layers, each at the largest divisor of
the batch whose working set fits, priced in full, the cheapest cover found by dynamic programming
over the layer sequence (exact for this cost: a stack's price depends on its own layers alone). A
single layer may also run over the whole batch as the layer schedule runs it (``fits`` False where
its working set does not fit), and GEMM layers (the matmul kernel takes nothing resident) and int8
QDQ layers always do, each a stack of its own. A model whose Reshape fixes the batch is not sliced.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from npu_jax.errors import InputError, InputTypeError, check_int
from npu_jax.hw import costs
from npu_jax.hw.formats import itemsize
from npu_jax.model.plan import Layer, View
from npu_jax.model.qkernels import CONVERSIONS

SCHEDULES = ("layer", "l2")
MAX_LAYERS = 24  # kernel layers a stack may hold (the dynamic programme's window)
ALONE = ("gemm", "qconv", "qgemm")  # layers whose kernels take nothing resident: a stack each


@dataclasses.dataclass(frozen=True)
class Stack:
    """Consecutive layers run slice by slice with their intermediates in L2 (see the module).

    Attributes:
        layers: the kernel layers' names, in order. images: images a slice; slices: how many.
        from_ddr, on_chip, to_ddr: the tensors read from DRAM, kept in L2 only, written back.
        weight_bytes: the stack's weights and bias rows. peak_bytes: the largest working set.
        fits: whether ``peak_bytes`` fits the L2 (False: one layer over the whole batch).
    """

    layers: tuple[str, ...]
    images: int
    slices: int
    from_ddr: tuple[str, ...]
    on_chip: tuple[str, ...]
    to_ddr: tuple[str, ...]
    weight_bytes: int
    peak_bytes: int
    fits: bool = True


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A network's schedule: ``kind`` (one of :data:`SCHEDULES`) and, for ``"l2"``, its stacks."""

    kind: str
    batch: int
    l2_bytes: int
    stacks: tuple[Stack, ...] = ()

    def table(self) -> str:
        """One row a stack: its layers, slicing, working set, what stayed on chip and what went to DRAM."""
        head = ("stack", "layers", "images x slices", "peak MiB", "weights MiB", "on chip", "to DRAM")
        rows = [
            (
                str(i),
                s.layers[0] if len(s.layers) == 1 else f"{s.layers[0]} .. {s.layers[-1]} ({len(s.layers)})",
                f"{s.images} x {s.slices}" + ("" if s.fits else " (does not fit)"),
                f"{s.peak_bytes / 2**20:.2f}",
                f"{s.weight_bytes / 2**20:.2f}",
                str(len(s.on_chip)),
                ", ".join(s.to_ddr) or "-",
            )
            for i, s in enumerate(self.stacks)
        ]
        w = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        title = f"schedule {self.kind!r}, batch {self.batch}, L2 {self.l2_bytes / 2**20:g} MiB: {len(self.stacks)} stacks"
        return "\n".join([title] + ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in [head, *rows]])

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "batch": self.batch,
            "l2_bytes": self.l2_bytes,
            "stacks": [dataclasses.asdict(s) for s in self.stacks],
        }


class Network:
    """The facts a schedule needs from a plan: the kernel layers in order, where each tensor comes
    from (views and int8 conversions launch nothing: their output is their input's data), who reads
    it, and bytes per image."""

    def __init__(self, graph, items, act_bytes: dict, weight_bytes: list[int], alone: list[bool]):
        """``graph``: the typed graph (its outputs); ``items``: the plan's layers and views in order;
        per source tensor its bytes per image; per kernel layer its weight bytes and whether it
        takes nothing resident."""
        self.alias: dict[str, str] = {}
        self.kernels: list[Layer] = []
        for it in items:
            if isinstance(it, View):
                self.alias[it.output] = it.input
            elif it.op in CONVERSIONS:
                self.alias[it.output] = it.inputs[0]
            else:
                self.kernels.append(it)
        self.reads = [tuple(self.source(t) for t in la.inputs) for la in self.kernels]
        n = len(self.kernels)
        self.last_read = {}  # tensor -> the last kernel reading it (n: a graph output)
        for k, ts in enumerate(self.reads):
            for t in ts:
                self.last_read[t] = max(self.last_read.get(t, -1), k)
        for t in graph.outputs:
            self.last_read[self.source(t)] = n
        self.act_bytes = act_bytes  # source tensor -> bytes per image
        self.weight_bytes = weight_bytes
        self.alone = alone

    def source(self, t: str) -> str:
        while t in self.alias:
            t = self.alias[t]
        return t

    def stack(self, i: int, j: int, batch: int, images: int, l2_bytes: int) -> Stack:
        """The stack of kernel layers [i, j) at ``images`` a slice."""
        made = {self.kernels[k].output: k for k in range(i, j)}
        outside = [t for k in range(i, j) for t in self.reads[k] if t not in made]
        from_ddr = tuple(dict.fromkeys(outside))
        to_ddr = tuple(t for t in made if self.last_read.get(t, -1) >= j)
        on_chip = tuple(t for t in made if t not in to_ddr)
        slices = batch // images
        weights = sum(self.weight_bytes[i:j])
        peak = self.peak(i, j, images, slices)
        return Stack(
            tuple(self.kernels[k].name for k in range(i, j)),
            images,
            slices,
            from_ddr,
            on_chip,
            to_ddr,
            weights,
            peak,
            peak <= l2_bytes,
        )

    def peak(self, i: int, j: int, images: int, slices: int) -> int:
        """The stack's largest working set (module notes)."""
        made = {self.kernels[k].output: k for k in range(i, j)}
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for k in range(i, j):
            for t in self.reads[k]:
                first.setdefault(t, k)
                last[t] = k
        for t, k in made.items():
            first[t] = k
            last[t] = max(last.get(t, k), k)
        stack_w = sum(self.weight_bytes[i:j])
        peak = 0
        for k in range(i, j):
            live = sum(self.act_bytes[t] for t in first if first[t] <= k <= last[t])
            w = stack_w if slices > 1 else self.weight_bytes[k]
            peak = max(peak, images * live + w)
        return peak

    def roles(self, i: int, k: int, later: bool) -> tuple[str, ...]:
        """What kernel layer ``k`` of the stack starting at ``i`` finds in L2: its input (``x``) and
        second operand (``res``) where made in the stack or read there before; its weights and bias
        row (``w``, ``row``) on every slice after the first."""
        seen = {self.kernels[m].output for m in range(i, k)} | {t for m in range(i, k) for t in self.reads[m]}
        names = ("x", "res")
        r = tuple(names[n] for n, t in enumerate(self.reads[k][:2]) if t in seen)
        return r + (("w", "row") if later else ())


def roles_of(net: Network, i: int, k: int, slices: int, later: bool):
    """What kernel layer ``k`` of the stack starting at ``i`` finds in L2 (``Network.roles``); the
    first layer of a stack of one slice, and a layer that takes nothing resident, follow the layer
    schedule's rule (None: ``schedule`` module notes)."""
    if net.alone[k] or (k == i and slices == 1):
        return None
    return net.roles(i, k, later)


def stack_rows(net: Network, hw, i: int, j: int, batch: int, slices: int, per_layer):
    """(cycles, rows) of the stack of kernel layers [i, j): ``per_layer`` holds (layer, the first
    slice's kernels, a later slice's, tiling, setting); a row is (layer, every slice's kernels,
    tiling, setting, wait), the stack's DRAM wait on its last layer (``schedule.stack_cycles``)."""
    first, later, writeback, rows = [], [], 0, []
    for la, k0, k1, tiling, ls in per_layer:
        first += k0
        later += k1
        if net.last_read.get(la.output, -1) >= j and k0 and k0[-1].out_kept:  # written back after it
            writeback += net.act_bytes[la.output] * batch
        rows.append([la, tuple(k0) + tuple(k1) * (slices - 1), tiling, ls, 0])
    cycles, wait = stack_cycles(hw, first, later, slices, writeback)
    rows[-1][4] = wait
    return cycles, [tuple(r) for r in rows]


def make(net: Network, name: str, batch: int, stacks, l2_bytes: int) -> Schedule:
    """``Model.make_schedule``'s stacks checked and built: ``stacks`` a list of (layers, images)."""
    if not isinstance(stacks, (list, tuple)) or not stacks:
        raise InputTypeError(
            f"Model.make_schedule: stacks must be a list of (layers, images), got {stacks!r}."
        )
    checked = []
    for n, st in enumerate(stacks):
        if not (isinstance(st, (list, tuple)) and len(st) == 2):
            raise InputError(f"Model.make_schedule: stacks[{n}] must be (layers, images), got {st!r}.")
        k = check_int("Model.make_schedule", f"stacks[{n}] layers", st[0], 1)
        images = check_int("Model.make_schedule", f"stacks[{n}] images", st[1], 1)
        if batch % images:
            raise InputError(
                f"Model.make_schedule: stacks[{n}] has {images} images a slice, not a divisor of batch {batch}; "
                f"use one of {divisors(batch)}."
            )
        checked.append((k, images))
    held = sum(k for k, _ in checked)
    if held != len(net.kernels):
        raise InputError(
            f"Model.make_schedule: the stacks hold {held} layers but {name!r} has {len(net.kernels)} kernel "
            f"layers; the counts must add up to {len(net.kernels)}."
        )
    out, i = [], 0
    for n, (k, images) in enumerate(checked):
        j = i + k
        lone = [net.kernels[m].name for m in range(i, j) if net.alone[m]]
        if lone and (k > 1 or images != batch):
            raise InputError(
                f"Model.make_schedule: stacks[{n}] holds {lone[0]!r}, a layer whose kernel takes nothing "
                f"resident: give it a stack of its own, (1, {batch})."
            )
        out.append(net.stack(i, j, batch, images, l2_bytes))
        i = j
    return Schedule("l2", batch, l2_bytes, tuple(out))


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def choose(net: Network, batch: int, l2_bytes: int, price, slicing: bool = True) -> tuple[list[Stack], list]:
    """The cheapest cover of the kernel layers by stacks (module notes). ``price(i, j, images)`` ->
    (cycles, whatever the caller keeps) of the stack of layers [i, j) at ``images`` a slice;
    ``slicing`` False: every stack over the whole batch. Returns the stacks and the kept values, in
    order."""
    n = len(net.kernels)
    best = [0] + [math.inf] * n
    back: list = [None] * (n + 1)
    sizes = sorted(divisors(batch), reverse=True) if slicing else [batch]
    for j in range(1, n + 1):
        for i in range(max(0, j - MAX_LAYERS), j):
            if best[i] == math.inf or (j - i > 1 and any(net.alone[k] for k in range(i, j))):
                continue
            fit = (
                None
                if net.alone[i]
                else next((b for b in sizes if net.peak(i, j, b, batch // b) <= l2_bytes), None)
            )
            options = [fit] if fit is not None else []
            if j - i == 1 and fit != batch:  # one layer may also run over the whole batch, as "layer" does
                options.append(batch)
            for images in options:
                cycles, kept = price(i, j, images)
                if best[i] + cycles < best[j]:
                    best[j] = best[i] + cycles
                    back[j] = (i, images, kept)
    stacks, kept = [], []
    j = n
    while j > 0:
        i, images, k = back[j]
        stacks.append(net.stack(i, j, batch, images, l2_bytes))
        kept.append(k)
        j = i
    return stacks[::-1], kept[::-1]


def stack_cycles(hw, kernels_first, kernels_later, slices: int, writeback_bytes: int) -> tuple[int, int]:
    """(cycles, wait): a stack's kernels (the first slice's, and each later slice's) one after another,
    and at least its launches plus the DRAM time of all it moves (module notes); ``wait`` is by how
    much the DRAM bound exceeds the kernels."""
    ks = [(k, 1) for k in kernels_first] + [(k, slices - 1) for k in kernels_later]
    run = sum(k.cycles * m for k, m in ks)
    launches = sum(k.launch_cycles * m for k, m in ks)
    dram = sum(k.hbm_bytes * m for k, m in ks) + writeback_bytes
    floor = launches + int(costs.hbm_cycles(costs.HwNumbers.of(hw), dram))
    return max(run, floor), max(0, floor - run)


def activation_bytes(graph, tensor: str, fmt: str) -> int:
    """Bytes per image of an activation: int8 where the graph quantises it, else ``fmt``."""
    shape = graph.shape(tensor, 1)
    size = 1 if tensor in graph.quant else itemsize(fmt)
    return int(np.prod(shape)) * size


__all__ = [
    "MAX_LAYERS",
    "SCHEDULES",
    "Network",
    "Schedule",
    "Stack",
    "activation_bytes",
    "choose",
    "divisors",
]

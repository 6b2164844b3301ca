"""``load`` an ONNX model, then ``estimate`` it (timing only) or ``run`` it (with data) on the emulator."""

from __future__ import annotations

import dataclasses
import time

import jax.numpy as jnp
import numpy as np

from npu_jax.core.policy import Policy
from npu_jax.errors import InputError, InputTypeError, check_bool, check_choice, check_int
from npu_jax.hw import presets
from npu_jax.hw.config import HardwareConfig
from npu_jax.hw.formats import itemsize
from npu_jax.mapping.conv import STRATEGIES
from npu_jax.model import graph as graph_mod
from npu_jax.model import quant
from npu_jax.model.kernels import ADAPTERS, Setting
from npu_jax.model.plan import Layer, NetworkPlan, View, plan
from npu_jax.model.qkernels import CONVERSIONS, QADAPTERS, estimate_as_int8, float_setting, int8_setting
from npu_jax.model.report import FusionSaving, LayerReport, NetworkReport, fusion_saving
from npu_jax.model.schedule import (
    ALONE,
    SCHEDULES,
    Network,
    Schedule,
    activation_bytes,
    choose,
    make,
    roles_of,
    stack_rows,
)


class Model:
    """An ONNX model lowered to emulator work: :attr:`graph` (the typed graph), :attr:`plan` (the
    fusion plan: layers, views and every decision). Made by :func:`load`.

    Example:
        >>> import npu_jax
        >>> from npu_jax.model import zoo
        >>> m = npu_jax.model.load(zoo.resnet50())                              # doctest: +SKIP
        >>> rep = m.estimate(batch=8, hw=npu_jax.presets.ascend910b())          # doctest: +SKIP
        >>> rep.cycles, rep.images_per_second                                   # doctest: +SKIP
    """

    def __init__(self, graph: graph_mod.Graph, network_plan: NetworkPlan):
        self.graph = graph
        self.plan = network_plan
        self._cache: dict = {}  # per distinct layer: tilings, closed-form and timing-only prices
        self._adapters = ADAPTERS | QADAPTERS

    @property
    def layers(self) -> list[Layer]:
        return self.plan.layers

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def quantised(self) -> bool:
        """The model has int8 layers (a QDQ or operator-form quantised ONNX graph)."""
        return any(la.op in ("qconv", "qgemm") for la in self.layers)

    def _layer_setting(self, la: Layer, s: Setting) -> Setting:
        """Cube layers take the setting (an int8 policy prices a float conv / GEMM as int8; an int8
        layer sets its own); vector kernels and conversions compute in a float format."""
        if la.op in ("qconv", "qgemm"):
            return int8_setting(s, la.attrs["q"].fmt())
        return s if la.op in ("conv", "gemm") else float_setting(s)

    def __repr__(self) -> str:
        return f"Model({self.name!r}: {len(self.layers)} layers, inputs {self.graph.inputs}, outputs {list(self.graph.outputs)})"

    # ---- arguments --------------------------------------------------------------------------------------
    def _setting(self, fn, hw, policy, strategy, search, fused, checks) -> Setting:
        hw = presets.ascend910b() if hw is None else hw
        if not isinstance(hw, HardwareConfig):
            raise InputTypeError(f"Model.{fn}: hw must be a HardwareConfig or None, got {type(hw).__name__}.")
        policy = Policy() if policy is None else policy
        if not isinstance(policy, Policy):
            raise InputTypeError(
                f"Model.{fn}: policy must be an npu_jax.Policy or None, got {type(policy).__name__}."
            )
        check_choice(f"Model.{fn}", "strategy", strategy, STRATEGIES)
        search = check_bool(f"Model.{fn}", "search", search)
        fused = check_bool(f"Model.{fn}", "fused", fused)
        return Setting(hw, policy, strategy, search, fused, checks)

    def _batch(self, fn: str, batch) -> int:
        batch = check_int(f"Model.{fn}", "batch", batch, 1)
        if self.graph.batch is not None and batch != self.graph.batch and self._fixed_reshape():
            raise InputError(
                f"Model.{fn}: the model fixes batch {self.graph.batch} in a Reshape; batch={batch} cannot be "
                f"set. Export with a symbolic batch or pass batch={self.graph.batch}."
            )
        return batch

    def _fixed_reshape(self) -> bool:
        return any(
            v.op == "Reshape" and int(self.graph.params.get(n.inputs[1], np.array([-1]))[0]) not in (0, -1)
            for v in self.plan.items
            if isinstance(v, View)
            for n in self.graph.nodes
            if n.name == v.name
        )

    # ---- timing only -----------------------------------------------------------------------------------
    def estimate(
        self,
        batch: int = 1,
        hw: HardwareConfig | None = None,
        strategy: str = "img2col",
        search: bool = False,
        fused: bool = True,
        policy: Policy | None = None,
        schedule: str | Schedule = "layer",
    ) -> NetworkReport:
        """Price every layer at ``batch`` images, timing only; returns a :class:`NetworkReport`.

        Convs by the closed-form model (``cost.predict``; equal to the emulator's timing-only run), on
        the chooser's tiling (``search=True``: ``npu_jax.search.tile_search``'s, where the model
        prices it no worse); GEMMs, pooling and vector kernels by timing-only emulator runs. Each
        distinct layer is priced once per (hw, strategy, policy, fused) and cached on the model.
        ``fused=False``: every epilogue runs as a vector kernel after its Cube kernel.
        ``schedule``: ``"layer"`` (each layer over the whole batch), ``"l2"`` (stacks of layers run
        slice by slice with their intermediates and weights kept in L2, chosen by the model:
        :mod:`npu_jax.model.schedule`; the report's ``schedule`` lists the stacks), or a
        :class:`~npu_jax.model.schedule.Schedule` of your own (:meth:`make_schedule`).
        """
        s = self._setting("estimate", hw, policy, strategy, search, fused, "none")
        batch = self._batch("estimate", batch)
        schedule = self._check_schedule("Model.estimate", schedule, batch)
        t0 = time.perf_counter(), time.process_time()
        if schedule != "layer":
            net = self._network(s)
            sched, layers = self._l2_schedule(net, s, batch, schedule)
            reports = [
                self._layer_report(la, ks, tiling, by, ls, wait) for la, ks, (tiling, by), ls, wait in layers
            ]
            return self._report("estimate", reports, s, batch, {}, t0, sched)
        reports = []
        for la in self.plan.layers:
            if la.op in CONVERSIONS:  # no kernel of its own (npu_jax.model.qkernels)
                continue
            kernels, (tiling, by), ls = self._price_layer(la, batch, s, None)
            reports.append(self._layer_report(la, kernels, tiling, by, ls))
        return self._report("estimate", reports, s, batch, {}, t0)

    # ---- the "l2" schedule (npu_jax.model.schedule) ---------------------------------------------------
    def _network(self, s: Setting) -> Network:
        net_layers = [la for la in self.plan.layers if la.op not in CONVERSIONS]
        tensors = {*self.graph.inputs, *(t for la in net_layers for t in (*la.inputs, la.output))}

        def weights(la: Layer) -> int:
            if la.weight is None:
                return 0
            isz = 1 if la.op in ("qconv", "qgemm") or s.policy.quantised else itemsize(s.policy.operand)
            bias = 0 if la.bias is None else la.bias.size * 4
            return int(la.weight.size) * isz + bias

        acts = {t: activation_bytes(self.graph, t, s.policy.output) for t in tensors}
        alone = [la.op in ALONE for la in net_layers]
        return Network(self.graph, self.plan.items, acts, [weights(la) for la in net_layers], alone)

    def _price_layer(self, la: Layer, batch: int, s: Setting, l2):
        """(kernels, (tiling, by), setting) of layer ``la`` at ``batch`` images with roles ``l2``."""
        shapes = [self.graph.shape(t, batch) for t in la.inputs]
        ls = self._layer_setting(la, s)
        price = self._adapters[la.op][0]
        if la.op in ("conv", "gemm") and ls.policy.quantised:
            price = estimate_as_int8
        kernels, tiling = price(la, shapes, ls, self._cache, l2=l2)
        return kernels, tiling, ls

    def make_schedule(
        self, batch: int, stacks, hw: HardwareConfig | None = None, policy: Policy | None = None
    ) -> Schedule:
        """A :class:`~npu_jax.model.schedule.Schedule` of your own, for ``estimate`` / ``run``:
        ``stacks`` a list of ``(layers, images)``, the number of kernel layers of each stack in order
        (``[la.name for la in report.layers]`` lists them) and the images of its slices (a divisor of
        ``batch``). GEMM and int8 QDQ layers must each be a stack of one over the whole batch. The
        working set need not fit the L2 (``Stack.fits`` says whether it does): each kernel keeps in
        L2 what its own rule keeps, and only that is priced as resident."""
        s = self._setting("make_schedule", hw, policy, "img2col", False, True, "none")
        batch = self._batch("make_schedule", batch)
        sched = make(self._network(s), self.name, batch, stacks, s.hw.l2_bytes)
        if self._fixed_reshape() and any(st.slices > 1 for st in sched.stacks):
            raise InputError(
                f"Model.make_schedule: {self.name!r} fixes its batch in a Reshape; a stack cannot run a slice "
                f"of it. Give every stack {batch} images."
            )
        return sched

    def _check_schedule(self, fn: str, schedule, batch: int):
        if isinstance(schedule, Schedule):
            if schedule.kind != "l2" or schedule.batch != batch:
                raise InputError(
                    f"{fn}: the schedule given is for batch {schedule.batch} ({schedule.kind!r}); this call's "
                    f"batch is {batch}. Make one with Model.make_schedule({batch}, ...)."
                )
            return schedule
        check_choice(fn, "schedule", schedule, SCHEDULES)
        return schedule

    def _l2_schedule(self, net: Network, s: Setting, batch: int, given="l2"):
        """The "l2" schedule's stacks (the model's choice, or ``given``, a Schedule) and, per kernel
        layer, (layer, kernels, tiling, setting, wait)."""

        def price(i, j, images):
            slices = batch // images
            per_layer = []
            for k in range(i, j):
                la = net.kernels[k]
                k0, tiling, ls = self._price_layer(la, images, s, roles_of(net, i, k, slices, False))
                k1 = []
                if slices > 1:
                    k1, _, _ = self._price_layer(la, images, s, roles_of(net, i, k, slices, True))
                per_layer.append((la, k0, k1, tiling, ls))
            return stack_rows(net, s.hw, i, j, batch, slices, per_layer)

        if isinstance(given, Schedule):
            index = {la.name: k for k, la in enumerate(net.kernels)}
            stacks = list(self._covering(net, given))
            kept = [price(index[st.layers[0]], index[st.layers[-1]] + 1, st.images)[1] for st in stacks]
        else:
            # a Reshape that fixes the batch cannot take a slice of it
            stacks, kept = choose(net, batch, s.hw.l2_bytes, price, slicing=not self._fixed_reshape())
        sched = Schedule("l2", batch, s.hw.l2_bytes, tuple(stacks))
        return sched, [r for rows in kept for r in rows]

    @staticmethod
    def _covering(net: Network, given: Schedule) -> tuple:
        """A given schedule's stacks, refused unless they cover the model's kernel layers in order."""
        if [n for st in given.stacks for n in st.layers] != [la.name for la in net.kernels]:
            raise InputError(
                "the schedule given does not cover this model's kernel layers in order; make it with "
                "Model.make_schedule on this model."
            )
        return given.stacks

    def _run_l2(self, values: dict, s: Setting, batch: int, keep: bool, kept: dict, given):
        """Run the "l2" schedule the estimate chooses (same setting, timing only) on data: each stack
        slice by slice, every kernel with the roles it was priced with. Returns (schedule, layer reports)."""
        net = self._network(s)
        if isinstance(given, Schedule):  # run as given (the coverage checked as the estimate checks it)
            sched = Schedule("l2", batch, s.hw.l2_bytes, self._covering(net, given))
        else:  # the estimate's choice (timing only)
            sched, _ = self._l2_schedule(net, dataclasses.replace(s, checks="none"), batch)
        index = {la.name: k for k, la in enumerate(net.kernels)}
        owner, cur = [], 0  # the stack each plan item runs in (views / conversions: the one before)
        starts = {index[st.layers[0]]: n for n, st in enumerate(sched.stacks)}
        k = 0
        for item in self.plan.items:
            if isinstance(item, Layer) and item.op not in CONVERSIONS:
                cur = starts.get(k, cur)
                k += 1
            owner.append(cur)
        reports = []
        for n, st in enumerate(sched.stacks):
            items = [it for it, o in zip(self.plan.items, owner) if o == n]
            i, j = index[st.layers[0]], index[st.layers[-1]] + 1
            b = st.images
            made: dict[str, list] = {}
            runs: dict[str, list] = {}
            for sl in range(st.slices):
                local = {}
                for item in items:
                    if isinstance(item, View):
                        src = (
                            local[item.input]
                            if item.input in local
                            else values[item.input][sl * b : (sl + 1) * b]
                        )
                        local[item.output] = jnp.reshape(src, self.graph.shape(item.output, b))
                        continue
                    ins = [local[t] if t in local else values[t][sl * b : (sl + 1) * b] for t in item.inputs]
                    ls = self._layer_setting(item, s)
                    roles = None
                    if item.op not in CONVERSIONS:
                        roles = roles_of(net, i, index[item.name], st.slices, sl > 0)
                    y, kernels, tiling = self._adapters[item.op][1](item, ins, ls, self._cache, l2=roles)
                    local[item.output] = y
                    runs.setdefault(item.name, []).append((kernels, tiling, ls))
                for t, v in local.items():
                    made.setdefault(t, []).append(v)
            for t, vs in made.items():
                values[t] = jnp.concatenate(vs) if len(vs) > 1 else vs[0]
            per_layer = []
            for k in range(i, j):
                la = net.kernels[k]
                r = runs[la.name]
                per_layer.append((la, r[0][0], r[1][0] if len(r) > 1 else [], r[0][1], r[0][2]))
            _, rows = stack_rows(net, s.hw, i, j, batch, st.slices, per_layer)
            # every slice's own kernels (their cycles equal, by construction: timing needs no data)
            for la, _, tiling, ls, wait in rows:
                ks = tuple(kc for kernels, _, _ in runs[la.name] for kc in kernels)
                reports.append(self._layer_report(la, ks, *tiling, ls, wait))
            if keep:
                for it in items:
                    if not isinstance(it, View):
                        kept[it.output] = self._onnx_value(it.output, values[it.output])
        return sched, reports

    def fusion_saving(self, batch: int = 1, hw: HardwareConfig | None = None, **kw) -> FusionSaving:
        """``estimate(fused=False)`` beside ``estimate(fused=True)``: per layer and in total, cycles and
        GM bytes (``.table()``, ``.as_dict()``)."""
        return fusion_saving(
            self.estimate(batch, hw, fused=False, **kw), self.estimate(batch, hw, fused=True, **kw)
        )

    # ---- with data -------------------------------------------------------------------------------------
    def run(
        self,
        x,
        hw: HardwareConfig | None = None,
        policy: Policy | None = None,
        strategy: str = "img2col",
        fused: bool = True,
        keep: bool = False,
        search: bool = False,
        checks=None,
        schedule: str | Schedule = "layer",
    ):
        """Run the network on data through the emulator's kernels. Returns ``(outputs, report)``.

        Args:
            x: the input array (a single-input model) or a dict by input name; NCHW.
            hw, policy, strategy, fused, search: as :meth:`estimate` (``policy`` None = the
                hardware's default: fp16 operands, fp32 accumulation, fp16 activations).
            keep: keep every layer's output in ``report.tensors`` by its ONNX tensor name.
            checks: the sanitizers of every kernel (None = the process default).
            schedule: ``"layer"``, ``"l2"`` or a Schedule, as :meth:`estimate` (the "l2" schedule's
                stacks and slices are the estimate's; each slice runs on its images of ``x``).

        Returns:
            outputs: a dict by graph output name (numpy arrays), and a :class:`NetworkReport` whose
            layers are the same kernels :meth:`estimate` prices (their cycles are equal).
        """
        s = self._setting("run", hw, policy, strategy, search, fused, checks)
        if s.policy.quantised and not self.quantised:
            raise InputError(
                f"Model.run: {self.name!r} is a float network; an int8 run needs its scales. Quantise it "
                f"first (onnxruntime.quantization.quantize_static, or `npu-jax model NET --policy int8`), "
                f"or price it as int8 with Model.estimate(policy=...)."
            )
        keep = check_bool("Model.run", "keep", keep)
        values = self._inputs(x)
        batch = next(iter(values.values())).shape[0]
        schedule = self._check_schedule("Model.run", schedule, batch)
        t0 = time.perf_counter(), time.process_time()
        reports, kept = [], {}
        if schedule != "layer":
            sched, reports = self._run_l2(values, s, batch, keep, kept, schedule)
            outputs = {t: self._onnx_value(t, values[t]) for t in self.graph.outputs}
            return outputs, self._report("run", reports, s, batch, kept, t0, sched)
        for item in self.plan.items:
            if isinstance(item, View):
                values[item.output] = jnp.reshape(values[item.input], self.graph.shape(item.output, batch))
                continue
            ls = self._layer_setting(item, s)
            y, kernels, (tiling, by) = self._adapters[item.op][1](
                item, [values[t] for t in item.inputs], ls, self._cache
            )
            values[item.output] = y
            if item.op not in CONVERSIONS:
                reports.append(self._layer_report(item, kernels, tiling, by, ls))
            if keep:
                kept[item.output] = self._onnx_value(item.output, y)
        outputs = {t: self._onnx_value(t, values[t]) for t in self.graph.outputs}
        return outputs, self._report("run", reports, s, batch, kept, t0)

    def _onnx_value(self, tensor: str, v) -> np.ndarray:
        """A value as ONNX has it: an int8-domain activation back in its stored type (uint8: + 128)."""
        q = self.graph.quant.get(tensor)
        return np.asarray(v) if q is None else q.to_onnx(v)

    def _inputs(self, x) -> dict:
        names = list(self.graph.inputs)
        if not isinstance(x, dict):
            if len(names) != 1:
                raise InputError(f"Model.run: the model has inputs {names}; pass x as a dict by input name.")
            x = {names[0]: x}
        if set(x) != set(names):
            raise InputError(f"Model.run: x has inputs {sorted(x)} but the model's are {names}.")
        out, batches = {}, set()
        for name, v in x.items():
            a = jnp.asarray(v)
            want = self.graph.inputs[name][1:]
            if a.ndim != len(want) + 1 or tuple(a.shape[1:]) != tuple(want):
                raise InputError(
                    f"Model.run: input {name!r} must have shape (batch, {', '.join(map(str, want))}), got {a.shape}."
                )
            batches.add(a.shape[0])
            q = self.graph.quant.get(name)  # an integer input: its ONNX type to the int8 domain
            out[name] = a if q is None else jnp.asarray(q.from_onnx(np.asarray(a)))
        if len(batches) != 1:
            raise InputError(f"Model.run: the inputs disagree on the batch: {sorted(batches)}.")
        self._batch("run", batches.pop())
        return out

    # ---- reports ---------------------------------------------------------------------------------------
    def _layer_report(self, la: Layer, kernels, tiling, by, s: Setting, wait: int = 0) -> LayerReport:
        return LayerReport(
            name=la.name,
            op=la.op,
            fused=la.fused,
            steps=tuple(map(str, la.steps)),
            inputs=la.inputs,
            output=la.output,
            tiling=tiling,
            tiling_by=by,
            kernels=tuple(kernels),
            flops=sum(k.flops for k in kernels if k.label in ("conv", "gemm")),
            hw=s.hw,
            operand=s.policy.operand,
            refused=tuple(
                f"{d.op}:{d.node}: {d.why}" for d in self.plan.decisions if d.layer == la.name and not d.fused
            ),
            wait_cycles=wait,
        )

    def _report(self, mode, layers, s: Setting, batch, tensors, t0, schedule=None) -> NetworkReport:
        if self.quantised:  # the int8 layers' figures: int8 FLOPs against the int8 peak
            s = dataclasses.replace(s, policy=Policy(operand="int8", output="int8"))
        return NetworkReport(
            name=self.name,
            mode=mode,
            layers=tuple(layers),
            hw=s.hw,
            batch=batch,
            operand=s.policy.operand,
            strategy=s.strategy,
            fused=s.fused,
            decisions=self.plan.decisions,
            tensors=tensors,
            wall_s=time.perf_counter() - t0[0],
            cpu_s=time.process_time() - t0[1],
            schedule=schedule if schedule is not None else Schedule("layer", batch, s.hw.l2_bytes),
        )


def load(model) -> Model:
    """Load an ONNX model (a path or an ``onnx.ModelProto``) and plan its lowering.

    Refuses, naming the node, any op other than :data:`npu_jax.model.graph.SUPPORTED` and any
    activation shape that is dynamic beyond the batch dimension. BatchNormalization (and Mul / Add by a
    per-channel constant) is folded into the preceding Conv or Gemm; element-wise followers are fused
    by the planner's rules (``Model.plan.table()`` lists every decision).
    """
    g = quant.lower(graph_mod.build(graph_mod.read(model)))
    return Model(g, plan(g))


__all__ = ["Model", "load"]

"""Epilogues: the element-wise chain a Cube kernel applies to its accumulator on the way out.

A chain is a short tuple of :class:`Step` (bias add, ReLU / leaky ReLU / clipped ReLU, abs, residual
add of a second tensor, cast; for int8 operands the dequantisation). Where it runs depends on the chip:

* **Fixpipe** (separated chips, 910B): L0C -> GM in one instruction that adds the bias (fp32),
  applies one activation and converts to the output format -- in that fixed order. The longest
  prefix of the chain with that shape is fused; anything after it (a residual add: the Cube core
  of a 910B has no UB) runs as a vector kernel on the AIV cores, through GM.
* **UB** (coupled chips, 910/310P): L0C -> UB on the Vector pipe, each step a vector instruction
  on the UB tile (in ``policy.vector`` format), UB -> GM on MTE3. The whole chain fuses.

An int8 kernel's int32 accumulator leaves L0C scaled (``dequant``: one fp32 scale per output channel
and the int8 output's zero point, :func:`npu_jax.requantize`'s formula): in the Fixpipe's quantisation
stage on the 910B, in the L0C -> UB conversion on the 910 / 310P (the vector unit's deq conversion).
Its scale row is the chain's per-channel row, loaded as a bias row is. On the coupled chips an fp16
output may go on through a **residual chain** (:data:`INT8_CHAIN`: the residual add and activations
after it) on the dequantised fp16 tile in UB before MTE3 writes it: the vendor's fused
conv + dequant + vadd + ReLU kernels of its int8 networks (CANN's UB-fusion passes).

This module holds the chain's description, the split and the buffers it needs;
``kernels/epilogue.py`` issues its instructions, :mod:`npu_jax.cost` charges exactly the same ones,
and ``fusion`` is the user-facing layer (API, unfused baseline, analysis).
"""

from __future__ import annotations

import dataclasses

from npu_jax.errors import check_number

ACTIVATIONS = ("relu", "leaky_relu", "clipped_relu")
STEP_OPS = ("bias", "residual", "cast", "abs", "dequant") + ACTIVATIONS
# the steps an int8 kernel's dequantised fp16 tile may go through in UB (coupled chips, fp16 output)
INT8_CHAIN = ("residual", "abs") + ACTIVATIONS
FORMATS = ("fp16", "bf16", "fp32")


@dataclasses.dataclass(frozen=True)
class Step:
    """One element-wise step: ``op`` in :data:`STEP_OPS`; ``arg`` is the leaky slope, the clip
    ceiling, the cast's format or the dequantisation's output zero point (an int, int8 outputs).

    Example:
        >>> Step("leaky_relu", 0.1)
        Step(op='leaky_relu', arg=0.1)
    """

    op: str
    arg: float | str | None = None

    def __post_init__(self):
        if self.op not in STEP_OPS:
            raise ValueError(f"epilogue step must be one of {STEP_OPS}, got {self.op!r}.")
        if self.op == "leaky_relu":
            if self.arg is None:
                object.__setattr__(self, "arg", 0.01)
            object.__setattr__(self, "arg", check_number("step", "leaky_relu slope", self.arg))
        elif self.op == "clipped_relu":
            if self.arg is None:
                object.__setattr__(self, "arg", 6.0)
            object.__setattr__(
                self, "arg", check_number("step", "clipped_relu ceiling", self.arg, 0.0, open_lo=True)
            )
        elif self.op == "dequant":
            off = 0 if self.arg is None else self.arg
            if isinstance(off, bool) or not isinstance(off, int) or not -128 <= off <= 127:
                raise ValueError(
                    f"dequant's offset (the int8 output's zero point) is an int in [-128, 127], got {off!r}."
                )
            object.__setattr__(self, "arg", off)
        elif self.op == "cast":
            if self.arg not in FORMATS:
                raise ValueError(
                    f"cast needs a format in {FORMATS}, e.g. ('cast', 'bf16'); got {self.arg!r}."
                )
        elif self.arg is not None:
            raise ValueError(f"epilogue step {self.op!r} takes no argument, got {self.arg!r}.")

    def __str__(self) -> str:
        return (
            self.op
            if self.arg is None
            else f"{self.op}({self.arg})"
            if self.op == "dequant"
            else f"{self.op}({self.arg:g})"
            if not isinstance(self.arg, str)
            else f"{self.op}({self.arg})"
        )


def canonical_steps(epilogue) -> tuple[Step, ...]:
    """Steps from a lenient spec: ``"relu"``, ``["bias", "relu"]``, ``[("leaky_relu", 0.1)]``,
    ``Step`` objects, or None / ``[]`` for none. Bias, residual and cast may appear once each;
    cast must be last (it sets the format of what leaves the chip)."""
    if epilogue is None:
        return ()
    if isinstance(epilogue, (str, Step)) or (
        isinstance(epilogue, tuple)
        and epilogue
        and isinstance(epilogue[0], str)
        and len(epilogue) == 2
        and not isinstance(epilogue[1], str | tuple | Step)
    ):
        epilogue = [epilogue]
    steps = []
    for s in epilogue:
        if isinstance(s, Step):
            steps.append(s)
        elif isinstance(s, str):
            steps.append(Step(s))
        elif isinstance(s, (tuple, list)) and len(s) == 2 and isinstance(s[0], str):
            steps.append(Step(s[0], s[1]))
        else:
            raise ValueError(
                f"epilogue steps are names like 'relu' or pairs like ('leaky_relu', 0.1); got {s!r}."
            )
    for op in ("bias", "residual", "cast"):
        if sum(s.op == op for s in steps) > 1:
            raise ValueError(f"epilogue has {op!r} more than once: {[str(s) for s in steps]}.")
    if any(s.op == "cast" for s in steps[:-1]):
        raise ValueError(f"'cast' must be the last epilogue step, got {[str(s) for s in steps]}.")
    return tuple(steps)


def fixpipe_prefix(steps: tuple[Step, ...]) -> int:
    """How many leading steps one Fixpipe can apply: bias, then one activation, then cast."""
    phase = {"bias": 0, "relu": 1, "leaky_relu": 1, "clipped_relu": 1, "cast": 2}
    last = -1
    for i, s in enumerate(steps):
        ph = phase.get(s.op)
        if ph is None or ph <= last:
            return i
        last = ph
    return len(steps)


def final_format(steps: tuple[Step, ...], output: str) -> str:
    """The format the chain's result is stored in: the cast's, else the policy's output."""
    return steps[-1].arg if steps and steps[-1].op == "cast" else output


@dataclasses.dataclass(frozen=True)
class EpiloguePlan:
    """The part of a chain that runs inside a Cube kernel, and how.

    Attributes:
        steps: the fused steps, in order.
        where: ``"fixpipe"`` (910B) or ``"ub"`` (coupled chips).
        vector: format of the UB tile the vector steps work on (``policy.vector``).
        output: format the kernel writes to GM.
        residual: format of the residual tensor in GM: another layer's activation, stored as that
            layer wrote it (``policy.output``; the vendor's compiled networks keep activations fp16
            between layers). MTE2 reads it as it is and, where it differs from ``vector``, a VCast
            widens it in UB before the add. None = ``vector`` (a residual given in the vector format).
    """

    steps: tuple[Step, ...]
    where: str
    vector: str
    output: str
    residual: str | None = None

    def has(self, op: str) -> bool:
        return any(s.op == op for s in self.steps)

    @property
    def bias_format(self) -> str:
        """Bias in GM: fp32 for the Fixpipe (its bias table is fp32), the vector format in UB."""
        return "fp32" if self.where == "fixpipe" else self.vector

    @property
    def row(self) -> str | None:
        """The GM tensor of the chain's per-channel row: ``"bias"``, ``"scale"`` (the dequantisation's
        fp32 scales) or None."""
        return "bias" if self.has("bias") else "scale" if self.has("dequant") else None

    @property
    def row_format(self) -> str:
        """The row's format in GM and on chip: the bias's, or fp32 for the scales."""
        return "fp32" if self.row == "scale" else self.bias_format

    @property
    def offset(self) -> int:
        """The dequantisation's output zero point (0 without one)."""
        return next((s.arg for s in self.steps if s.op == "dequant"), 0)

    @property
    def int8_chain(self) -> bool:
        """An int8 kernel's dequantised fp16 tile goes on through vector steps in UB (the residual
        chain); else its one activation, if any, rides in the deq conversion / Fixpipe."""
        return self.has("dequant") and self.has("residual")

    def deq_args(self) -> dict:
        """The activation the dequantisation itself applies (none under a residual chain: there the
        activations follow the add, on the vector unit)."""
        return {} if self.int8_chain else self.fixpipe_args()

    @property
    def needs_out_tile(self) -> bool:
        return self.where == "ub" and self.output != self.vector and not self.has("dequant")

    @property
    def residual_format(self) -> str:
        """The residual's format in GM (and in its UB tile, as MTE2 copies it)."""
        return self.vector if self.residual is None else self.residual

    @property
    def widens_residual(self) -> bool:
        """The residual tile is converted to the vector format (one VCast) before the add."""
        return self.where == "ub" and self.has("residual") and self.residual_format != self.vector

    def fixpipe_args(self) -> dict:
        """Fixpipe keyword arguments of the fused activation."""
        for s in self.steps:
            if s.op == "relu":
                return {"activation": "relu"}
            if s.op == "leaky_relu":
                return {"activation": "leaky_relu", "alpha": s.arg}
            if s.op == "clipped_relu":
                return {"activation": "relu", "clip": s.arg}
        return {}

    def vector_ops(self) -> list[tuple[str, str]]:
        """The UB path's vector instructions as (op, role): role ``bias`` / ``residual`` name the
        second source; ``widen_residual`` converts the residual tile to the vector format (into its
        own tile); ``cast`` writes the output tile; the rest work in place. The dequantisation is
        the L0C -> UB conversion itself: no vector instruction (nor its activation, except under a
        residual chain, where the steps after it are the vector's)."""
        ops = []
        if self.has("dequant") and not self.int8_chain:  # the activation rides in the deq conversion
            return ops
        for s in self.steps:
            if s.op == "bias":
                ops.append(("VAdd", "bias"))
            elif s.op == "residual":
                if self.widens_residual:
                    ops.append(("VCast", "widen_residual"))
                ops.append(("VAdd", "residual"))
            elif s.op == "relu":
                ops.append(("VRelu", "inplace"))
            elif s.op == "leaky_relu":
                ops.append(("VLeakyRelu", "inplace"))
            elif s.op == "abs":
                ops.append(("VAbs", "inplace"))
            elif s.op == "clipped_relu":
                ops += [("VMaxs", "inplace"), ("VMins", "inplace")]
        if self.needs_out_tile:
            ops.append(("VCast", "cast"))
        return ops

    def __str__(self) -> str:
        return " -> ".join(str(s) for s in self.steps) + f" [{self.where}]"


def split(steps: tuple[Step, ...], hw, policy, fused: bool, offset: int = 0):
    """(plan of the fused part or None, steps left for a vector kernel, format of the tensor the
    Cube kernel writes, format of the final result).

    For int8 operands the chain is the dequantisation (``offset``: the int8 output's zero point) and
    at most one activation, fused in it whatever ``fused`` says: an int32 accumulator leaves L0C
    scaled (the Fixpipe's quantisation and activation stages on the 910B, the L0C -> UB deq conversion
    with its ReLU on the 910 / 310P) or as int32. On a coupled chip with fp16 output and ``fused``, the
    chain may be a residual chain instead (:data:`INT8_CHAIN`, a residual add among them): the deq
    conversion writes the fp16 tile and the vector unit adds the residual (fp16 in GM) and applies the
    rest, in fp16."""
    if policy.quantised:
        if steps and int8_chain_fuses(steps, hw, policy, fused):
            e = EpiloguePlan((Step("dequant", offset),) + tuple(steps), "ub", "fp16", "fp16", "fp16")
            return e, (), "fp16", "fp16"
        if len(steps) > 1 or any(st.op not in ACTIVATIONS for st in steps):
            raise ValueError(
                f"epilogue steps {[str(st) for st in steps]} with int8 operands: an int8 kernel's way out is its "
                "(re)quantisation with at most one activation (relu, leaky_relu, clipped_relu) fused in it, or on "
                "a 910 / 310P with output 'fp16' a residual chain (a residual add and activations, fused=True); "
                "run the other steps on its fp16 output."
            )
        if policy.output == "int32":
            if steps:
                raise ValueError(
                    "an int32 output is the exact sums: an activation needs output 'fp16' or 'int8'."
                )
            return None, (), "int32", "int32"
        where = "ub" if hw.coupled else "fixpipe"
        e = EpiloguePlan((Step("dequant", offset),) + tuple(steps), where, policy.vector, policy.output)
        return e, (), policy.output, policy.output
    final = final_format(steps, policy.output)
    if not fused or not steps:
        return None, steps, policy.output, final
    if hw.coupled:
        return EpiloguePlan(steps, "ub", policy.vector, final, policy.output), (), final, final
    k = fixpipe_prefix(steps)
    if k == 0:
        return None, steps, policy.output, final
    on, rest = steps[:k], steps[k:]
    mid = final_format(on, policy.output)
    return EpiloguePlan(on, "fixpipe", policy.vector, mid), rest, mid, final


def int8_chain_fuses(steps: tuple[Step, ...], hw, policy, fused: bool) -> bool:
    """Whether an int8 kernel takes ``steps`` as a residual chain after its dequantisation: a coupled
    chip (a UB beside the Cube), fp16 output, ``fused``, a residual add and nothing but
    :data:`INT8_CHAIN` steps."""
    return (
        policy.quantised
        and fused
        and hw.coupled
        and policy.output == "fp16"
        and any(st.op == "residual" for st in steps)
        and all(st.op in INT8_CHAIN for st in steps)
    )


# ---- buffers and flags of the fused chain ------------------------------------------------------------------------
def allocate_epilogue(plan, e: EpiloguePlan, m_t: int, n: int, row_cols: int) -> dict:
    """Buffers of the fused chain. ``row_cols``: bias values a core keeps (its Cout group)."""
    a = {}
    if e.where == "fixpipe":
        if e.row is not None:
            a["row"] = plan.alloc("L1", f"{e.row}_l1", (1, row_cols), "fp32")
        return a
    # the dequantisation writes the output's format straight into the UB tile
    a["ub"] = plan.alloc("UB", "y_ub", (m_t, n), e.output if e.has("dequant") else e.vector)
    if e.row is not None:
        a["row"] = plan.alloc("UB", f"{e.row}_ub", (1, row_cols), e.row_format)
    if e.has("residual"):
        a["res"] = plan.alloc("UB", "res_ub", (m_t, n), e.residual_format)
        if e.widens_residual:
            a["res_v"] = plan.alloc("UB", "res_v_ub", (m_t, n), e.vector)
    if e.needs_out_tile:
        a["out"] = plan.alloc("UB", "out_ub", (m_t, n), e.output)
    return a


def epilogue_slot_flags(e: EpiloguePlan | None) -> list[tuple[str, int]]:
    """Extra "slot free" flags: the residual tile's (V -> MTE2)."""
    return [("V_MTE2", 0)] if e is not None and e.where == "ub" and e.has("residual") else []

"""The instruction set: every instruction of the machine, declared once.

Each :class:`~npu_jax.core.isa.decl.Instr` below gives the pipe, the memories read and written,
the counters charged, the cost rule (``npu_jax/hw/costs.py``) and the data semantics
(``move.py``, ``cube.py``, ``vector.py``). ``issue`` (``execute.py``) runs any of them; the public
instruction functions (``api.py``) only pick the declaration their operands call for. The op
names of the trace, ``OPS``, are the declarations' names in this order.
"""

from __future__ import annotations

import functools

from npu_jax.core.isa import cube, move, vector
from npu_jax.core.isa.decl import Instr
from npu_jax.hw import costs

# ---- moves: DataCopy (MTE2 / MTE3), LoadData 2D and Load3D (MTE1) -------------------------------
DATA_COPY_IN = Instr(
    "DataCopy",
    "MTE2",
    reads=("GM",),
    writes=("L1", "UB"),
    counts=("GM->L1", "GM->UB", "HBM->L2"),
    cost=costs.dma_in,
    semantics=move.data_copy_in,
)
DATA_COPY_OUT = Instr(
    "DataCopy",
    "MTE3",
    reads=("UB",),
    writes=("GM",),
    counts=("UB->GM", "L2->HBM"),
    cost=costs.dma_out,
    semantics=move.data_copy_out,
)
LOAD2D_L0A = Instr(
    "LoadData2D",
    "MTE1",
    reads=("L1",),
    writes=("L0A",),
    counts=("L1->L0A",),
    cost=costs.load_l0a,
    semantics=move.load2d,
)
LOAD2D_L0B = Instr(
    "LoadData2D",
    "MTE1",
    reads=("L1",),
    writes=("L0B",),
    counts=("L1->L0B",),
    cost=costs.load_l0b,
    semantics=move.load2d,
)
LOAD3D = Instr(
    "Load3D",
    "MTE1",
    reads=("L1",),
    writes=("L0A",),
    counts=("L1->L0A",),
    cost=costs.load_l0a,
    semantics=move.load3d,
)

# ---- the Cube, and leaving L0C ------------------------------------------------------------------
MMAD = Instr(
    "Mmad",
    "M",
    reads=("L0A", "L0B", "L0C"),
    writes=("L0C",),
    counts=("flops", "flops_issued"),
    cost=costs.mmad,
    semantics=cube.mmad,
)
FIXPIPE_GM = Instr(
    "Fixpipe",
    "FIX",
    reads=("L0C", "L1"),  # L1: the bias row
    writes=("GM",),
    counts=("L0C->GM", "L2->HBM"),
    cost=costs.fixpipe_gm,
    semantics=cube.fixpipe_gm,
)
FIXPIPE_L1 = Instr(
    "Fixpipe",
    "FIX",
    reads=("L0C", "L1"),
    writes=("L1",),
    counts=("L0C->L1",),
    cost=costs.fixpipe_l1,
    semantics=cube.fixpipe_l1,
)
L0C_TO_UB = Instr(
    "L0CToUB",
    "V",
    reads=("L0C", "UB"),  # UB: the dequantisation's scale row
    writes=("UB",),
    counts=("L0C->UB",),
    cost=costs.l0c_to_ub,
    semantics=cube.l0c_to_ub,
)

# ---- the Vector unit: one declaration per op, sharing one semantics ------------------------------
VECTOR = {
    op: Instr(
        op,
        "V",
        reads=("UB",),
        writes=("UB",),
        counts=("vector_bytes",),
        cost=costs.vector,
        semantics=functools.partial(vector.vector, op=op),
    )
    for op in vector.VECTOR_OPS
}

# the lane form (repeats, masks, strides: ``lanes.py``): every op of ``vecops.OPS`` and VCast, VDup
# (an op of the count form above shares its name, so the trace's op ids of those stay put)
VECTOR_LANES = {
    op: Instr(
        op,
        "V",
        reads=("UB",),
        writes=("UB",),
        counts=("vector_bytes",),
        cost=costs.vector_op,
        semantics=functools.partial(vector.lanes_vector, op=op),
    )
    for op in vector.LANE_OPS
}

GET_VALUE = Instr(
    "GetValue", "S", reads=("UB",), writes=(), counts=(), cost=costs.scalar, semantics=vector.scalar_get
)
SET_VALUE = Instr(
    "SetValue", "S", reads=(), writes=("UB",), counts=(), cost=costs.scalar, semantics=vector.scalar_set
)

SCALAR = Instr("Scalar", "S", reads=(), writes=(), counts=(), cost=costs.scalar, semantics=vector.scalar)

DECLARATIONS: tuple[Instr, ...] = (
    DATA_COPY_IN,
    DATA_COPY_OUT,
    LOAD2D_L0A,
    LOAD2D_L0B,
    LOAD3D,
    MMAD,
    FIXPIPE_GM,
    FIXPIPE_L1,
    L0C_TO_UB,
    *VECTOR.values(),
    SCALAR,
    *VECTOR_LANES.values(),
    GET_VALUE,
    SET_VALUE,
)
# The trace's op names (its recorded op ids index this tuple), in declaration order.
OPS = tuple(dict.fromkeys(i.name for i in DECLARATIONS))
OP_INDEX = {o: i for i, o in enumerate(OPS)}

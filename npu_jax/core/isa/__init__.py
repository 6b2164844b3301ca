"""The instruction set, declared once: one :class:`Instr` per instruction, one :func:`issue` for all.

* ``decl.py`` -- what a declaration is (pipe, reads, writes, counters, cost rule, semantics);
* ``table.py`` -- the declarations of every instruction, and the trace's op names ``OPS``;
* ``execute.py`` -- :func:`issue`, which runs any declaration and charges its pipe;
* ``move.py``, ``cube.py``, ``vector.py`` -- the data semantics; ``data.py`` the data path they share;
* ``api.py`` -- the public instruction functions (the methods of ``Core``).

Costs are rules of ``npu_jax/hw/costs.py``: no cycle formula is written here.
"""

from npu_jax.core.isa.api import data_copy, fixpipe, l0c_to_ub, load2d, load3d, mmad, scalar, vector
from npu_jax.core.isa.data import View
from npu_jax.core.isa.decl import Effect, Instr, hw_numbers
from npu_jax.core.isa.execute import charge, count, issue
from npu_jax.core.isa.move import Load3DGeometry, img2col_tile
from npu_jax.core.isa.table import DECLARATIONS, OP_INDEX, OPS, VECTOR, VECTOR_LANES

__all__ = [
    "DECLARATIONS",
    "Effect",
    "Instr",
    "Load3DGeometry",
    "OPS",
    "OP_INDEX",
    "VECTOR",
    "VECTOR_LANES",
    "View",
    "charge",
    "count",
    "data_copy",
    "fixpipe",
    "hw_numbers",
    "img2col_tile",
    "issue",
    "l0c_to_ub",
    "load2d",
    "load3d",
    "mmad",
    "scalar",
    "vector",
]

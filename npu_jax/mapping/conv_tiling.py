"""The Conv2D strategies (what each does structurally) and :class:`ConvTiling`, its tile sizes."""

from __future__ import annotations

import dataclasses

from npu_jax.errors import TilingError
from npu_jax.hw.config import FRACTAL_ROWS
from npu_jax.mapping.pytree import check_flags, check_ints, register
from npu_jax.mapping.tiling_bound import bound_of

STRATEGIES = ("output_tiled", "input_tiled", "relayout", "img2col")


@dataclasses.dataclass(frozen=True)
class StrategySpec:
    """What a strategy does, structurally."""

    reuse_input: bool  # input tile fetched once per spatial tile, reused by all Cout blocks
    nc1hwc0_source: bool  # input relaid out to NC1HWC0 (and weights K-major) in GM first
    deep_k: bool  # Mmads k_l0 deep over the whole reduction vs one (c1, tap) fractal each
    resident_weights_allowed: bool  # weights may stay in L1 across tiles


# Every strategy may ping-pong L1 and L0 (``l1_stages`` / ``l0_stages``): each is the best kernel of
# its idea, and they differ only in what they move and how they feed the Cube.
SPECS = {
    "output_tiled": StrategySpec(False, False, False, False),
    "input_tiled": StrategySpec(True, False, False, True),
    "relayout": StrategySpec(True, True, False, True),
    "img2col": StrategySpec(True, True, True, True),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConvTiling:
    """Tile sizes of the Conv2D kernel (vendor vocabulary in brackets).

    A pytree: every field is a leaf, so tilings stack (``jax.tree.map(lambda *a: jnp.stack(a),
    *tilings)``) and pass through ``jax.vmap`` / ``jax.jit``; :func:`npu_jax.cost.cycles` prices a
    stacked or traced one (the search's batches are this type). The checks below run on concrete
    values (ints, or arrays entry by entry) and skip traced ones. A kernel (``make_plan``) takes
    its buffers' shapes from the tiling, so it needs Python ints, unless a concrete tiling bound
    (:meth:`ConvTiling.bound`, ``tiling_bound=``) fixes them: the emulator's timing-only run then
    takes a traced tiling too (``npu_jax.conv2d``).

    Attributes:
        ho, wo: output tile rows and cols [hoL1, woL1]; L0C holds round16(ho*wo) x n fp32.
        n: Cout block [nL0 = nBL1], a multiple of 16.
        cin1: input-channel blocks (of C0) per weights part in L1 [kBL1 / (kh kw C0)].
        k_l0: Mmad depth [kL0], a multiple of C0; the fractal strategies use k_l0 = C0.
        weights_resident: all weights loaded into L1 once per core and kept.
        l1_stages, l0_stages: 1 (serial) or 2 (ping-pong) [pBufferFlag].
        cores: cores to use (None = the preset's, capped by the work available).
        cout_split: core groups along Cout: the cores form a (spatial x cout_split) grid, each
            group owning a contiguous range of Cout blocks (and only their weights).
    """

    ho: int
    wo: int
    n: int
    cin1: int
    k_l0: int
    weights_resident: bool = False
    l1_stages: int = 1
    l0_stages: int = 1
    cores: int | None = None
    cout_split: int = 1

    def __post_init__(self):
        # each check runs on concrete values (ints, or arrays entry by entry) and skips traced ones
        for name in ("ho", "wo", "n", "cin1", "k_l0", "cout_split"):
            check_ints(
                "ConvTiling", name, getattr(self, name), lambda a: a > 0, "a positive int", TilingError
            )
        check_ints(
            "ConvTiling",
            "n (Cout block)",
            self.n,
            lambda a: a % FRACTAL_ROWS == 0,
            f"a multiple of {FRACTAL_ROWS}",
            TilingError,
            " (whole fractals)",
        )
        check_flags("ConvTiling", "weights_resident", self.weights_resident, TilingError)
        for name in ("l1_stages", "l0_stages"):
            check_ints(
                "ConvTiling", name, getattr(self, name), lambda a: (a == 1) | (a == 2), "1 or 2", TilingError
            )
        if self.cores is not None:
            check_ints(
                "ConvTiling", "cores", self.cores, lambda a: a >= 1, "None or an int >= 1", TilingError
            )

    @staticmethod
    def bound(tilings) -> ConvTiling:
        """The smallest tiling bound covering ``tilings`` (a list of ConvTilings, or one stacked
        ConvTiling whose fields carry a leading axis): the largest of each field (``ho wo n cin1
        k_l0``, the stages, ``cout_split``; ``weights_resident`` if any is) and the batch's shared
        ``cores`` (a batch that mixes it raises). Pass it as ``tiling_bound=`` to run the batch
        under ``jax.vmap`` in one compiled timing-only program (``npu_jax.conv2d``)."""
        return bound_of(ConvTiling, tilings)


register(ConvTiling)

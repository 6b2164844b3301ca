"""The kernel being run: the one object every ``asc`` call reads, in one of two passes.

A launch calls the kernel function twice (``launch.py``):

1. the **plan** pass runs it with no machine underneath: ``init_buffer`` and ``LocalMemAllocator``
   record what the kernel asks of each buffer, data moves record how they see each GM argument
   (flat, or as rows of a pitch for the Cube's ND <-> NZ copies); every other call does nothing.
   From this the launch builds the static allocation plan and GM specs a ``Core`` needs;
2. the **run** pass traces it on the core (``vmap`` over blocks, one XLA program): every call
   issues the existing instructions of ``npu_jax.core`` on ``run.core``, and ``asc.loop`` threads
   the core and the queues' state through a ``fori_loop``.

Both passes see the same Python control flow (the scalars are static), so the n-th
``init_buffer`` of the run pass is the n-th of the plan. Trace-time checks of the vendor's rules
(queue states, alignment, counts) become findings here, at the user's line (``finding``).
"""

from __future__ import annotations

import dataclasses
import threading

from npu_jax.core.checks.sites import caller
from npu_jax.core.findings import Finding

PLAN, RUN = "plan", "run"

# public: pyasc's ``asc.runtime.config`` (the submodule); the rest is the launch's own state
__all__ = ["config"]


class AscError(ValueError):
    """A kernel broke a rule of the vendor's programming model that has no run to wait for (a queue
    used out of order, a buffer over capacity): raised at the call, naming it and its line."""


@dataclasses.dataclass
class BufferRequest:
    """What one ``init_buffer`` / ``alloc`` asked for (the plan pass), and its allocation (the run)."""

    index: int
    kind: str  # "que", "tbuf" or "static"
    buffer: str  # UB, L1, L0A, L0B, L0C
    position: object
    num: int
    nbytes: int  # per buffer, rounded up to 32 B
    where: str
    dtype: object = None  # the DType it is used as (first use)
    shape: tuple | None = None  # a Cube-side tensor's logical shape (first shaped use)
    fmt: str = "ND"
    addr: int | None = None  # a fixed byte address in the buffer (asc.local_tensor); None: the next free
    dtypes: set = dataclasses.field(default_factory=set)  # every type it is used as (two or more: bytes)

    @property
    def raw(self) -> bool:
        """Used as more than one type (``reinterpret_cast``): the core stores it as bytes."""
        return len(self.dtypes) > 1


@dataclasses.dataclass
class GmUse:
    """How the kernel addresses one GM argument: a pitch (row length) when a Cube copy sees it as rows."""

    pitch: int | None = None
    where: str = ""
    written: bool = False
    l2_bypass: bool = False  # SetL2CacheHint(CACHE_MODE_DISABLE) on a GlobalTensor of it
    atomic: str | None = None  # written by atomic copies (SetAtomicAdd / Max / Min): "add", "max", "min"


class KernelRun:
    """The state of one launch's pass: the mode, the machine (run pass), the plan, the findings."""

    # called as on_operand(tensor, pipe) where a LocalTensor becomes an instruction's operand, in both
    # passes (pyasc's insert_sync: npu_jax/asc/pyasc/auto.py); None: nothing to do
    on_operand = None

    def __init__(
        self, mode: str, hw, *, n_blocks: int, gm_args: dict, plan=None, allocs=None, core_kind="vector"
    ):
        self.mode = mode
        self.hw = hw
        self.n_blocks = n_blocks
        self.gm_args = gm_args  # name -> (flat size, DType)
        self.core_kind = core_kind
        self.requests: list[BufferRequest] = [] if plan is None else plan.requests
        self.gm_use: dict[str, GmUse] = {} if plan is None else plan.gm_use
        self.allocs = allocs or {}  # request index -> Alloc (run pass)
        self.n_requested = 0  # init_buffer calls seen so far (matched to the plan by order)
        self.events: dict[str, int] = {}  # event pair -> ids handed to queues so far
        self.core = None  # the Core (run pass)
        self.state: dict = {}  # queue state arrays, carried by asc.loop
        self.queues: list = []  # TQue objects of this pass, in creation order
        self.findings: list[Finding] = []
        self.loop_depth = 0
        self.eager = False
        self.block = 0
        self.pool = (
            None if plan is None else plan.pool
        )  # the high-level calls' temporaries (pipe.framework_buffer)
        self.xflags: dict = (
            {} if plan is None else plan.xflags
        )  # cross-core flag id -> its set and wait pipes
        self.atomic = None  # SetAtomicAdd / Max / Min on copies to GM (xcore.py): "add", "max", "min" or None
        self.decisions: list = []  # what Python asked of the block index (blockidx.py): recorded, replayed
        self.decision_i = 0
        self.mask_mode = None  # asc.MaskMode of the vector mask (None: NORMAL), set_mask_count / _norm
        self.vector_mask = None  # the mask of the calls with is_set_mask=False (None: every lane)
        # a value read into a scalar (get_value): data can then reach an address, so the launch's report
        # is not the same for every input (core.run.launch's values_apart)
        self.reads_data = False

    @property
    def planning(self) -> bool:
        return self.mode == PLAN

    @property
    def board(self) -> bool:
        """Whether the run pass is on the timing Board (``core/board.py``): no trace, Python loops."""
        return getattr(self.core, "on_board", False)

    # ---- findings at the user's line ------------------------------------------------------------
    def finding(
        self,
        check: str,
        kind: str,
        op: str,
        pipe: str,
        detail: str,
        fix: str,
        alloc: str = "-",
        where: str | None = None,
    ):
        """A finding the kernel's trace shows (the same on every core): recorded once per line (the
        caller's, or ``where``: a line the kernel has left, such as the AllocTensor never freed)."""
        where = where or caller()
        if self.planning or any(f.where == where and f.kind == kind for f in self.findings):
            return
        self.findings.append(
            Finding(check, kind, "", -1, -1, op, pipe, where, alloc, 0, "-", "-", "-", {}, detail, fix)
        )


def use_dtype(req: BufferRequest, dtype):
    """``req`` used as ``dtype``: recorded by the plan pass (a buffer used as two types is stored as
    bytes), checked by the run pass; returns ``dtype``."""
    if current().planning:
        req.dtype = req.dtype or dtype
        req.dtypes.add(dtype)
    elif dtype not in req.dtypes:
        raise AscError(
            f"the buffer made at {req.where} is used as {dtype} in the run but not in the plan: the kernel's Python "
            f"control flow must not depend on traced values."
        )
    return dtype


_LOCAL = threading.local()


def current() -> KernelRun:
    """The kernel run being traced; an asc call outside a launch is an error that says so."""
    run = getattr(_LOCAL, "run", None)
    if run is None:
        raise AscError(
            "asc calls work inside a kernel launch: decorate the function with @asc.kernel and call "
            "kernel[num_blocks](args..., hw=hw) (or asc.launch(kernel, num_blocks, ...))."
        )
    return run


class active:
    """``with active(run):`` makes ``run`` the current kernel run (nested launches are refused)."""

    def __init__(self, run: KernelRun):
        self.run = run

    def __enter__(self):
        if getattr(_LOCAL, "run", None) is not None:
            raise AscError("an asc kernel cannot launch another kernel from inside its body.")
        _LOCAL.run = self.run
        return self.run

    def __exit__(self, *exc):
        _LOCAL.run = None
        return False


def issue(fn) -> None:
    """Run ``fn`` (an instruction, core -> core) on the kernel's core; nothing in the plan pass."""
    run = current()
    if not run.planning:
        run.core = fn(run.core)


def where() -> str:
    """The user's source line of the asc call being made."""
    return caller()

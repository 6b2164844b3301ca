"""``TPipe``, ``TQue``, ``TBuf`` and ``LocalMemAllocator``: the vendor's buffer management.

A queue is a thin layer over flags, exactly as the vendor's ``TQue`` is: each buffer holds an
event id per direction, and each call issues the one flag the vendor's implementation issues
(ascend-c.md's table): ``enque`` SetFlag<fwd>, ``deque`` WaitFlag<fwd>, ``free_tensor``
SetFlag<back>, ``alloc_tensor`` WaitFlag<back> (for a buffer freed before; a fresh one has nothing
to wait for), and the pipe's end waits for the frees nobody allocated after. Double buffering
falls out of the flags' recurrence. Which buffer is next, and which are queued, are traced state
(``run.state``), carried by ``asc.loop``; how many are allocated, queued and dequeued is known at
trace time, so the vendor's state machine (DeQue of an empty queue, EnQue past depth, use after
FreeTensor) is checked at the call.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from npu_jax.asc import runtime
from npu_jax.asc.runtime import AscError, BufferRequest
from npu_jax.asc.tensors import LocalTensor, Token
from npu_jax.asc.types import DType, Hardware, TPosition, buffer_of, dtype_of, half, uint8
from npu_jax.hw.costs import round_up

_i32 = jnp.int32


def _xp(run):
    """The array module of the queues' state: numpy on the timing Board (no trace), else jax."""
    return np if run.board else jnp


def flags_of(position: TPosition, hw) -> tuple[str, str] | None:
    """(forward, backward) events of a queue at ``position`` (ascend-c.md), None for VECCALC."""
    if position == TPosition.VECIN:
        return "MTE2_V", "V_MTE2"
    if position in (TPosition.VECOUT,) or (position == TPosition.CO2 and hw.coupled):
        return "V_MTE3", "MTE3_V"
    if position in (TPosition.A1, TPosition.B1, TPosition.C1):
        return "MTE2_MTE1", "MTE1_MTE2"
    if position in (TPosition.A2, TPosition.B2):
        return "MTE1_M", "M_MTE1"
    if position == TPosition.CO1:
        return ("M_V", "V_M") if hw.coupled else ("M_FIX", "FIX_M")
    return None


def _round32(nbytes) -> int:
    """A buffer's length rounded up to the 32-B block of UB, as the vendor's InitBuffer rounds it."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
        raise AscError(f"init_buffer: a buffer's length is a positive int of bytes, got {nbytes!r}.")
    return round_up(nbytes, runtime.current().hw.alignment("UB"))


def _request(kind: str, position: TPosition, num: int, nbytes: int) -> BufferRequest:
    """Register (plan pass) or look up (run pass) the n-th buffer request of the kernel."""
    run = runtime.current()
    hw = run.hw
    if not isinstance(position, TPosition):
        raise TypeError(f"a position is an asc.TPosition (e.g. asc.TPosition.VECIN), got {position!r}.")
    buffer = buffer_of(position, hw)
    i = run.n_requested
    run.n_requested += 1
    if run.planning:
        req = BufferRequest(i, kind, buffer, position, num, nbytes, runtime.where())
        run.requests.append(req)
        return req
    if i >= len(run.requests):
        raise AscError(
            "the kernel made more buffer requests (init_buffer / alloc) in its run than in its plan: "
            "its Python control flow must not depend on traced values."
        )
    return run.requests[i]


class TPipe:
    """``TPipe``: hands out buffers to queues and TBufs (``init_buffer``)."""

    def init_buffer(self, obj=None, num_or_len=None, length=None, *, que=None, num=None, len=None, buf=None):  # noqa: A002
        """``InitBuffer(que, num, len)`` (``num`` buffers of ``len`` bytes, rounded up to 32 B) or
        ``InitBuffer(tbuf, len)``; pyasc's keywords too (``que=, num=, len=``; ``buf=, num=`` with
        ``num`` a TBuf's bytes)."""
        obj = next((o for o in (obj, que, buf) if o is not None), None)
        num_or_len = next((v for v in (num_or_len, num) if v is not None), None)
        length = length if length is not None else len
        if isinstance(obj, TBuf) and num_or_len is None:
            num_or_len, length = length, None
        if isinstance(obj, TQue):
            if length is None:
                raise TypeError(
                    "init_buffer(que, num, len): a queue needs the number of buffers and their length."
                )
            obj._init(num_or_len, length)
        elif isinstance(obj, TBuf):
            if length is not None:
                raise TypeError("init_buffer(tbuf, len): a TBuf takes only its length in bytes.")
            obj._init(num_or_len)
        else:
            raise TypeError(f"init_buffer takes an asc.TQue or asc.TBuf, got {type(obj).__name__}.")

    def destroy(self):
        """``Destroy()``: nothing to release in the emulator."""


class TQue:
    """``TQue<position, depth>``: ``depth`` EnQue calls allowed before a DeQue.

    Example:
        >>> q = asc.TQue(asc.TPosition.VECIN, 2)          # doctest: +SKIP
        >>> pipe.init_buffer(q, 2, 128 * 2)               # doctest: +SKIP
        >>> x = q.alloc_tensor(asc.half)                  # doctest: +SKIP
    """

    def __init__(self, position: TPosition, depth: int = 1):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise AscError(f"TQue depth is an int >= 1, got {depth!r}.")
        run = runtime.current()
        self.position = position
        self.depth = depth
        self.req: BufferRequest | None = None
        self.key = f"q{len(run.queues)}"
        run.queues.append(self)
        self.where = runtime.where()
        self.n_alloc = self.n_queued = self.n_deq = 0
        self.fifo: list[Token] = []  # tokens queued (static), oldest first
        self.tokens: list[Token] = []  # every token allocated, in order (to name one never freed)
        self.base: tuple[int, int] = (0, 0)

    def __repr__(self) -> str:
        return f"TQue({self.position.name}, depth={self.depth}) made at {self.where}"

    def _init(self, num, length):
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise AscError(f"init_buffer(que, num, len): num is an int >= 1, got {num!r}.")
        if self.req is not None:
            raise AscError(f"init_buffer at {runtime.where()}: called twice for {self!r}.")
        run = runtime.current()
        self.req = _request("que", self.position, num, _round32(length))
        self.flags = flags_of(self.position, run.hw)
        if self.flags is not None:  # each buffer holds one event id per direction
            bases = []
            for ev in self.flags:
                b = run.events.get(ev, 0)
                if b + num > run.hw.num_event_ids:
                    raise AscError(
                        f"init_buffer at {runtime.where()}: queues on {self.position.name} need {b + num} event "
                        f"ids of {ev}, but {run.hw.name} has {run.hw.num_event_ids}: at most "
                        f"{run.hw.num_event_ids} buffers per position. Use fewer buffers (num) or fewer queues."
                    )
                run.events[ev] = b + num
                bases.append(b)
            self.base = tuple(bases)
        if not run.planning:
            cap = max(num, self.depth)
            xp = _xp(run)
            run.state[self.key] = {
                "ptr": xp.zeros((), _i32),
                "head": xp.zeros((), _i32),
                "tail": xp.zeros((), _i32),
                "fifo": xp.zeros((cap,), _i32),
                "freed": xp.zeros((num,), jnp.bool_),
            }

    # ---- the four calls ---------------------------------------------------------------------------
    def _ready(self, call: str):
        if self.req is None:
            raise AscError(f"{call} on {self!r} before pipe.init_buffer(que, num, len).")
        return runtime.current()

    def _dtype(self, dtype) -> DType:
        if dtype is None:
            return runtime.use_dtype(self.req, self.req.dtype or half)
        return runtime.use_dtype(self.req, dtype_of(dtype))

    def alloc_tensor(self, dtype=None) -> LocalTensor:
        """``AllocTensor<T>()``: the next free buffer (its content is uninitialised)."""
        run = self._ready("alloc_tensor")
        dtype = self._dtype(dtype)
        num = self.req.num
        if self.n_alloc + self.n_queued + self.n_deq >= num:
            raise AscError(
                f"alloc_tensor at {runtime.where()}: all {num} buffer(s) of {self!r} are in use "
                f"({self.n_alloc} allocated, {self.n_queued} enqueued, {self.n_deq} dequeued); on hardware "
                f"this AllocTensor would wait forever. FreeTensor one first, or init_buffer more."
            )
        self.n_alloc += 1
        token = Token(self, runtime.where())
        self.tokens.append(token)
        length = self.req.nbytes // dtype.itemsize
        if run.planning:
            return LocalTensor(self.req, 0, 0, length, dtype, token)
        st = run.state[self.key]
        slot = st["ptr"] % num
        if self.flags is not None:
            ev = self.flags[1]
            run.core = run.core.wait_flag(ev, self.base[1] + slot, when=st["freed"][slot])
        run.state[self.key] = {
            **st,
            "ptr": st["ptr"] + 1,
            "freed": st["freed"] & (_xp(run).arange(num) != slot),
        }
        return LocalTensor(self.req, slot, 0, length, dtype, token)

    def enque(self, t: LocalTensor) -> None:
        """``EnQue(tensor)``: hand the buffer to the consumer (SetFlag<fwd>)."""
        run = self._ready("enque")
        tok = self._own(t, "enque")
        if tok.state not in ("OCCUPIED", "DEQUE"):
            raise AscError(
                f"enque at {runtime.where()}: the tensor (allocated at {tok.where}) is {tok.state}; EnQue takes "
                f"an allocated or dequeued tensor."
            )
        if self.n_queued >= self.depth:
            raise AscError(
                f"enque at {runtime.where()}: {self!r} already holds {self.n_queued} tensor(s), its depth; "
                f"DeQue one first (or make the queue deeper)."
            )
        if tok.state == "OCCUPIED":
            self.n_alloc -= 1
        else:
            self.n_deq -= 1
        tok.state = "ENQUE"
        self.n_queued += 1
        self.fifo.append(tok)
        if run.planning:
            return
        st = run.state[self.key]
        cap, xp = st["fifo"].shape[0], _xp(run)
        if self.flags is not None:
            run.core = run.core.set_flag(self.flags[0], self.base[0] + t.slot)
        run.state[self.key] = {
            **st,
            "fifo": xp.where(xp.arange(cap) == st["tail"] % cap, xp.asarray(t.slot, _i32), st["fifo"]),
            "tail": st["tail"] + 1,
        }

    def deque(self, dtype=None) -> LocalTensor:
        """``DeQue<T>()``: the oldest queued buffer, once its producer is done (WaitFlag<fwd>)."""
        run = self._ready("deque")
        if self.n_queued == 0:
            raise AscError(
                f"deque at {runtime.where()}: {self!r} is empty (nothing was enqueued since the last DeQue); on "
                f"hardware this DeQue would wait forever. EnQue before DeQue."
            )
        dtype = self._dtype(dtype)
        tok = self.fifo.pop(0)
        tok.state = "DEQUE"
        self.n_queued -= 1
        self.n_deq += 1
        length = self.req.nbytes // dtype.itemsize
        if run.planning:
            return LocalTensor(self.req, 0, 0, length, dtype, tok)
        st = run.state[self.key]
        cap = st["fifo"].shape[0]
        slot = st["fifo"][st["head"] % cap]
        if self.flags is not None:
            run.core = run.core.wait_flag(self.flags[0], self.base[0] + slot)
        run.state[self.key] = {**st, "head": st["head"] + 1}
        return LocalTensor(self.req, slot, 0, length, dtype, tok)

    def free_tensor(self, t: LocalTensor) -> None:
        """``FreeTensor(tensor)``: give the buffer back to the producer (SetFlag<back>)."""
        run = self._ready("free_tensor")
        tok = self._own(t, "free_tensor")
        if tok.state not in ("OCCUPIED", "DEQUE"):
            raise AscError(
                f"free_tensor at {runtime.where()}: the tensor (allocated at {tok.where}) is {tok.state}; "
                f"FreeTensor takes an allocated or dequeued tensor, once."
            )
        if tok.state == "OCCUPIED":
            self.n_alloc -= 1
        else:
            self.n_deq -= 1
        tok.state = "FREE"
        if run.planning:
            return
        st = run.state[self.key]
        if self.flags is not None:
            run.core = run.core.set_flag(self.flags[1], self.base[1] + t.slot)
        run.state[self.key] = {**st, "freed": st["freed"] | (_xp(run).arange(self.req.num) == t.slot)}

    def _own(self, t, call: str) -> Token:
        if not isinstance(t, LocalTensor) or t.token is None or t.token.queue is not self:
            raise AscError(f"{call} at {runtime.where()}: the tensor was not allocated from {self!r}.")
        return t.token

    def busy(self) -> int:
        return self.n_alloc + self.n_queued + self.n_deq

    def first_live(self) -> Token | None:
        """The earliest-allocated tensor not yet freed (None when all are)."""
        return next((t for t in self.tokens if t.state != "FREE"), None)

    def drain(self, run) -> None:
        """The end of the kernel: wait for every free nobody allocated after (the pipe's release)."""
        if self.req is None or run.planning or self.flags is None:
            return
        st = run.state[self.key]
        for s in range(self.req.num):
            run.core = run.core.wait_flag(self.flags[1], self.base[1] + s, when=st["freed"][s])


class TBuf:
    """``TBuf<position>``: one buffer of temporaries, no queue (``get``)."""

    def __init__(self, position: TPosition = TPosition.VECCALC):
        runtime.current()
        self.position = position
        self.req: BufferRequest | None = None

    def _init(self, length):
        if self.req is not None:
            raise AscError("init_buffer called twice for the same TBuf.")
        self.req = _request("tbuf", self.position, 1, _round32(length))

    def get(self, dtype=None, length: int | None = None) -> LocalTensor:
        """``Get<T>([len])``: the buffer as ``len`` (default: all) elements of ``dtype``."""
        if self.req is None:
            raise AscError("TBuf.get before pipe.init_buffer(tbuf, len).")
        dtype = runtime.use_dtype(self.req, half if dtype is None else dtype_of(dtype))
        full = self.req.nbytes // dtype.itemsize
        if length is not None and not (isinstance(length, int) and 0 < length <= full):
            raise AscError(f"TBuf.get: length must be in 1..{full} elements of {dtype}, got {length!r}.")
        return LocalTensor(self.req, 0, 0, full if length is None else length, dtype)

    def alloc_tensor(self, dtype=None) -> LocalTensor:
        """pyasc's ``TBuf.alloc_tensor(dtype)`` (a TBuf inherits TQueBind's calls there): the buffer as
        ``dtype`` (``get``)."""
        return self.get(dtype)

    def free_tensor(self, t: LocalTensor) -> None:
        """pyasc's ``TBuf.free_tensor``: a TBuf has nothing to give back."""


class LocalMemAllocator:
    """``LocalMemAllocator<Hardware::X>``: a bump allocator of static tensors in one buffer."""

    def __init__(self, hardware: Hardware = Hardware.UB):
        if not isinstance(hardware, Hardware) or hardware == Hardware.GM:
            raise TypeError(
                f"LocalMemAllocator takes an on-chip asc.Hardware (UB, L1, L0A...), got {hardware!r}."
            )
        self.hardware = hardware

    def alloc(self, position: TPosition, dtype, count: int) -> LocalTensor:
        """``Alloc<position, T>(count)``: ``count`` elements (rounded up to 32 B) of ``dtype``."""
        run = runtime.current()
        if isinstance(position, TPosition) and buffer_of(position, run.hw) != self.hardware.value:
            raise AscError(
                f"LocalMemAllocator({self.hardware.name}).alloc: position {position.name} lives in "
                f"{buffer_of(position, run.hw)}, not {self.hardware.name}."
            )
        return _static(position, dtype, count, None, "LocalMemAllocator.alloc")


def _static(position: TPosition, dtype, count: int, addr: int | None, call: str) -> LocalTensor:
    """A static tensor of ``count`` elements (rounded up to 32 B), at byte ``addr`` or the next free one."""
    dtype = dtype_of(dtype)
    if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
        raise AscError(f"{call}: count is a positive int of elements, got {count!r}.")
    req = _request("static", position, 1, _round32(count * dtype.itemsize))
    runtime.use_dtype(req, dtype)
    req.addr = addr
    return LocalTensor(req, 0, 0, count, dtype)


def local_tensor(position: TPosition, dtype, addr: int, count: int) -> LocalTensor:
    """``LocalTensor<T> t(TPosition::X, addr, count)``: a static tensor of ``count`` elements at byte
    ``addr`` of the position's buffer (the vendor's static tensor programming). Declare them in
    increasing address order; ``addr`` is 32-B aligned and leaves the earlier ones whole."""
    if isinstance(addr, bool) or not isinstance(addr, int) or addr < 0:
        raise AscError(f"asc.local_tensor: addr is a byte address >= 0 (a Python int), got {addr!r}.")
    return _static(position, dtype, count, addr, "asc.local_tensor")


def framework_buffer(nbytes: int) -> LocalTensor:
    """The UB the framework gives a high-level call that was given no ``shared_tmp_buffer`` (the
    vendor's "接口框架申请"): one VECCALC buffer per kernel, as large as the largest call needs, as
    uint8 (``reinterpret_cast`` it)."""
    run = runtime.current()
    nbytes = _round32(nbytes)
    if run.planning:
        if run.pool is None:
            run.pool = BufferRequest(-1, "pool", "UB", TPosition.VECCALC, 1, nbytes, runtime.where())
        run.pool.nbytes = max(run.pool.nbytes, nbytes)
    runtime.use_dtype(run.pool, uint8)
    return LocalTensor(run.pool, 0, 0, run.pool.nbytes, uint8)

"""The sanitizers' shared vocabulary: checks, finding codes, site kinds and the column layouts of
the event log, the site table and a finding record, as named types.

Every piece of the sanitizers (the hooks that write the log, the checkers that replay it, the
decoder that turns records into messages) reads these; none of them reads another for a number.
The members are ``IntEnum``: they index jnp and numpy arrays and enter jnp arithmetic as ints.
"""

from __future__ import annotations

import enum


class Check(enum.IntEnum):
    """The four checks, in the order of their rows in a core's findings ((4, KEEP + 1, NF) records)."""

    RACE = 0
    MEM = 1
    INIT = 2
    SYNC = 3


CHECK_NAMES = ("racecheck", "memcheck", "initcheck", "synccheck")  # by Check


class Code(enum.IntEnum):
    """What a finding is: 1, 2, ... in this order (0 in a record's code column = nothing found)."""

    RAW = enum.auto()
    WAR = enum.auto()
    WAW = enum.auto()
    GM_OOB = enum.auto()
    BUF_OOB = enum.auto()
    STAGE_OOB = enum.auto()
    MISALIGNED = enum.auto()
    EXTENT = enum.auto()
    UNINIT = enum.auto()
    HANG = enum.auto()
    TWICE = enum.auto()
    LEFT = enum.auto()
    EVENT_ID = enum.auto()


# code -> (the check that reports it, its short name in messages)
KINDS = {
    Code.RAW: (Check.RACE, "RAW"),
    Code.WAR: (Check.RACE, "WAR"),
    Code.WAW: (Check.RACE, "WAW"),
    Code.GM_OOB: (Check.MEM, "gm-out-of-range"),
    Code.BUF_OOB: (Check.MEM, "window-out-of-range"),
    Code.STAGE_OOB: (Check.MEM, "stage-out-of-range"),
    Code.MISALIGNED: (Check.MEM, "misaligned"),
    Code.EXTENT: (Check.MEM, "extent-out-of-range"),
    Code.UNINIT: (Check.INIT, "uninitialised-read"),
    Code.HANG: (Check.SYNC, "wait-without-set"),
    Code.TWICE: (Check.SYNC, "set-twice"),
    Code.LEFT: (Check.SYNC, "left-set"),
    Code.EVENT_ID: (Check.SYNC, "event-id-out-of-range"),
}


class Kind(enum.IntEnum):
    """What a site is: the replay's switch."""

    INSTR = 0  # an instruction (reads and writes allocation stages)
    SET = 1  # SetFlag<S_D>
    WAIT = 2  # WaitFlag<S_D>
    BARRIER_ALL = 3  # PipeBarrier<ALL>
    TILE = 4  # a tile mark (core.at_tile)
    NOP = 5  # nothing for the checks (PipeBarrier of one pipe; any predicated-off call)


N_COORDS = 4  # tile coordinates a tile mark carries
MAX_REFS = 4  # allocation slots one instruction's row can carry
KEEP = 8  # distinct findings (code, site) kept per check and core; later ones are only counted

# initcheck's granule: what was written is tracked per granule of each stage, a power of two of at least
# GRANULE bytes (one 32-B block), so that a stage has at most GRANULES granules (coarser for stages over
# GRANULES * GRANULE = 16 KiB). The replay keeps them as WORDS bitmask words per stage.
GRANULE = 32
GRANULES = 512
WORD_BITS = 32  # the bits of one uint32 word of a stage's written mask
WORDS = GRANULES // WORD_BITS


class Log(enum.IntEnum):
    """Columns of one event-log row (int32): one row per instruction call."""

    SITE = 0  # site id in the SiteTable
    ST = 1  # MAX_REFS columns: the traced stage of each slot (SKIP = not accessed), or tile coords
    AUX = 5  # event id (raw) of a flag op
    MCID = 6  # memcheck: the candidate that failed (-1: none), its dim and value
    MDIM = 7
    MVAL = 8
    WHEN = 9  # the call's predicate
    LO = 10  # MAX_REFS columns: the byte offset in its stage at which each slot's access starts [initcheck]


LW = 14  # log row width
assert Log.ST + MAX_REFS == Log.AUX and Log.LO + MAX_REFS == LW


class Site(enum.IntEnum):
    """Columns of one row of the site table (SiteTable.arrays); then MAX_REFS refs of REF_W."""

    KIND = 0
    PIPE = 1
    SRC = 2  # flag source pipe
    DST = 3  # flag destination pipe
    REFS = 4


class Ref(enum.IntEnum):
    """Columns of one allocation slot of a site: which allocation, where its stages start in the
    flat stage table, how many, and the access mode; then initcheck's static part of the access: the
    allocation's granule (log2 bytes), its granules per stage, the element size, and the granules
    the access touches relative to the granule of its start (``Log.LO``), WORDS bitmask words
    (``checks/ranges.py``)."""

    ALLOC = 0
    BASE = 1
    STAGES = 2
    MODE = 3  # 0 unused, READ or WRITE
    GSH = 4  # log2 of the granule in bytes
    NG = 5  # granules in one stage
    ESZ = 6  # bytes of the access's element (findings name elements)
    MASK = 7  # WORDS words: bit j of word w = granule 32 w + j past the start's granule


REF_W = Ref.MASK + WORDS
READ, WRITE = 1, 2  # Ref.MODE values
SITE_W = Site.REFS + REF_W * MAX_REFS


class F(enum.IntEnum):
    """Columns of one finding record (int32): one distinct finding of a check on a core. A core's
    findings are (4, KEEP + 1, NF): per check, KEEP records in the order found, then one record whose
    COUNT counts the occurrences past them (CODE 0)."""

    CODE = 0
    INSTR = 1  # instruction index on the core (flag ops included, tile marks not)
    SITE = 2  # -1: the end of the kernel
    PIPE = 3
    ALLOC = 4  # allocation id: allocations, then GM tensors (-1: none)
    STAGE = 5
    OPIPE = 6  # the conflicting access: its pipe and site
    OSITE = 7
    TAG = 8  # the tile mark's site + 1 (0: none), then its N_COORDS values
    T0 = 9
    X0 = 13  # two code-specific values (dim and start, event id and flag, byte and element, ...)
    X1 = 14
    COUNT = 15  # occurrences: the instruction calls that found it (this record's code and site)


NF = 16  # finding record width
assert F.T0 + N_COORDS == F.X0 and F.COUNT + 1 == NF

SLACK = 128  # log rows past the capacity, where blocks that overflow land
SKIP = -(1 << 30)  # a stage value meaning "this slot is not accessed" (a read predicated off)

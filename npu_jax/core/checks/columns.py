"""The sanitizers' shared vocabulary: checks, finding codes, site kinds and the column layouts of
the event log, the site table and a finding record, as named types.

Every piece of the sanitizers (the hooks that write the log, the checkers that replay it, the
decoder that turns records into messages) reads these; none of them reads another for a number.
The members are ``IntEnum``: they index jnp and numpy arrays and enter jnp arithmetic as ints.
"""

from __future__ import annotations

import enum


class Check(enum.IntEnum):
    """The four checks, in the order of their rows in a core's findings ((4, NF) records)."""

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


class Log(enum.IntEnum):
    """Columns of one event-log row (int32): one row per instruction call."""

    SITE = 0  # site id in the SiteTable
    ST = 1  # MAX_REFS columns: the traced stage of each slot (SKIP = not accessed), or tile coords
    AUX = 5  # event id (raw) of a flag op
    MCID = 6  # memcheck: the candidate that failed (-1: none), its dim and value
    MDIM = 7
    MVAL = 8
    WHEN = 9  # the call's predicate


LW = 10  # log row width
assert Log.ST + MAX_REFS == Log.AUX and Log.WHEN + 1 == LW


class Site(enum.IntEnum):
    """Columns of one row of the site table (SiteTable.arrays); then MAX_REFS refs of REF_W."""

    KIND = 0
    PIPE = 1
    SRC = 2  # flag source pipe
    DST = 3  # flag destination pipe
    REFS = 4


class Ref(enum.IntEnum):
    """Columns of one allocation slot of a site: which allocation, where its stages start in the
    flat stage table, how many, and the access mode."""

    ALLOC = 0
    BASE = 1
    STAGES = 2
    MODE = 3  # 0 unused, READ or WRITE


REF_W = 4
READ, WRITE = 1, 2  # Ref.MODE values
SITE_W = Site.REFS + REF_W * MAX_REFS


class F(enum.IntEnum):
    """Columns of one finding record (int32): the first finding of a check on a core."""

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
    X0 = 13  # two code-specific values (dim and start, event id and flag, ...)
    X1 = 14


NF = 15  # finding record width
assert F.T0 + N_COORDS == F.X0 and F.X1 + 1 == NF

SLACK = 128  # log rows past the capacity, where blocks that overflow land
SKIP = -(1 << 30)  # a stage value meaning "this slot is not accessed" (a read predicated off)

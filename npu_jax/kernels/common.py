"""Pieces every Cube kernel shares: the "slot free" flags of its ping-pong buffers, and the epilogue
that moves L0C out (Fixpipe on separated chips, L0C -> UB -> MTE3 on coupled ones)."""

from __future__ import annotations


def slot_flags(hw, l1_events, l0_stages: int) -> list[tuple[str, int]]:
    """The (event, id) flags a kernel sets in its prologue ("slot free") and waits in its epilogue:
    one MTE1_MTE2 per L1 slot id in ``l1_events``, one M_MTE1 per L0 stage, and on coupled chips
    MTE3_V for the UB tile of the epilogue."""
    flags = [("MTE1_MTE2", e) for e in l1_events] + [("M_MTE1", u) for u in range(l0_stages)]
    if hw.coupled:
        flags.append(("MTE3_V", 0))
    return flags


def set_all(core, flags, when=None):
    """SetFlag every (event, id) of ``flags``; ``when``: one bool (possibly traced) per flag."""
    for (event, i), w in zip(flags, when or [True] * len(flags)):
        core = core.set_flag(event, i, w)
    return core


def wait_all(core, flags, when=None):
    for (event, i), w in zip(flags, when or [True] * len(flags)):
        core = core.wait_flag(event, i, w)
    return core


def output_step(core, hw, c_l0, y_ub, y_win, m, n, live, relu: bool = False, quant: dict | None = None):
    """L0C -> GM: Fixpipe (separated) or L0C -> UB (V) -> GM (MTE3) (coupled), with the flags
    that let the Cube start the next tile as soon as L0C has been read out. ``quant``: an int32
    accumulator's ``scale`` (a number) and ``offset`` on the way out."""
    quant = quant or {}
    if not hw.coupled:
        core = core.set_flag("M_FIX", 0, live).wait_flag("M_FIX", 0, live)
        core = core.fixpipe(dst=y_win, src=c_l0[0], m=m, n=n, relu=relu, when=live, **quant)
        return core.set_flag("FIX_M", 0, live).wait_flag("FIX_M", 0, live)
    core = core.set_flag("M_V", 0, live).wait_flag("M_V", 0, live)
    core = core.wait_flag("MTE3_V", 0, live)
    core = core.l0c_to_ub(dst=y_ub[0], src=c_l0[0], m=m, n=n, when=live, **quant)
    core = core.set_flag("V_M", 0, live).wait_flag("V_M", 0, live)
    if relu:
        core = core.vector("VRelu", y_ub[0], y_ub[0], when=live)
    core = core.set_flag("V_MTE3", 0, live).wait_flag("V_MTE3", 0, live)
    core = core.data_copy(dst=y_win, src=y_ub[0], when=live)
    return core.set_flag("MTE3_V", 0, live)

"""The fused epilogue's instructions inside a Cube kernel (its plan: ``mapping/epilogue.py``)."""

from __future__ import annotations

from npu_jax.mapping.epilogue import EpiloguePlan, epilogue_slot_flags

__all__ = ["emit", "epilogue_slot_flags", "load_row"]


def load_row(core, e: EpiloguePlan, a: dict, col0, cols: int, k_total, when):
    """Prologue: this core's per-channel row (bias values or dequantisation scales, columns
    ``col0 ..``) GM -> L1 or UB, once."""
    win = core.gm_window(e.row, (0, col0), (1, cols), limit=(None, k_total - col0))
    core = core.data_copy(dst=a["row"][0], src=win, when=when)
    event = "MTE2_FIX" if e.where == "fixpipe" else "MTE2_V"
    return core.set_flag(event, 0, when).wait_flag(event, 0, when)


def emit(core, e: EpiloguePlan, a: dict, c_l0, y_win, res_win, bias_col, m, n, tile_cols: int, live):
    """L0C -> (chain) -> GM for one output tile of ``m`` positions x ``n`` channels."""
    row = a["row"].at(0, (0, bias_col)) if e.row is not None else None
    quant = {"scale": row, "offset": e.offset} if e.has("dequant") else {}
    deq_acts = e.deq_args() if e.has("dequant") else {}  # the UB path's deq conversion applies it
    if e.where == "fixpipe":
        bias = row if e.has("bias") else None
        core = core.set_flag("M_FIX", 0, live).wait_flag("M_FIX", 0, live)
        core = core.fixpipe(
            dst=y_win, src=c_l0[0], m=m, n=n, bias=bias, when=live, **e.fixpipe_args(), **quant
        )
        return core.set_flag("FIX_M", 0, live).wait_flag("FIX_M", 0, live)
    y = a["ub"][0]
    if e.has("residual"):  # MTE2 fetches the residual tile while the Cube works
        core = core.wait_flag("V_MTE2", 0, live)
        core = core.data_copy(dst=a["res"][0], src=res_win, when=live)
        core = core.set_flag("MTE2_V", 1, live)
    core = core.set_flag("M_V", 0, live).wait_flag("M_V", 0, live)
    core = core.wait_flag("MTE3_V", 0, live)
    core = core.l0c_to_ub(dst=y, src=c_l0[0], m=m, n=n, when=live, **quant, **deq_acts)
    core = core.set_flag("V_M", 0, live).wait_flag("V_M", 0, live)
    cnt = m * tile_cols  # the tile's real rows (all columns: the tail is never written out)
    cur = y
    clip = [s.arg for s in e.steps if s.op == "clipped_relu"]
    alpha = [s.arg for s in e.steps if s.op == "leaky_relu"]
    for op, role in e.vector_ops():
        if role == "bias":
            core = core.vector(op, cur, cur, row, count_elems=cnt, when=live)
        elif role == "widen_residual":  # the residual tile is free again once widened
            core = core.wait_flag("MTE2_V", 1, live)
            core = core.vector(op, a["res_v"][0], a["res"][0], count_elems=cnt, when=live)
            core = core.set_flag("V_MTE2", 0, live)
        elif role == "residual" and e.widens_residual:
            core = core.vector(op, cur, cur, a["res_v"][0], count_elems=cnt, when=live)
        elif role == "residual":
            core = core.wait_flag("MTE2_V", 1, live)
            core = core.vector(op, cur, cur, a["res"][0], count_elems=cnt, when=live)
            core = core.set_flag("V_MTE2", 0, live)
        elif role == "cast":
            core = core.vector(op, a["out"][0], cur, count_elems=cnt, when=live)
            cur = a["out"][0]
        elif op == "VMaxs":
            core = core.vector(op, cur, cur, scalar=0.0, count_elems=cnt, when=live)
        elif op == "VMins":
            core = core.vector(op, cur, cur, scalar=clip[0], count_elems=cnt, when=live)
        else:
            core = core.vector(op, cur, cur, alpha=alpha[0] if alpha else 0.0, count_elems=cnt, when=live)
    core = core.set_flag("V_MTE3", 0, live).wait_flag("V_MTE3", 0, live)
    core = core.data_copy(dst=y_win, src=cur, when=live)
    return core.set_flag("MTE3_V", 0, live)

"""What a fusion table means, in words, beside the kernel engineer's figures.

``fusion_reading(rows)`` reads the rows of a fusion table (:func:`fusion.analyze` of each layer);
every number comes from the rows. ``steps_text`` and ``reference_text`` name an epilogue chain and
the float formula a fused run is checked against.
"""

from __future__ import annotations

from npu_jax.report.reading import span

# the kernel engineer's figures, which the readings compare against
ENGINEER_SAVED_PCT = 80.0  # "more than 80% of the intermediate's bandwidth saved"
ENGINEER_FASTER_PCT = 35.0  # "35% faster"


def steps_text(steps) -> str:
    """``bias -> relu``, or ``(no epilogue)``."""
    return " -> ".join(map(str, steps)) or "(no epilogue)"


def reference_text(steps) -> str:
    """The chain as a formula over ``lax.conv``: ``relu(lax.conv + bias)``."""
    e = "lax.conv"
    for s in steps:
        if s.op in ("bias", "residual"):
            e = f"{e} + {s.op}"
        elif s.op == "relu":
            e = f"relu({e})"
        elif s.op == "leaky_relu":
            e = f"leaky_relu({e}, {s.arg:g})"
        elif s.op == "clipped_relu":
            e = f"min(relu({e}), {s.arg:g})"
    return e


def _vector_share(a) -> float:
    """% of the unfused time spent in the separate vector kernel."""
    elt = [r for lab, r in a.unfused.parts if lab == "eltwise"]
    return 100.0 * sum(r.cycles for r in elt) / max(1, a.unfused.cycles)


def _conv_delta(a) -> float:
    """Cycles of the fused run's Conv kernel against the unfused Conv's, in %."""
    conv_u = a.unfused.parts[0][1].cycles
    return 100.0 * (a.fused.parts[0][1].cycles - conv_u) / max(1, conv_u)


def fusion_reading(rows) -> str:
    """Lines read off a fusion table, beside the kernel engineer's figures; every number from ``rows``."""
    short = lambda a: a.layer.split()[0]  # noqa: E731
    lines = [
        f"Reading, beside the kernel engineer's figures (more than {ENGINEER_SAVED_PCT:.0f}% of the "
        f"intermediate's bandwidth saved, {ENGINEER_FASTER_PCT:.0f}% faster):"
    ]
    chips: dict[str, list] = {}
    for a in rows:
        chips.setdefault(a.hw.name, []).append(a)
    for chip, rs in chips.items():
        where = "UB epilogue" if rs[0].hw.coupled else "Fixpipe epilogue"
        n = len(rs)
        saved = [a.intermediate_saved_pct for a in rs]
        faster = [a.faster_pct for a in rs]
        n_saved = sum(s > ENGINEER_SAVED_PCT for s in saved)
        n_fast = sum(f >= ENGINEER_FASTER_PCT for f in faster)
        mb = sum(a.intermediate_bytes for a in rs) / 1e6
        lines.append(
            f"- {chip} ({where}): {span(saved, '{:.0f}%')} of the intermediate's GM round trip saved "
            f"({mb:.2f} MB over {n} layer{'s' * (n > 1)}; above {ENGINEER_SAVED_PCT:.0f}% on {n_saved} of {n}), "
            f"{span([a.gm_saved_pct for a in rs], '{:.0f}%')} of all GM bytes; "
            f"{span(faster, '{:.0f}%')} less time (mean {sum(faster) / n:.0f}%, speed-up "
            f"{span([a.speedup for a in rs], '{:.2f}x')}; at least {ENGINEER_FASTER_PCT:.0f}% on {n_fast} of {n})."
        )
    best = max(rows, key=lambda a: a.faster_pct)
    worst = min(rows, key=lambda a: a.faster_pct)
    lines.append(
        f"What fusion removes: the separate vector kernel, {span([_vector_share(a) for a in rows], '{:.0f}%')}"
        f" of the unfused time; what it adds: the fused Conv kernel takes "
        f"{span([_conv_delta(a) for a in rows], '{:+.0f}%')} against the Conv alone (its epilogue "
        f"and its own tiling)."
    )
    lines.append(
        f"Largest gain, {short(best)} on {best.hw.name} ({best.faster_pct:.0f}% less time): {best.why}"
    )
    if worst is not best:
        lines.append(f"Smallest, {short(worst)} on {worst.hw.name} ({worst.faster_pct:.0f}%): {worst.why}")
    return "\n".join(lines)


__all__ = ["ENGINEER_FASTER_PCT", "ENGINEER_SAVED_PCT", "fusion_reading", "reference_text", "steps_text"]

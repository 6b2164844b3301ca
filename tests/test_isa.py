"""The instruction set is declared once: every declaration names a pipe and a cost rule of
``npu_jax/hw/costs.py``, and issuing it charges exactly that rule's cycles to that pipe (and its
counters only). The rule follows the hardware: a 32 x 32 Cube issues whole 32-row blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import busy, counter, gm_spec, make_core

from npu_jax.core import isa
from npu_jax.core.buffers import Plan
from npu_jax.core.isa import lanes, table, vecops
from npu_jax.core.pipes import COUNTERS, PIPE_INDEX, PIPES
from npu_jax.hw import costs, presets
from npu_jax.hw.config import HardwareConfig


def _f16(rng, shape):
    return rng.standard_normal(shape).astype(np.float16)


def test_every_declaration_has_a_pipe_and_a_cost_rule_of_hw_costs():
    assert isa.DECLARATIONS, "no instruction declared"
    for instr in isa.DECLARATIONS:
        assert instr.pipe in PIPES, instr
        assert instr.cost.__module__ == costs.__name__, (
            f"{instr.name}: cost rule {instr.cost} not in hw/costs"
        )
        assert getattr(costs, instr.cost.__name__) is instr.cost, instr.name
        assert set(instr.counts) <= set(COUNTERS), instr.name
        assert callable(instr.semantics), instr.name
    # the trace's op ids index OPS: every op name is declared, once in OPS, in declaration order
    names = [i.name for i in isa.DECLARATIONS]
    assert list(isa.OPS) == sorted(set(names), key=names.index)
    assert set(isa.VECTOR) <= set(isa.OPS) and "Scalar" in isa.OPS


def _cases(rng, hw):
    """(declaration, program, the cost rule's operands worked out here) for one of each instruction."""
    plan = Plan(hw)
    l1 = plan.alloc("L1", "l1", (32, 64), "fp16")
    fm = plan.alloc("L1", "fm", (1, 4, 4, 16), "fp16", fmt="NC1HWC0")
    l1o = plan.alloc("L1", "l1o", (32, 32), "fp16")
    a = plan.alloc("L0A", "a", (32, 32), "fp16", fmt="ZZ")
    a3 = plan.alloc("L0A", "a3", (16, 144), "fp16", fmt="ZZ")
    b = plan.alloc("L0B", "b", (32, 32), "fp16", fmt="ZN")
    c = plan.alloc("L0C", "c", (32, 32), "fp32", fmt="NZ")
    u = plan.alloc("UB", "u", (16, 32), "fp16")
    v = plan.alloc("UB", "v", (16, 32), "fp16")
    w32 = plan.alloc("UB", "w32", (16, 32), "fp32")
    acc = plan.alloc("UB", "acc", (8,), "fp32")
    specs = [gm_spec("x", (64, 64)), gm_spec("f", (1, 16, 4, 4)), gm_spec("y", (64, 64), output=True)]
    core = make_core(hw, plan, specs, {"x": _f16(rng, (64, 64)), "f": _f16(rng, (1, 16, 4, 4))})
    # every stage written first, so that reads see data (and initcheck stays quiet)
    core = core.data_copy(dst=l1[0], src=core.gm_window("x", (0, 0), (32, 64)))
    core = core.data_copy(dst=u[0], src=core.gm_window("x", (0, 0), (16, 32)))
    core = core.data_copy(dst=v[0], src=core.gm_window("x", (16, 0), (16, 32)))
    core = core.vector("VCast", w32[0], u[0])
    core = core.data_copy(dst=fm[0], src=core.gm_window("f", (0, 0, 0, 0), (1, 16, 4, 4)), layout="nc1hwc0")
    core = core.load2d(dst=a[0], src=l1[0])
    core = core.load2d(dst=b[0], src=l1[0])
    core = core.mmad(dst=c[0], a=a[0], b=b[0], m=32, n=32, k=32, init=True)
    rate = costs.gm_rate(isa.hw_numbers(hw), 1)
    wrate = costs.write_rate(isa.hw_numbers(hw), 1)  # writes go into L2
    m, n = int(rng.integers(1, 33)), int(rng.integers(1, 33))
    r0 = int(rng.integers(0, 33))
    geom = isa.Load3DGeometry(kh=3, kw=3, out_w=4)
    cases = [
        # 16 rows of 32 of a 64-wide tensor: one burst per row
        (
            table.DATA_COPY_IN,
            lambda k: k.data_copy(dst=u[0], src=k.gm_window("x", (r0, 32), (16, 32))),
            dict(nbytes=16 * 32 * 2, bursts=16, rate=rate),
        ),
        (
            table.DATA_COPY_OUT,
            lambda k: k.data_copy(dst=k.gm_window("y", (r0, 0), (16, 32)), src=v[0]),
            dict(nbytes=16 * 32 * 2, bursts=16, rate=wrate),
        ),
        (table.LOAD2D_L0A, lambda k: k.load2d(dst=a[0], src=l1[0]), dict(nbytes=32 * 32 * 2)),
        (
            table.LOAD2D_L0B,  # an edge tile: whole (K0 x 16) fractals of the valid (m, n) move
            lambda k: k.load2d(dst=b[0], src=l1[0], valid=(m, n)),
            dict(nbytes=16 * math.ceil(m / 16) * 16 * math.ceil(n / 16) * 2),
        ),
        (table.LOAD3D, lambda k: k.load3d(dst=a3[0], src=fm[0], geom=geom), dict(nbytes=16 * 144 * 2)),
        (
            table.MMAD,
            lambda k: k.mmad(dst=c[0], a=a[0], b=b[0], m=m, n=n, k=32),
            dict(m=m, n=n, k=32, itemsize=2),
        ),
        (
            table.FIXPIPE_GM,
            lambda k: k.fixpipe(dst=k.gm_window("y", (32, 0), (32, 32)), src=c[0], m=m, n=n),
            dict(m=m, n=n, out_bytes=m * n * 2, bursts=m if n < 64 else 1, rate=wrate),
        ),
        (table.FIXPIPE_L1, lambda k: k.fixpipe(dst=l1o[0], src=c[0], m=m, n=n), dict(m=m, n=n)),
        (table.SCALAR, lambda k: k.scalar(m), dict(cycles=m)),
    ]
    for op, instr in isa.VECTOR.items():
        if op == "VReduceSum":
            call, nbytes = (lambda k: k.vector("VReduceSum", acc[0], w32[0])), 16 * 32 * 4
        elif op == "VCast":
            call, nbytes = (lambda k: k.vector("VCast", w32[0], u[0])), 16 * 32 * 4
        elif op == "VDup":  # no source: fills its destination with the scalar
            call, nbytes = (lambda k: k.vector("VDup", v[0], scalar=0.5)), 16 * 32 * 2
        else:
            srcs = (u[0], v[0]) if instr.semantics.keywords["op"] in table.vector.BINARY else (u[0],)
            call = lambda k, op=op, srcs=srcs: k.vector(op, v[0], *srcs, scalar=0.5, alpha=0.1)  # noqa: E731
            nbytes = 16 * 32 * 2
        width = 4 if op in ("VReduceSum", "VCast") else 2
        cases.append((instr, call, dict(nbytes=nbytes, cpr=vecops.cycles_per_repeat(op, width))))
    # the lane form: one op of each kind (element-wise, a reduction), and the Scalar pipe's UB access
    flat = Plan(hw)
    fa, fb = flat.alloc("UB", "fa", (512,), "fp16"), flat.alloc("UB", "fb", (512,), "fp16")
    ia, ib = flat.alloc("UB", "ia", (512,), "int16"), flat.alloc("UB", "ib", (512,), "int16")
    lcore = make_core(hw, flat, [gm_spec("x", (64, 64))], {"x": _f16(rng, (64, 64))})
    lcore = lcore.data_copy(dst=fa[0], src=lcore.gm_window("x", (0, 0), (8, 64)))
    lcore = lcore.data_copy(dst=fb[0], src=lcore.gm_window("x", (8, 0), (8, 64)))
    walk = lanes.count_pattern(512, 128)
    one = lanes.Pattern(np.zeros((1, 1), np.int64), np.ones((1, 1), bool))
    sums = lanes.Pattern(np.arange(4)[:, None], np.ones((4, 1), bool))
    lane_cases = {
        "VWholeReduceSum": (lanes.Lanes(fb, 0, (0,), pattern=sums), (lanes.Lanes(fa, 0, (0,), pattern=walk),))
    }
    for op, instr in isa.VECTOR_LANES.items():
        if op in lane_cases:
            dst, srcs = lane_cases[op]
        elif op in table.vector.vecops.SHAPED:
            continue  # the shaped ops' arithmetic: tests/test_asc_lanes.py
        else:
            o = table.vector.vecops.OPS.get(op)
            ints = o is not None and "fp16" not in o.types
            fa_, fb_ = (ia, ib) if ints else (fa, fb)
            dst = lanes.Lanes(fb_, 0, (0,), pattern=walk)
            srcs = tuple(
                lanes.Lanes(fa, 0, (0,), pattern=walk)
                for _ in range(o.n_src if o else 1 if op == "VCast" else 0)
            )
        call = lambda k, op=op, dst=dst, srcs=srcs: k.vector_lanes(op, dst, *srcs, scalar=0.5)  # noqa: E731
        cases.append(
            (
                instr,
                call,
                dict(
                    repeats=dst.pattern.shape[0] if op != "VWholeReduceSum" else 4,
                    cpr=vecops.cycles_per_repeat(op, 2),
                ),
                lcore,
            )
        )
    src1 = lanes.Lanes(fa, 0, (3,), pattern=one)
    cases.append(
        (table.GET_VALUE, lambda k: k.get_value(src1)[0], dict(cycles=hw.assumed.scalar_ub_cycles), lcore)
    )
    cases.append(
        (table.SET_VALUE, lambda k: k.set_value(src1, 2.0), dict(cycles=hw.assumed.scalar_ub_cycles), lcore)
    )
    return core, cases


def _check_charge(core, instr, call, operands):
    h = isa.hw_numbers(core.hw)
    want = int(np.asarray(instr.cost(h, **operands)))
    assert want > 0, instr
    after = call(core)
    for p in PIPES:
        spent = busy(after, p) - busy(core, p)
        assert spent == (want if p == instr.pipe else 0), f"{instr.name} charged {spent} to {p}"
    n = np.asarray(after.n_instr) - np.asarray(core.n_instr)
    assert n[PIPE_INDEX[instr.pipe]] == 1 and n.sum() == 1, instr.name
    charged = [cn for cn in COUNTERS if counter(after, cn) != counter(core, cn)]
    assert set(charged) <= set(instr.counts), f"{instr.name} charged {charged}, declares {instr.counts}"


def test_issuing_each_declaration_charges_its_rule_to_its_pipe(rng):
    hw = presets.tiny()
    core, cases = _cases(rng, hw)
    done = set()
    shaped = {
        id(i)
        for op, i in isa.VECTOR_LANES.items()
        if op in table.vector.vecops.SHAPED and op != "VWholeReduceSum"
    }
    for instr, call, operands, *own in cases:
        _check_charge(own[0] if own else core, instr, call, operands)
        done.add(id(instr))
    done |= shaped
    # L0C -> UB exists on coupled chips only
    hwc = presets.tiny(coupled=True)
    plan = Plan(hwc)
    c = plan.alloc("L0C", "c", (32, 32), "fp32", fmt="NZ")
    ub = plan.alloc("UB", "ub", (32, 32), "fp16")
    a = plan.alloc("L0A", "a", (32, 32), "fp16", fmt="ZZ")
    b = plan.alloc("L0B", "b", (32, 32), "fp16", fmt="ZN")
    l1 = plan.alloc("L1", "l1", (32, 32), "fp16")
    core = make_core(hwc, plan, [gm_spec("x", (32, 32))], {"x": _f16(rng, (32, 32))})
    core = core.data_copy(dst=l1[0], src=core.gm_window("x", (0, 0), (32, 32)))
    core = core.load2d(dst=a[0], src=l1[0]).load2d(dst=b[0], src=l1[0])
    core = core.mmad(dst=c[0], a=a[0], b=b[0], m=32, n=32, k=32, init=True)
    m, n = int(rng.integers(1, 33)), int(rng.integers(1, 33))
    _check_charge(core, table.L0C_TO_UB, lambda k: k.l0c_to_ub(dst=ub[0], src=c[0], m=m, n=n), dict(m=m, n=n))
    done.add(id(table.L0C_TO_UB))
    assert done == {id(i) for i in isa.DECLARATIONS}, "a declaration has no case here"


def test_mmad_follows_a_32x32_cube(rng):
    """HardwareConfig(cube_m=32, cube_n=32): the Cube issues whole 32 x K0 x 32 blocks, so an
    (m, n, k) Mmad costs ceil(m/32) ceil(n/32) ceil(k/16) cycles (+ start-up) and issues as many
    FLOPs as those blocks hold (the fractal layouts stay 16 rows: allocations are unchanged)."""
    hw = HardwareConfig(cube_m=32, cube_n=32)
    plan = Plan(hw)
    a = plan.alloc("L0A", "a", (64, 32), "fp16", fmt="ZZ")
    b = plan.alloc("L0B", "b", (32, 64), "fp16", fmt="ZN")
    c = plan.alloc("L0C", "c", (64, 64), "fp32", fmt="NZ")
    l1 = plan.alloc("L1", "l1", (64, 64), "fp16")
    x = _f16(rng, (64, 64))
    core = make_core(hw, plan, [gm_spec("x", (64, 64))], {"x": x})
    core = core.data_copy(dst=l1[0], src=core.gm_window("x", (0, 0), (64, 64)))
    core = core.load2d(dst=a[0], src=l1[0]).load2d(dst=b[0], src=l1[0])
    m, n, k = int(rng.integers(1, 65)), int(rng.integers(1, 65)), int(rng.integers(1, 33))
    out = core.mmad(dst=c[0], a=a[0], b=b[0], m=m, n=n, k=k, init=True)
    blocks = math.ceil(m / 32) * math.ceil(n / 32) * math.ceil(k / 16)
    assert busy(out, "M") == hw.assumed.mmad_startup + blocks
    assert counter(out, "flops_issued") == 2 * (32 * math.ceil(m / 32)) * (32 * math.ceil(n / 32)) * (
        16 * math.ceil(k / 16)
    )
    assert counter(out, "flops") == 2 * m * n * k
    got = np.asarray(out.read(c))[:m, :n]
    want = x[:m, :k].astype(np.float32) @ x[:k, :n].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert counter(out, "GM->L1") == 64 * 64 * 2  # the one copy


def test_semantics_must_match_the_declaration():
    """An instruction whose semantics charge a counter its declaration does not list is refused."""
    hw = presets.tiny()
    plan = Plan(hw)
    u = plan.alloc("UB", "u", (16, 32), "fp16")
    core = make_core(hw, plan)
    bad = isa.Instr(
        "VCopy",
        "V",
        reads=("UB",),
        writes=("UB",),
        counts=(),
        cost=costs.vector,
        semantics=table.VECTOR["VCopy"].semantics,
    )
    with pytest.raises(RuntimeError, match="vector_bytes"):
        isa.issue(core, bad, dst=u[0], srcs=(u[0],))

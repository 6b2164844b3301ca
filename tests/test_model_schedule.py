"""The network schedules (``npu_jax.model.schedule``): the "l2" schedule's stacks, run on data as
they are priced, and its choice the cheapest cover.

The emulator runs each stack slice by slice with every kernel given the roles it was priced with:
its report must equal the estimate's layer by layer (cycles, launches, the stacks' DRAM waits), and
its values the layer schedule's bit for bit (slicing the batch changes no arithmetic).
"""

import itertools
import json

import numpy as np
import pytest
from onnx import numpy_helper
from test_model import G

import npu_jax
from npu_jax.errors import InputError, InputTypeError
from npu_jax.model import zoo
from npu_jax.model.schedule import MAX_LAYERS, choose, divisors


@pytest.fixture(scope="module")
def small():
    return npu_jax.model.load(zoo.small_cnn(image=16))


def _network(m, hw):
    from npu_jax.model.kernels import Setting

    return m._network(Setting(hw, npu_jax.Policy()))


@pytest.mark.slow
def test_l2_schedule_runs_as_it_is_priced(small, rng):
    """small_cnn on a 310P whose L2 holds a few images' activations, under a random schedule given as
    data (random stack cuts and slice sizes; the classifier alone): the run's report equals the
    estimate's layer by layer, and its logits the layer schedule's exactly."""
    hw = npu_jax.presets.ascend310p().replace(l2_bytes=int(rng.choice([24, 40, 64])) * 1024)
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    cuts = sorted(set(rng.choice(np.arange(1, 11), size=int(rng.integers(1, 5)), replace=False).tolist()))
    bounds = [0, *cuts, 11]
    stacks = [(j - i, int(rng.choice([1, 2, 4]))) for i, j in zip(bounds, bounds[1:])] + [(1, 4)]
    sched = small.make_schedule(4, stacks, hw=hw)
    print(f"schedule: {stacks} on L2 {hw.l2_bytes} B")
    ref, _ = small.run(x, hw=hw, checks="none")
    est = small.estimate(batch=4, hw=hw, schedule=sched)
    out, run = small.run(x, hw=hw, schedule=sched, checks="none")
    assert run.schedule.stacks == est.schedule.stacks == sched.stacks
    for a, b in zip(est.layers, run.layers, strict=True):
        assert (a.name, a.cycles, len(a.kernels), a.wait_cycles) == (
            b.name,
            b.cycles,
            len(b.kernels),
            b.wait_cycles,
        )
    assert run.cycles == est.cycles
    for name in ref:
        assert np.array_equal(ref[name], out[name]), name


def test_l2_schedule_prices_slices_and_residency(small):
    """A schedule given as data: every slice launches its kernels; a slice after the first finds
    its stack's weights in L2 (fewer DRAM bytes, never more cycles); a layer whose input an earlier
    layer of its stack made reads no DRAM for it; the model's own choice covers the layers in order."""
    hw = npu_jax.presets.ascend310p().replace(l2_bytes=40 * 1024)
    sched = small.make_schedule(4, [(2, 2), (2, 1), (7, 2), (1, 4)], hw=hw)
    assert [st.slices for st in sched.stacks] == [2, 4, 2, 1]
    assert sched.stacks[0].on_chip == ("stem.relu.out",) and sched.stacks[0].to_ddr == ("pool.out",)
    est = small.estimate(batch=4, hw=hw, schedule=sched)
    assert est.launches == 2 * 2 + 2 * 4 + (7 + 1) * 2 + 2  # the depthwise conv and fc: two kernels
    for la in est.layers[:-1]:
        first, later = la.kernels[0], la.kernels[-1]
        assert later.hbm_bytes <= first.hbm_bytes and later.cycles <= first.cycles, la.name
    conv2 = est.layer("block2.conv2")  # weights, and an input made in its stack
    assert conv2.kernels[-1].hbm_bytes < conv2.kernels[0].hbm_bytes
    alone = small.estimate(batch=4, hw=hw, schedule=small.make_schedule(4, [(1, 4)] * 12, hw=hw))
    assert est.layer("pool").kernels[0].hbm_bytes < alone.layer("pool").kernels[0].hbm_bytes
    chosen = small.estimate(batch=4, hw=hw, schedule="l2").schedule
    assert [n for st in chosen.stacks for n in st.layers] == [la.name for la in est.layers]
    assert all(st.images * st.slices == 4 for st in chosen.stacks)


def test_make_schedule_refuses_what_cannot_run(small):
    with pytest.raises(InputError, match="divisor"):
        small.make_schedule(4, [(11, 3), (1, 4)])
    with pytest.raises(InputError, match="add up to 12"):
        small.make_schedule(4, [(5, 4)])
    with pytest.raises(InputError, match="fc"):
        small.make_schedule(4, [(10, 4), (2, 4)])
    with pytest.raises(InputError, match="batch 4"):
        small.estimate(batch=2, schedule=small.make_schedule(4, [(11, 4), (1, 4)]))


def test_roles_follow_the_stack(small):
    """Inside a stack a layer finds its input in L2 where an earlier layer of the stack made it;
    slices after the first find the weights and bias row; a stack's first layer reads its input
    from DRAM."""
    net = _network(small, npu_jax.presets.ascend310p())
    names = [la.name for la in net.kernels]
    i = names.index("block1.conv1")
    k = names.index("block1.conv2")  # reads block1.conv1's output; its residual is the pool's output
    assert net.roles(i, i, False) == ()
    assert net.roles(i, k, False) == ("x", "res")  # the pool's output: block1.conv1 read it first
    assert net.roles(k, k, True) == ("w", "row")


def _covers(n, alone):
    """Every cover of [0, n) by consecutive stacks of at most MAX_LAYERS layers, layers marked
    ``alone`` in stacks of their own."""
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0] + [k + 1 for k, c in enumerate(cuts) if c] + [n]
        stacks = list(zip(bounds, bounds[1:]))
        if all(j - i <= MAX_LAYERS and (j - i == 1 or not any(alone[i:j])) for i, j in stacks):
            yield stacks


def test_choice_is_the_cheapest_cover(small):
    """The dynamic programme against every cover of small_cnn's layers, on random stack prices: the
    same least total, and the stacks it returns add up to it."""
    hw = npu_jax.presets.ascend310p().replace(l2_bytes=48 * 1024)
    net = _network(small, hw)
    n, batch = len(net.kernels), 8
    rng = np.random.default_rng(3)
    table = {}

    def options(i, j):  # as choose() takes them: the largest fitting slice; one layer also whole
        fit = None
        if not net.alone[i]:
            fit = next(
                (
                    b
                    for b in sorted(divisors(batch), reverse=True)
                    if net.peak(i, j, b, batch // b) <= hw.l2_bytes
                ),
                None,
            )
        opts = [fit] if fit is not None else []
        return opts + ([batch] if j - i == 1 and fit != batch else [])

    def price(i, j, images):
        key = (i, j, images)
        if key not in table:
            table[key] = int(rng.integers(1, 1000)) * (j - i)
        return table[key], key

    stacks, kept = choose(net, batch, hw.l2_bytes, price)
    got = sum(table[k] for k in kept)
    want = min(
        sum(min(price(i, j, b)[0] for b in options(i, j)) if options(i, j) else 10**9 for i, j in cover)
        for cover in _covers(n, net.alone)
    )
    assert got == want
    assert [(k[0], k[1]) for k in kept] == [
        (sum(len(s.layers) for s in stacks[:m]), sum(len(s.layers) for s in stacks[: m + 1]))
        for m in range(len(stacks))
    ]


def test_schedule_is_checked(small):
    with pytest.raises(InputError, match="schedule"):
        small.estimate(batch=1, schedule="stacks")
    with pytest.raises(InputTypeError, match="schedule"):
        small.run(np.zeros((1, 3, 16, 16), np.float32), schedule=None)


def test_one_layer_stacks_are_the_layer_schedule(small):
    """``schedule="layer"`` (the default) names itself and has no stacks; an "l2" schedule of one-layer,
    one-slice stacks runs each layer's kernels exactly as the layer schedule does, and differs from it
    only by the stacks' DRAM waits (the write-backs the layer schedule leaves off the clock)."""
    hw = npu_jax.presets.ascend310p()
    a = small.estimate(batch=2, hw=hw)
    assert (
        a.schedule.kind == "layer" and a.schedule.stacks == () and all(la.wait_cycles == 0 for la in a.layers)
    )
    b = small.estimate(batch=2, hw=hw, schedule=small.make_schedule(2, [(1, 2)] * 12, hw=hw))
    for x, y in zip(a.layers, b.layers, strict=True):
        assert [k.cycles for k in x.kernels] == [k.cycles for k in y.kernels], x.name
    assert b.cycles == a.cycles + sum(la.wait_cycles for la in b.layers)


def test_trace_shows_the_stacks(small, tmp_path):
    """The Perfetto trace of an "l2" estimate: one span a (stack, slice) on the stacks track, naming
    what stayed on chip, each kernel in the order it runs, the whole as long as the report."""
    hw = npu_jax.presets.ascend310p().replace(l2_bytes=40 * 1024)
    est = small.estimate(
        batch=4, hw=hw, schedule=small.make_schedule(4, [(2, 2), (2, 1), (7, 2), (1, 4)], hw=hw)
    )
    ev = json.loads(open(est.to_chrome_trace(tmp_path / "l2.json")).read())["traceEvents"]
    spans = [e for e in ev if e.get("tid") == 2 and e["ph"] == "X"]
    assert [e["name"].split(" (")[0] for e in spans] == [
        f"stack {n} slice {sl}" for n, st in enumerate(est.schedule.stacks) for sl in range(st.slices)
    ]
    assert spans[0]["args"]["on_chip"] == ["stem.relu.out"]
    kernels = [e for e in ev if e.get("tid") == 1 and e["ph"] == "X" and e["name"] != "DRAM wait"]
    assert (
        kernels[0]["name"] == "stem.conv [conv] slice 0" and kernels[2]["name"] == "stem.conv [conv] slice 1"
    )
    mhz = hw.clock_ghz * 1e3
    assert abs(spans[-1]["ts"] + spans[-1]["dur"] - est.cycles / mhz) < 1e-6
    assert "stack" in est.summary()


def test_cli_model_schedule(capsys):
    from npu_jax.cli import main

    assert (
        main(["model", "small_cnn", "--image", "8", "--preset", "310p", "--batch", "2", "--schedule", "l2"])
        == 0
    )
    out = capsys.readouterr().out
    assert "schedule 'l2', batch 2" in out and "images/s" in out


def test_a_fixed_batch_is_not_sliced():
    """A Reshape that fixes the batch (2) cannot take a slice of it: the model's choice runs every
    stack over the whole batch, and a schedule given with slices is refused by name."""
    rng = np.random.default_rng(0)
    g = G(rng, 4, 8, batch=2)
    c = g.op("Relu", [g.conv("x", "c1", 4, 8)], "r1")
    r = g.op(
        "Reshape", [g.op("Relu", [g.conv(c, "c2", 8, 4)], "r2"), g.const("shape", np.array([2, 256]))], "flat"
    )
    g.inits[-1] = numpy_helper.from_array(np.array([2, 256], np.int64), "shape")
    y = g.op("Gemm", [r, g.const("fc.b", rng.standard_normal((256, 3)))], "fc")
    m = npu_jax.model.load(g.model(y, [3]))
    hw = npu_jax.presets.ascend310p().replace(l2_bytes=4096)
    rep = m.estimate(batch=2, hw=hw, schedule="l2")
    assert all(st.slices == 1 for st in rep.schedule.stacks), rep.schedule.table()
    with pytest.raises(InputError, match="fixes its batch"):
        m.make_schedule(2, [(2, 1), (1, 2)], hw=hw)

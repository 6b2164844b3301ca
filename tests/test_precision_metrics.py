"""precision.compare and the budgets against hand-computed values and the facts sheet's figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from precision import Budget, Policy, assert_within_budget, compare, gamma, gamma_K, layer_bounds, prob_bound
from precision.budgets import budget_for, gamma_tilde


def test_compare_against_hand_computed(rng):
    # binade [1, 2): fp16 ulp = 2^-10; on a 2^-20 grid, so out - ref is exactly k ulps (a uniform
    # draw made it k ulps +- float64 noise, and ulp_above_1 then counted some 1-ulp errors)
    ref = 1.0 + rng.integers(0, 2**20, 1000) * 2.0**-20
    k = rng.integers(-3, 4, 1000)
    out = ref + k * 2.0**-10
    m = compare(out, ref, fmt="fp16")
    d = out - ref
    assert m.rel_l2 == pytest.approx(np.linalg.norm(d) / np.linalg.norm(ref), rel=1e-12)
    assert m.max_abs == pytest.approx(np.max(np.abs(d)), rel=1e-12)
    assert m.ulp_max == pytest.approx(np.max(np.abs(k)), rel=1e-9)
    assert m.ulp_mean == pytest.approx(np.mean(np.abs(k)), rel=1e-9)
    assert m.ulp_above_1 == pytest.approx(np.mean(np.abs(k) > 1 + 1e-9))
    assert m.cosine == pytest.approx(np.dot(out, ref) / np.linalg.norm(out) / np.linalg.norm(ref), rel=1e-12)
    assert m.balance == pytest.approx(abs(np.sum(k > 0) - np.sum(k < 0)) / 1000)
    assert m.vendor_ratio == pytest.approx(np.mean(np.abs(d) / ref <= 1e-3))
    assert m.fmt == "fp16" and m.n == 1000 and m.componentwise is None


def test_compare_floor_counts_and_componentwise(rng):
    ref = rng.standard_normal(500)
    ref[:5] = 1e-12  # near-zero references must not blow up max_rel
    out = ref + 1e-6
    m = compare(out, ref, floor=1e-3)
    assert m.max_rel == pytest.approx(1e-6 / (1e-3 * np.max(np.abs(ref))), rel=1e-6)
    s = np.abs(ref) * 10
    assert compare(out, ref, abs_ref=s).componentwise == pytest.approx(np.max(1e-6 / s), rel=1e-9)
    o16 = np.array([np.inf, np.nan, 0.0, 1e-6, 1.0, -np.inf], np.float16)
    r = np.array([70000.0, 1.0, 1e-9, 1e-6, 1.0, np.inf])
    c = compare(o16, r)
    assert (c.n_overflow, c.n_nan, c.n_underflow, c.n_subnormal) == (1, 1, 1, 1)
    assert not c.finite and not math.isfinite(c.rel_l2)


def test_compare_truncation_shows_in_balance(rng):
    from precision import round_to

    x = rng.uniform(0.5, 4, 4096).astype(np.float32)
    tz = compare(round_to(x, "fp16", "toward_zero"), x)
    ne = compare(round_to(x, "fp16"), x)
    assert tz.balance > 0.95 and ne.balance < 0.1
    assert ne.ulp_max <= 0.5 and tz.ulp_max <= 1.0


def test_compare_errors():
    with pytest.raises(ValueError, match="shape"):
        compare(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="floor"):
        compare(np.ones(3), np.ones(3), floor=0)


def test_bounds_match_the_facts_sheet():
    assert gamma_K(576, "fp16") == pytest.approx(0.39, abs=0.005)
    assert gamma_K(2048, "fp16") == math.inf  # no bound from K = 2048
    assert gamma_K(4608, "fp32") == pytest.approx(2.7e-4, rel=0.02)
    assert prob_bound(576, "fp16", 6) == pytest.approx(6 * 24 * 2.0**-11)
    assert gamma_tilde(576, 2.0**-11, 6) == pytest.approx(prob_bound(576, "fp16", 6), rel=0.08)
    assert gamma(10, 0.1) == math.inf and gamma(0, 0.5) == 0


def test_layer_bounds_follow_the_policy_chain():
    K = 576
    hw_default = layer_bounds(K)  # fp32 accumulation, fp16 out: ~u_fp16 + gamma_K(2^-24)
    assert hw_default.deterministic == pytest.approx(2.0**-11 + gamma(K, 2.0**-24), rel=1e-3)
    mac = layer_bounds(K, Policy(accumulate="fp16_mac"))
    assert mac.chain == K and mac.deterministic == pytest.approx(gamma_K(K, "fp16"), rel=0.01)
    step = layer_bounds(K, Policy(accumulate="fp16_step"))
    assert step.chain == K // 16 and step.deterministic < mac.deterministic
    assert layer_bounds(4096, Policy(accumulate="fp16_mac")).deterministic == math.inf
    assert layer_bounds(4096, Policy(accumulate="fp16_mac")).probabilistic < 1
    tz = layer_bounds(K, Policy(rounding="toward_zero"))
    assert tz.deterministic == pytest.approx(2 * 2.0**-11 + gamma(K, 2.0**-24), rel=1e-3)
    with pytest.raises(ValueError, match="k_tile"):
        layer_bounds(K, Policy(accumulate="fp16_tile"))


def test_assert_within_budget_message_lists_every_metric(rng):
    ref = rng.standard_normal(100)
    m = compare(ref * (1 + 1e-2), ref)
    ok = Budget("loose", max_={"rel_l2": 0.1, "n_nan": 0}, min_={"cosine": 0.99})
    assert_within_budget(m, ok)
    tight = Budget("tight", max_={"rel_l2": 1e-3, "n_nan": 0}, min_={"cosine": 0.99})
    with pytest.raises(AssertionError) as e:
        assert_within_budget(m, tight)
    msg = str(e.value)
    assert "rel_l2" in msg and "OVER BUDGET" in msg and "cosine" in msg and "n_nan" in msg and "0.001" in msg
    with pytest.raises(ValueError, match="unknown metric"):
        Budget("bad", max_={"rel_err": 1})
    assert budget_for("mixed", "growing").max_["rel_l2"] == 1e-3
    with pytest.raises(KeyError, match="no budget"):
        budget_for("mixed", "nope")

"""The vendor's API list row by row (npu_jax/asc/coverage.py): every call asc runs exists, every call it
refuses raises NotImplementedError naming the call and why (never AttributeError), and docs/kernels.md
prints every row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from npu_jax import asc
from npu_jax.asc import coverage

DOC = (Path(__file__).parent.parent / "docs" / "kernels.md").read_text()


@pytest.mark.parametrize("name", sorted(coverage.REFUSED))
def test_a_refused_call_names_itself_and_why(name):
    vendor, _, why = coverage.REFUSED[name]
    with pytest.raises(
        NotImplementedError, match=rf"asc\.{name} \(the vendor's {vendor}.*{re.escape(why[:20])}"
    ):
        getattr(asc, name)()


def test_every_supported_call_exists_and_every_row_is_in_the_guide():
    for family, rows in coverage.SUPPORTED.items():
        for vendor, names in rows.items():
            for n in re.findall(r"[a-z_A-Z]\w*", names):
                methods = ("t", "get_value", "set_value", "reinterpret_cast")  # LocalTensor's
                assert n in methods or hasattr(asc, n), n
            assert vendor in DOC, f"docs/kernels.md lacks the row {vendor!r} ({family})"
    for vendor, _, _ in coverage.REFUSED.values():
        assert f"`{vendor}`" in DOC, f"docs/kernels.md lacks the refused call {vendor}"


def test_no_call_is_both_run_and_refused():
    both = sorted(n for n in coverage.REFUSED if n in vars(asc))
    assert not both, f"asc runs these, yet coverage.REFUSED still refuses them: {both}"


def test_a_name_of_no_call_is_an_attribute_error_that_says_where_to_look():
    with pytest.raises(AttributeError, match="docs/kernels.md"):
        asc.not_a_call  # noqa: B018

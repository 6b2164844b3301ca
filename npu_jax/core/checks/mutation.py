"""The mutation test: remove each WaitFlag of a kernel in turn, and count the mutants a check reports.

The mutation is a *flag transform* (``sites.flag_transform``): it sees every flag op traced inside
:func:`mutate` through the flag hook, before the op runs, and predicates the chosen WaitFlag off.
``sync.py`` knows nothing of it.
"""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import jax.numpy as jnp

from npu_jax.core.checks.sites import FlagOp, caller, flag_transform
from npu_jax.core.findings import all_findings
from npu_jax.errors import SanitizerError


class Mutation:
    """Makes the ``skip``-th WaitFlag traced inside :func:`mutate` a no-op (``skip`` may be traced,
    so one compiled program serves every mutant). ``sites`` lists every WaitFlag traced."""

    def __init__(self, skip):
        self.skip = skip
        self.sites: list[str] = []

    def __call__(self, op: FlagOp) -> FlagOp:
        if op.name != "WaitFlag":
            return op
        i = len(self.sites)
        self.sites.append(caller())
        return op._replace(when=jnp.asarray(op.when, jnp.bool_) & (jnp.asarray(self.skip, jnp.int32) != i))


@contextlib.contextmanager
def mutate(skip_wait):
    """Inside the block, the ``skip_wait``-th WaitFlag call traced (Queue DeQue/AllocTensor and
    drains included) is removed; -1 removes none. Yields the :class:`Mutation`."""
    with flag_transform(Mutation(skip_wait)) as m:
        yield m


@dataclasses.dataclass
class MutationResult:
    """Outcome of :func:`sweep_waits`: how many single-WaitFlag mutants the checks caught."""

    name: str
    mutants: int
    caught: int
    by_race: int
    escaped: list  # source lines of WaitFlags whose removal no check reported

    @property
    def figure(self) -> str:
        pct = 100.0 * self.caught / max(1, self.mutants)
        return (
            f"{self.name}: {self.caught}/{self.mutants} WaitFlag mutants caught ({pct:.0f}%), "
            f"{self.by_race} of them by racecheck"
        )


def sweep_waits(run, name: str = "kernel") -> MutationResult:
    """Remove each WaitFlag of a kernel in turn and count the mutants a check reports.

    ``run()`` runs the kernel and returns its Report (or a SequenceReport, or a tuple whose last
    item is one; every launch inside is swept, relayout and element-wise kernels included). It is
    traced once under ``jax.jit`` with the mutant index as an argument: one compile for all
    mutants. The unmutated run (index -1) must report nothing.
    """
    counts = []

    def one(k):
        with mutate(k) as m:
            out = run()
        counts.append(len(m.sites))
        sites.extend(m.sites)
        return out[-1] if isinstance(out, tuple) else out

    sites: list[str] = []
    f = jax.jit(one)
    base = f(jnp.int32(-1))
    found = all_findings(base)
    if found:
        raise SanitizerError(
            f"{name}: the unmutated kernel already reports findings:\n"
            + "\n".join(x.message() for x in found)
        )
    n = counts[0]
    caught = by_race = 0
    escaped = []
    for k in range(n):
        found = all_findings(f(jnp.int32(k)))
        checks = {x.check for x in found}
        if checks & {"racecheck", "synccheck"}:
            caught += 1
            by_race += "racecheck" in checks
        else:
            escaped.append(sites[k])
    return MutationResult(name, n, caught, by_race, escaped)

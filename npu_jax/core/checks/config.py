"""Which sanitizers a launch runs (:class:`Checks`), and the process default that ``checks=None``
means: ``NPU_JAX_CHECKS`` (``all``/``none``/comma-separated names; ``none`` if unset), or whatever
:func:`set_default_checks` / :func:`default_checks` set (the test suite turns them all on).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

from npu_jax.core.checks.columns import CHECK_NAMES
from npu_jax.errors import ConfigError, InputError, InputTypeError

ACTIONS = ("raise", "warn")


@dataclasses.dataclass(frozen=True)
class Checks:
    """The sanitizers a launch runs, and what happens to their findings.

    Attributes:
        enabled: a subset of ``("racecheck", "memcheck", "initcheck", "synccheck")``.
        action: ``"raise"`` (a :class:`~npu_jax.errors.SanitizerError` after the run) or ``"warn"``
            (a :class:`~npu_jax.errors.SanitizerWarning`).
        capacity: log rows per core (one per instruction call, flag ops, tile marks and
            predicated-off calls included); a run that makes more is checked up to this many and
            warns.
        inline: run the analysis of the log inside the kernel's own program (the Report then
            carries only the findings) rather than as a separate program, compiled once per
            process and shape, when the Report is checked. Both give the same findings; ``False``
            keeps the kernel's compile time low.

    Example:
        >>> Checks.parse("all").enabled == frozenset(CHECK_NAMES)
        True
        >>> Checks.parse(("racecheck", "synccheck"), action="warn").action
        'warn'
    """

    enabled: frozenset = frozenset()
    action: str = "raise"
    capacity: int = 1 << 14
    inline: bool = False

    def __post_init__(self):
        bad = sorted(set(self.enabled) - set(CHECK_NAMES))
        if bad:
            raise InputError(f"checks: unknown check(s) {bad}; choose from {CHECK_NAMES}, 'all' or 'none'.")
        if self.action not in ACTIONS:
            raise InputError(f"checks: action must be one of {ACTIONS}, got {self.action!r}.")
        if not isinstance(self.capacity, int) or isinstance(self.capacity, bool) or self.capacity < 16:
            raise InputError(
                f"checks: capacity (log rows per core) must be an int >= 16, got {self.capacity!r}."
            )
        object.__setattr__(self, "enabled", frozenset(self.enabled))

    @classmethod
    def parse(cls, value, action: str | None = None) -> Checks:
        """Canonicalise ``checks=``: None (the process default), ``"all"``, ``"none"``, one name,
        a comma-separated string, an iterable of names, or a :class:`Checks`."""
        if value is None:
            base = _DEFAULT[0]
            return base if action is None else dataclasses.replace(base, action=action)
        if isinstance(value, Checks):
            return value if action is None else dataclasses.replace(value, action=action)
        if isinstance(value, str):
            names = [v.strip().lower() for v in value.split(",") if v.strip()]
        else:
            try:
                names = [str(v).strip().lower() for v in value]
            except TypeError:
                raise InputTypeError(
                    f"checks must be None, 'all', 'none', a check name or a tuple of "
                    f"names from {CHECK_NAMES}; got {value!r}."
                ) from None
        if names in (["all"], ["on"], ["true"]):
            names = list(CHECK_NAMES)
        elif names in (["none"], ["off"], ["false"], []):
            names = []
        return cls(frozenset(names), action or "raise")

    @property
    def race(self) -> bool:
        return "racecheck" in self.enabled

    @property
    def mem(self) -> bool:
        return "memcheck" in self.enabled

    @property
    def init(self) -> bool:
        return "initcheck" in self.enabled

    @property
    def sync(self) -> bool:
        return "synccheck" in self.enabled

    @property
    def any(self) -> bool:
        return bool(self.enabled)

    def __str__(self) -> str:
        return ",".join(n for n in CHECK_NAMES if n in self.enabled) or "none"


def _env_default() -> Checks:
    raw = os.environ.get("NPU_JAX_CHECKS", "none")
    try:
        return Checks.parse(raw)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"environment variable NPU_JAX_CHECKS={raw!r}: {e}") from None


_DEFAULT = [_env_default()]


def set_default_checks(value) -> Checks:
    """Set the checks that ``checks=None`` means, for the whole process; returns the previous ones.

    Programs already traced keep the checks they were traced with (the choice is static)."""
    old = _DEFAULT[0]
    _DEFAULT[0] = Checks.parse(value if value is not None else "none")
    return old


def get_default_checks() -> Checks:
    return _DEFAULT[0]


@contextlib.contextmanager
def default_checks(value):
    """``with default_checks("none"): ...`` -- the process default, for a block."""
    old = set_default_checks(value)
    try:
        yield _DEFAULT[0]
    finally:
        _DEFAULT[0] = old

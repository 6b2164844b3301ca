"""Which sanitizers a launch runs (:class:`Checks`), and the process default that ``checks=None``
means: ``NPU_JAX_CHECKS`` (``all``/``none``/comma-separated names; ``none`` if unset), or whatever
:func:`set_default_checks` / :func:`default_checks` set (the test suite turns them all on).

The variable is read when the default is asked for, not once at import, so a value set later in
the session (``os.environ[...]`` in a notebook) takes effect, and a value that is not a checks
setting is refused (a :class:`~npu_jax.errors.ConfigError` naming it) whenever it is read -- even
while :func:`set_default_checks` overrides it -- never silently ignored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import os

from npu_jax.core.checks.columns import CHECK_NAMES
from npu_jax.errors import ConfigError, InputError, InputTypeError

ACTIONS = ("raise", "warn")
ALL_WORDS = ("all", "on", "true")  # every check
NONE_WORDS = ("none", "off", "false")  # no check (as is an empty value)
ENV = "NPU_JAX_CHECKS"


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
            base = get_default_checks()
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
        if len(names) == 1 and names[0] in ALL_WORDS:
            names = list(CHECK_NAMES)
        elif not names or (len(names) == 1 and names[0] in NONE_WORDS):
            names = []
        elif any(n in ALL_WORDS + NONE_WORDS for n in names):
            raise InputError(
                f"checks: {value!r} mixes 'all'/'none' with other names; give 'all', 'none' or only "
                f"check names from {CHECK_NAMES}."
            )
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


def checks_from_env(environ=None) -> Checks:
    """The checks ``NPU_JAX_CHECKS`` asks for (``none`` when unset or empty), read now.

    Raises:
        ConfigError: the value is not ``all`` / ``none`` (or ``on``/``true``, ``off``/``false``) or
            comma-separated names of checks; the message names the variable, the value and what it
            accepts.
    """
    raw = (os.environ if environ is None else environ).get(ENV, "")
    return _parse_env(raw)


@functools.lru_cache(maxsize=8)
def _parse_env(raw: str) -> Checks:
    try:
        return Checks.parse(raw)
    except (ValueError, TypeError):
        pass
    names = [v.strip().lower() for v in raw.split(",") if v.strip()]
    unknown = [n for n in names if n not in CHECK_NAMES + ALL_WORDS + NONE_WORDS]
    if unknown:
        close = {n: difflib.get_close_matches(n, CHECK_NAMES, n=1) for n in unknown}
        hints = [f"{n!r} (did you mean {c[0]!r}?)" if c else repr(n) for n, c in close.items()]
        what = f"unknown name{'s' if len(unknown) > 1 else ''} {', '.join(hints)}"
    else:
        what = "'all' and 'none' stand alone, not in a list"
    raise ConfigError(
        f"environment variable {ENV}={raw!r}: {what}. It accepts 'all' (also {', '.join(ALL_WORDS[1:])}), "
        f"'none' (also {', '.join(NONE_WORDS[1:])}, empty or unset) or comma-separated names from "
        f"{', '.join(CHECK_NAMES)}, e.g. {ENV}=racecheck,memcheck."
    ) from None


# None: follow the environment variable; a Checks: set_default_checks / default_checks chose it
_DEFAULT: list[Checks | None] = [None]


def set_default_checks(value) -> Checks:
    """Set the checks that ``checks=None`` means, for the whole process; returns the previous ones.

    Programs already traced keep the checks they were traced with (the choice is static)."""
    old = get_default_checks()
    _DEFAULT[0] = Checks.parse(value if value is not None else "none")
    return old


def get_default_checks() -> Checks:
    """What ``checks=None`` means now: :func:`set_default_checks`'s choice, else ``NPU_JAX_CHECKS``
    (read now; a bad value raises a ConfigError even while a choice overrides it)."""
    env = checks_from_env()
    return env if _DEFAULT[0] is None else _DEFAULT[0]


@contextlib.contextmanager
def default_checks(value):
    """``with default_checks("none"): ...`` -- the process default, for a block."""
    old = _DEFAULT[0]
    set_default_checks(value)
    try:
        yield _DEFAULT[0]
    finally:
        _DEFAULT[0] = old

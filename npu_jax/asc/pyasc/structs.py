"""pyasc's tiling structs (``asc.adv.TCubeTiling``, ``asc.adv.SoftmaxTiling``): int fields, default
0, made on the host by keyword (``TCubeTiling(m=256, n=256, ...)``; an unknown name raises), read and
assigned in a kernel (``tiling.share_l1_size = asc.property(asc.TOTAL_L1_SIZE)``).

A launch passes a struct to the kernel as a copy, as pyasc does (the kernel's assignments stay in
the kernel): :meth:`Struct.freeze` makes the launch's static value, :meth:`Frozen.thaw` the kernel's
copy. A field read gives an ``Int``, which has pyasc's ``.ceildiv``.
"""

from __future__ import annotations

import dataclasses

from npu_jax.asc.pyasc.lang import Int


class Struct:
    """A struct of int fields: ``FIELDS`` lists (name, default) in the declaration order."""

    FIELDS: tuple = ()

    def __init__(self, **fields):
        names = {n for n, _ in self.FIELDS}
        unknown = sorted(set(fields) - names)
        if unknown:
            raise TypeError(
                f"{type(self).__name__} has no field(s) {unknown}; its fields: {[n for n, _ in self.FIELDS]}."
            )
        values = {n: d for n, d in self.FIELDS}
        values.update(fields)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name):
        values = self.__dict__.get("_values", {})
        if name in values:
            v = values[name]
            return Int(v) if isinstance(v, int) and not isinstance(v, bool) else v
        raise AttributeError(f"{type(self).__name__} has no field {name!r}.")

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}.")
        self._values[name] = int(value) if isinstance(value, Int) else value

    def fields(self) -> dict:
        """The fields' values by name, in declaration order."""
        return dict(self._values)

    def freeze(self) -> Frozen:
        """A hashable snapshot (the launch's static argument)."""
        return Frozen(type(self), tuple(self._values.items()))

    def __eq__(self, other):
        return type(other) is type(self) and other._values == self._values

    __hash__ = None

    def __repr__(self) -> str:
        set_ = ", ".join(f"{n}={v}" for (n, d), v in zip(self.FIELDS, self._values.values()) if v != d)
        return f"asc.adv.{type(self).__name__}({set_})"


@dataclasses.dataclass(frozen=True)
class Frozen:
    """A struct argument as the launch keeps it (static, hashable); ``thaw`` is the kernel's copy."""

    cls: type
    items: tuple

    def thaw(self) -> Struct:
        return self.cls(**dict(self.items))


def _fields(names: str, default=0) -> tuple:
    return tuple((n, default) for n in names.split())


class TCubeTiling(Struct):
    """``TCubeTiling``: the Matmul's tiling (the vendor's C++ struct; int32 fields, default 0). The
    emulator's Matmul reads m, n, k_a, single_core_*, base_*, depth_a1 / depth_b1, step_k_a / step_k_b,
    db_l0a / db_l0b and iterate_order; the others are carried."""

    FIELDS = _fields(
        "used_core_num m n k_a k_b single_core_m single_core_n single_core_k base_m base_n base_k depth_a1 "
        "depth_b1 step_m step_n is_bias trans_length iterate_order share_mode share_l1_size share_l0c_size "
        "share_ub_size batch_m batch_n single_batch_m single_batch_n step_k_a step_k_b depth_a_l1_cache_ub "
        "depth_b_l1_cache_ub db_l0a db_l0b db_l0c a_layout_info_b a_layout_info_s a_layout_info_n "
        "a_layout_info_g a_layout_info_d b_layout_info_b b_layout_info_s b_layout_info_n b_layout_info_g "
        "b_layout_info_d c_layout_info_b c_layout_info_s1 c_layout_info_n c_layout_info_g c_layout_info_s2 "
        "batch_num"
    )


class SoftmaxTiling(Struct):
    """``SoftmaxTiling``: the softmax's tiling (int32 fields, default 0)."""

    FIELDS = _fields(
        "src_m src_k src_size out_max_m out_max_k out_max_size split_m split_k split_size reduce_m reduce_k "
        "reduce_size range_m tail_m tail_split_size tail_reduce_size"
    )

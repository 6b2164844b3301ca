"""Programs written on the core instruction set (the public entry points are in ``npu_jax.api``)."""

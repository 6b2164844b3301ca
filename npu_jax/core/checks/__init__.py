"""The sanitizers' parts: column layouts, configuration, site table, event log, the four checkers,
the replay that runs them, and the mutation test. ``npu_jax.core.sanitize`` is the front door (the
hooks that ``issue`` and the flags call, and the public names)."""

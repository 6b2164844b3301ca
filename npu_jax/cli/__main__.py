"""``python -m npu_jax.cli``: the ``npu-jax`` command."""

import sys

from npu_jax.cli import main

sys.exit(main())

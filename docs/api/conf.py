"""Sphinx configuration of the API reference, generated from the docstrings (Google style).

Build it with ``python -m sphinx -W -b html docs/api build/docs`` from the repository root;
``tests/test_api_docs.py`` builds it in the suite so that it cannot rot.
"""

import sys
from pathlib import Path

# the repository root, so that a build from a plain checkout documents this tree's packages
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

project = "npu-jax"
author = "npu-jax contributors"
copyright = "npu-jax contributors, Apache-2.0"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": False}

master_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []

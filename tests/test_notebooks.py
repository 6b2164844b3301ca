"""Every notebook under notebooks/ executes top to bottom without a cell error.

The notebooks run in a fresh ``python3`` kernel of this interpreter. If no ``python3`` kernel spec is
registered (ipykernel installed without its data files), one is installed for this interpreter into a
temporary prefix for the session, so nothing is written to the user's home.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 300  # per cell; each notebook is written to run in under two minutes on 2 CPUs


@pytest.fixture(scope="session")
def python3_kernel(tmp_path_factory):
    """The name of a kernel spec that starts this interpreter."""
    from jupyter_client.kernelspec import KernelSpecManager

    if "python3" in KernelSpecManager().find_kernel_specs():
        yield "python3"
        return
    prefix = tmp_path_factory.mktemp("jupyter")
    subprocess.run(
        [sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", "python3"],
        check=True,
        capture_output=True,
    )
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(prefix / "share" / "jupyter"), old]))
    yield "python3"
    if old is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = old


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, python3_kernel):
    nb = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{path.name} is committed with outputs; clear them (Kernel > Restart & Clear Output)"
    )
    client = nbclient.NotebookClient(
        nb, timeout=TIMEOUT_S, kernel_name=python3_kernel, resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:  # names the cell and shows its traceback
        pytest.fail(f"{path.name}: a cell raised:\n{e}")
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors

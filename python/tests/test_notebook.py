"""examples/sweep.ipynb runs from top to bottom (nbclient, a real kernel),
so the example cannot rot."""

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweep_notebook_executes(monkeypatch):
    nb = nbformat.read(ROOT / "examples" / "sweep.ipynb", as_version=4)
    monkeypatch.setenv("IRQLAB_ROOT", str(ROOT))
    monkeypatch.setenv("SWEEP_DURATION", "0.5s")  # the notebook's own default is 2 s
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "examples")}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plot is missing"
    table = next(o for o in outputs if "text/html" in o.get("data", {}))
    assert "policy.gain" in table["data"]["text/html"]

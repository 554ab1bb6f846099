"""notebooks/explore_run.ipynb: committed without outputs, and every cell runs on a small simulated mining run."""

from __future__ import annotations

import nbformat
import pytest
import ray
import yaml
from nbclient import NotebookClient

from pipelines import mine
from tests.handmade_run import REPO

NOTEBOOK = REPO / "notebooks" / "explore_run.ipynb"
CELL_TIMEOUT_S = 120
SIM_LABEL = yaml.safe_load((REPO / "conf" / "report.yaml").read_text())["sim_label"]


def test_notebook_is_committed_with_outputs_stripped():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo preset on one of its seed files, with a fast simulated Lean."""
    run_dir = tmp_path_factory.mktemp("notebook") / "run"
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        assert mine.main(["preset=demo", f"run_dir={run_dir}", "seeds.list=[Mathlib/Order/Clamp.lean]",
                          "lean.sim.import_s=0.05", "lean.sim.check_s=0.01", "lean.sim.burn_cpu=false"]) == 0
    finally:
        ray.shutdown()
    return run_dir


@pytest.mark.ray
def test_every_cell_runs_on_a_simulated_run_and_draws_its_figures(demo_run, monkeypatch):
    monkeypatch.setenv("FOLKLORE_RUN_DIR", str(demo_run))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(demo_run.parent)}}).execute()  # a failing cell raises
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    markdown = [output["data"]["text/markdown"] for output in outputs if "text/markdown" in output.get("data", {})]
    assert any(SIM_LABEL in text for text in markdown), "the notebook says the run is simulated"
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) == 6, "funnel, Success@t, overlap, cost, time, rejections"

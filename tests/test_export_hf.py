"""The export as a Hugging Face dataset: `datasets.load_dataset(EXPORT_DIR, CONFIG)` reads each corpus of the
hand-built run (tests/handmade_run.py) through the card the export writes, with its train/test split."""

from __future__ import annotations

import json

import datasets
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines import export
from pipelines.reporting.corpora import SCHEMAS
from tests.handmade_run import write_run

CORPORA = ("pairs", "trajectories", "judge")
BOTH_SPLITS = ["split.test_fraction=0.2"]  # with the default salt: seed A goes to test, B and C to train


def card_header(export_dir) -> dict:
    """The YAML between the card's first two `---` lines."""
    text = (export_dir / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def file_ids(export_dir, corpus: str, extension: str) -> dict[str, list[str]]:
    """The row ids of each split file the export wrote for a corpus."""
    read = pq.read_table if extension == "parquet" else pajson.read_json
    return {path.stem: sorted(read(path).column("id").to_pylist())
            for path in (export_dir / corpus).glob(f"*.{extension}")}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_every_corpus_loads_with_datasets_by_config_name_with_its_train_and_test_split(tmp_path, fmt):
    run_dir = write_run(tmp_path / "run", simulated=False)
    assert export.main([f"run_dir={run_dir}", f"format={fmt}", *BOTH_SPLITS]) == 0
    export_dir = run_dir / "export"
    for corpus in CORPORA:
        loaded = datasets.load_dataset(str(export_dir), corpus, cache_dir=str(tmp_path / "hf_cache"))
        assert sorted(loaded) == ["test", "train"], corpus
        assert {split: sorted(loaded[split]["id"]) for split in loaded} == file_ids(export_dir, corpus, fmt)
        for split in loaded:
            # the card's features, not types guessed from JSON (which would read int32 columns as int64)
            assert loaded[split].features == datasets.Features.from_arrow_schema(SCHEMAS[corpus])
            assert set(loaded[split]["split"]) == {split}
            assert set(loaded[split]["simulated"]) == {False}
    messages = datasets.load_dataset(str(export_dir), "trajectories", cache_dir=str(tmp_path / "hf_cache"),
                                     split="train")[0]["messages"]
    assert messages[0]["role"] == "system" and messages[-1]["role"] == "assistant"


@pytest.mark.slow
def test_the_card_carries_license_and_the_simulated_flag_of_the_run(tmp_path):
    real = write_run(tmp_path / "real", simulated=False)
    assert export.main([f"run_dir={real}", "card.license=cc-by-4.0", *BOTH_SPLITS]) == 0
    header = card_header(real / "export")
    assert (header["license"], header["simulated"]) == ("cc-by-4.0", False)
    assert [c["config_name"] for c in header["configs"]] == list(CORPORA)
    assert "Simulated run" not in (real / "export" / "README.md").read_text()

    simulated = write_run(tmp_path / "sim", simulated=True)
    assert export.main([f"run_dir={simulated}", "allow_sim=true", *BOTH_SPLITS]) == 0
    header = card_header(simulated / "export")
    assert (header["license"], header["simulated"]) == ("apache-2.0", True)
    assert "simulated" in header["tags"]
    assert "**Simulated run.**" in (simulated / "export" / "README.md").read_text()


def test_a_split_without_rows_is_not_in_the_card_and_the_other_still_loads(tmp_path):
    run_dir = write_run(tmp_path / "run", simulated=False)
    assert export.main([f"run_dir={run_dir}", "split.test_fraction=0"]) == 0
    header = card_header(run_dir / "export")
    assert all([f["split"] for f in c["data_files"]] == ["train"] for c in header["configs"])
    loaded = datasets.load_dataset(str(run_dir / "export"), "judge", cache_dir=str(tmp_path / "hf_cache"))
    assert list(loaded) == ["train"] and loaded["train"].num_rows == 8


def card_text(export_dir) -> str:
    """The card's Markdown after its YAML header."""
    return (export_dir / "README.md").read_text().split("---\n", 2)[2]


def test_a_card_with_the_train_split_only_names_no_test_split_and_loads(tmp_path):
    run_dir = write_run(tmp_path / "run", simulated=False)
    assert export.main([f"run_dir={run_dir}", "split.test_fraction=0"]) == 0
    export_dir = run_dir / "export"
    text = card_text(export_dir)
    assert "the train split only" in text
    assert "| config | train | exact duplicates dropped |" in text
    assert "train and test" not in text and "| test |" not in text
    assert not list(export_dir.glob("*/test.*"))
    for corpus in CORPORA:
        loaded = datasets.load_dataset(str(export_dir), corpus, cache_dir=str(tmp_path / "hf_cache"))
        assert list(loaded) == ["train"], corpus


def test_a_card_with_both_splits_counts_each_and_dashes_a_split_a_corpus_lacks(tmp_path):
    run_dir = write_run(tmp_path / "run", simulated=False)
    assert export.main([f"run_dir={run_dir}", *BOTH_SPLITS]) == 0
    export_dir = run_dir / "export"
    manifest = json.loads((export_dir / "manifest.json").read_text())
    text = card_text(export_dir)
    assert "the train and test splits" in text
    assert "| config | train | test | exact duplicates dropped |" in text
    for corpus, counts in manifest["corpora"].items():
        cells = [str(counts[split]) if counts[split] else "—" for split in ("train", "test")]
        assert f"| `{corpus}` | {cells[0]} | {cells[1]} | {counts['duplicates_dropped']} |" in text

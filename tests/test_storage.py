"""Locations: local paths and filesystem URIs through one helper, a bad location refused in one line before Ray starts,
an index on object storage copied to the node, and Ray's settings for a local Ray left out when joining a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import ray

from conf import package_dir
from lean_pool.ray_start import ray_init_options
from operators.retrieval.declaration_index import FAISS_FILE, MANIFEST_FILE, TABLE_FILE, StaleIndex, node_local
from operators.storage import StorageError, join, location_of, open_location, resolve, without_options
from pipelines import autoformalize, mine, report
from pipelines import index as index_pipeline
from pipelines.runtime.run_dir import RunDir, append_file
from tests.mine_support import FAST_LEAN

OPTIONS = "endpoint_override=127.0.0.1:9000&scheme=http"
DEMO_CPUS = 10  # the demo preset's ray.num_cpus, for a Ray this test starts itself


def test_a_path_added_to_a_uri_goes_before_its_query_options():
    assert join(f"s3://bucket/run?{OPTIONS}", "discoveries") == f"s3://bucket/run/discoveries?{OPTIONS}"
    assert join(f"s3://bucket/run/?{OPTIONS}", "candidates", "a.parquet") == \
        f"s3://bucket/run/candidates/a.parquet?{OPTIONS}"
    assert join("s3://bucket/run", "logs/ray.log") == "s3://bucket/run/logs/ray.log"
    assert join("/tmp/run/", "candidates") == "/tmp/run/candidates"


def test_a_listed_file_is_written_back_as_its_base_is_written():
    assert location_of(f"s3://bucket/run?{OPTIONS}", "bucket/run", "bucket/run/candidates/x.parquet") == \
        f"s3://bucket/run/candidates/x.parquet?{OPTIONS}"
    assert location_of("/tmp/run", "/tmp/run", "/tmp/run/candidates/x.parquet") == "/tmp/run/candidates/x.parquet"
    with pytest.raises(ValueError, match="not under"):
        location_of("s3://bucket/run", "bucket/run", "bucket/other/x.parquet")


def test_messages_show_a_uri_without_its_options():
    assert without_options(f"s3://bucket/run?{OPTIONS}") == "s3://bucket/run"
    assert without_options("runs/demo") == "runs/demo"


def test_uri_options_reach_the_store(object_store, monkeypatch):
    bucket = object_store.create_bucket("options-only")
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # nothing but the URI says where the store is
    run = RunDir(f"{bucket}/run?{object_store.uri_options()}")
    run.write_table("seeds", pa_table())
    assert object_store.keys("options-only/run") == ["options-only/run/seeds/seeds.parquet"]
    assert run.file_uris("seeds") == [f"{bucket}/run/seeds/seeds.parquet?{object_store.uri_options()}"]
    filesystem, path = resolve(run.file_uris("seeds")[0])
    assert filesystem.get_file_info(path).type == pafs.FileType.File


def test_a_missing_bucket_is_one_error_line_before_ray_starts(object_store, capsys):
    assert mine.main(["preset=demo", "run_dir=s3://no-such-bucket/night"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: s3://no-such-bucket/night: Bucket 'no-such-bucket' not found. To create buckets, enable "
                   "the allow_bucket_creation option."]
    assert not ray.is_initialized()


def test_a_missing_seed_bucket_is_refused_the_same_way(object_store, tmp_path, capsys):
    assert mine.main(["preset=demo", f"run_dir={tmp_path / 'run'}", "seeds.root=s3://no-seeds-here/mathlib"]) == 2
    assert capsys.readouterr().err.startswith("error: seeds.root=s3://no-seeds-here/mathlib is not a directory")


def test_an_index_on_object_storage_is_copied_once_to_the_node(object_store, tmp_path):
    bucket = object_store.create_bucket("index-home")
    filesystem, root = open_location(f"{bucket}/index/v1")
    for name, data in ((TABLE_FILE, b"table"), (FAISS_FILE, b"faiss"), (MANIFEST_FILE, b'{"format": 2}')):
        with filesystem.open_output_stream(f"{root}/{name}") as stream:
            stream.write(data)
    local = node_local(f"{bucket}/index/v1")
    assert sorted(p.name for p in local.iterdir()) == sorted([TABLE_FILE, FAISS_FILE, MANIFEST_FILE])
    assert (local / FAISS_FILE).read_bytes() == b"faiss"
    assert node_local(f"{bucket}/index/v1") == local
    with filesystem.open_output_stream(f"{root}/{MANIFEST_FILE}") as stream:  # rebuilt: copied anew
        stream.write(b'{"format": 3}')
    assert node_local(f"{bucket}/index/v1") != local
    with pytest.raises(StaleIndex, match="no manifest.json"):
        node_local(f"{bucket}/index/none")
    assert node_local(str(tmp_path)) == tmp_path


def test_a_local_ray_setting_is_left_out_when_joining_a_cluster():
    assert ray_init_options({"address": None, "num_cpus": 5}) == ({"num_cpus": 5}, None)
    options, note = ray_init_options({"address": "auto", "num_cpus": 5})
    assert options == {"address": "auto"}
    assert note == ("note: ray.num_cpus=5 is ignored: joining the Ray cluster at auto, whose nodes declare their own "
                    "CPUs")
    assert ray_init_options({"address": "auto", "num_cpus": None}) == ({"address": "auto"}, None)
    assert ray_init_options({"address": None, "num_cpus": 5, "metrics_export_port": 8080}) == (
        {"num_cpus": 5, "_metrics_export_port": 8080}, None)
    options, note = ray_init_options({"address": "auto", "num_cpus": None, "metrics_export_port": 8080})
    assert options == {"address": "auto"}
    assert note == ("note: ray.metrics_export_port=8080 is ignored: joining the Ray cluster at auto, whose nodes "
                    "declare their own metrics port (ray start --metrics-export-port)")


def test_an_unreadable_uri_is_a_storage_error():
    with pytest.raises(StorageError, match="nosuchscheme"):
        resolve("nosuchscheme://bucket/run")


def pa_table():
    import pyarrow as pa

    return pa.table({"seed_id": ["a"], "status": ["ok"]})


def upload_tree(filesystem: pafs.FileSystem, local_root: Path, target: str) -> None:
    """Copy every file under `local_root` to `target` (a path on `filesystem`), keeping relative paths."""
    for path in sorted(local_root.rglob("*")):
        if path.is_file():
            with filesystem.open_output_stream(f"{target}/{path.relative_to(local_root)}") as stream:
                stream.write(path.read_bytes())


@pytest.mark.ray
def test_mining_with_seeds_index_and_run_on_object_storage_named_by_uri_options_alone(
        object_store, mathlib_sample_dir, tmp_path, monkeypatch, capsys):
    bucket = object_store.create_bucket("mine-by-options")
    options = object_store.uri_options()
    filesystem, root = open_location(bucket)
    upload_tree(filesystem, Path(package_dir("pipelines/demo_seeds")), f"{root}/seeds")
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # nothing but the URIs says where the store is, in any Ray process
    run_dir = f"{bucket}/run?{options}"
    ray.init(num_cpus=DEMO_CPUS, include_dashboard=False, log_to_driver=False)
    try:
        assert index_pipeline.main([f"mathlib_dir={mathlib_sample_dir}", f"out='{bucket}/index?{options}'",
                                    "include=[Mathlib/Logic/Basic.lean]"]) == 0
        assert mine.main(["preset=demo", f"seeds.root='{bucket}/seeds?{options}'", f"run_dir='{run_dir}'",
                          f"index.dir='{bucket}/index?{options}'", *FAST_LEAN]) == 0
    finally:
        ray.shutdown()
    out = capsys.readouterr().out
    assert "candidates: 18" in out
    assert "mine-by-options/run/seeds/seeds.parquet" in object_store.keys("mine-by-options/run")
    statuses = RunDir(run_dir).read_column("candidates", "status")
    assert len(statuses) == 18 and statuses.count("proved") == 3
    dedup = json.loads(RunDir(run_dir).read_column("candidates", "provenance")[0]["dedup"])
    assert dedup["index_rev"]  # dedup read the index from the store


@pytest.mark.ray
def test_autoformalize_reads_its_input_and_writes_its_run_on_object_storage(object_store, capsys):
    bucket = object_store.create_bucket("autoformalize-home")
    filesystem, root = open_location(bucket)
    problems = Path(package_dir("pipelines/demo_problems/problems.jsonl"))
    with filesystem.open_output_stream(f"{root}/inputs/problems.jsonl") as stream:
        stream.write(problems.read_bytes())
    assert autoformalize.main(["preset=demo", f"input={bucket}/inputs/problems.jsonl",
                               f"run_dir={bucket}/af"]) == 0
    capsys.readouterr()
    rows = RunDir(f"{bucket}/af").read_column("formalizations", "id")
    assert len(rows) == len(problems.read_text().splitlines())
    assert report.main([f"run_dir={bucket}/af"]) == 0
    assert "autoformalize-home/af/report/report.md" in object_store.keys("autoformalize-home/af/report")


def test_rows_written_again_replace_their_first_copy(tmp_path):
    """A discover task Ray retries after its node was lost, once its discoveries had landed, writes them again:
    the file is named by the ids it holds, so the second copy replaces the first."""
    import pyarrow as pa

    filesystem, directory = resolve(str(tmp_path / "discoveries"))
    units = pa.table({"unit_id": ["Mathlib.Order.Clamp/s0", "Mathlib.Order.Clamp/s1"], "status": ["ok", "ok"]})
    first = append_file(filesystem, directory, units, "unit_id")
    again = append_file(filesystem, directory, units.take([1, 0]), "unit_id")
    other = append_file(filesystem, directory, units.slice(0, 1), "unit_id")
    assert first == again != other
    assert sorted(p.name for p in (tmp_path / "discoveries").iterdir()) == sorted(
        [first.rsplit("/", 1)[1], other.rsplit("/", 1)[1]])

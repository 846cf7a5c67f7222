"""`tablepin.ray`: a version read into Ray Data by read tasks on a local Ray
cluster (2 CPUs, started here), and a Ray Dataset written by several
tasks landing as one version. Rows are checked by their content hash,
computed by `tablepin.content_hash` over what Ray returned."""

import pyarrow as pa
import pytest

ray = pytest.importorskip("ray")

import tablepin  # noqa: E402
import tablepin.ray  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def collected(ds):
    return pa.concat_tables([ray.get(r) for r in ds.to_arrow_refs()])


def test_a_version_read_by_ray_has_the_engine_s_hash(cluster, generated_1m):
    repo = tablepin.Repo(generated_1m)
    head = repo.scan("sales", limit=0)
    ds = tablepin.ray.read(generated_1m, "sales")
    rows = collected(ds)
    assert rows.num_rows == head.rows
    assert tablepin.content_hash(rows, head.schema) == head.content_hash
    # The read tasks each take part of the files.
    source = tablepin.ray.TableDatasource(repo, "sales")
    before = repo.requests()
    tasks = source.get_read_tasks(4)
    assert len(tasks) == 4 and sum(t.metadata.num_rows for t in tasks) == head.rows
    # Planned from the files the datasource found: no second look.
    assert repo.requests() == before
    # A filter is evaluated by the engine in the tasks.
    few = collected(tablepin.ray.read(generated_1m, "sales", columns=["id"], filter="id < 1000"))
    assert sorted(few.column("id").to_pylist()) == list(range(1000))


def test_the_lab_s_week_51_read_by_ray(cluster, lab_out):
    repo = tablepin.Repo(lab_out / "repo")
    head = repo.scan("sales", "week-51", limit=0)
    rows = collected(tablepin.ray.read(repo, "sales", "week-51"))
    assert tablepin.content_hash(rows, head.schema) == head.content_hash


def test_four_write_tasks_land_one_version(cluster, tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    base = pa.table({"id": list(range(1000)), "v": [f"a{i}" for i in range(1000)]})
    repo.commit("t", base, key="id")
    before = len(repo.log())
    new = pa.table({"id": list(range(500, 20_500)), "v": [f"b{i}" for i in range(500, 20_500)]})
    ds = ray.data.from_arrow(new).repartition(4)
    v = tablepin.ray.write(ds, repo, "t", mode="upsert", message="from ray")
    assert len(repo.log()) == before + 1
    assert (v.change.rows_added, v.change.rows_changed) == (19_500, 500)
    expected = pa.concat_tables([base.slice(0, 500), new])
    assert v.content_hash == tablepin.content_hash(expected)
    assert tablepin.content_hash(repo.read("t")) == v.content_hash
    assert repo.verify().ok


def test_a_failing_write_lands_nothing(cluster, tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("t", pa.table({"id": [1, 2]}), key="id")

    def fail_on_one_block(batch):
        if 7 in batch["id"]:
            raise ValueError("a task dies")
        return batch

    ds = ray.data.range(20, override_num_blocks=4).map_batches(fail_on_one_block)
    with pytest.raises(Exception, match="a task dies"):
        tablepin.ray.write(ds, repo, "t", mode="append")
    assert len(repo.log()) == 1
    assert repo.verify().ok

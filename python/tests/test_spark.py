"""`tablepin.spark`: a version read by Spark through the Python Data Source
API, on a local Spark (`local[2]`, the system's Java 17), and a DataFrame
written by several tasks landing as one version. Rows are checked by the
content hash, computed by `tablepin.content_hash` over what Spark
collected, apart from the engine's stored figure."""

import os
import shutil
import sys

import pyarrow as pa
import pytest

pyspark = pytest.importorskip("pyspark")

import tablepin  # noqa: E402
import tablepin.spark  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("java is missing (scripts/test.sh installs Java 17 from the system's packages)")
        pytest.skip("java is missing")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (
        SparkSession.builder.master("local[2]")
        .appName("tablepin-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    tablepin.spark.register(s)
    yield s
    s.stop()


def test_a_version_read_by_spark_has_the_engine_s_hash(spark, generated_1m):
    repo = tablepin.Repo(generated_1m)
    head = repo.scan("sales", limit=0)
    df = spark.read.format("tablepin").option("repo", str(generated_1m)).option("table", "sales").load()
    assert df.rdd.getNumPartitions() == len(head.files)
    rows = df.toArrow()
    assert rows.num_rows == head.rows
    assert tablepin.content_hash(rows, head.schema) == head.content_hash


def test_filters_are_pushed_to_the_engine(spark, generated_1m):
    df = tablepin.spark.read(spark, generated_1m, "sales", parts=3)
    assert df.rdd.getNumPartitions() == 3
    few = df.where("id < 500 AND id >= 100").select("id").toArrow()
    assert sorted(few.column("id").to_pylist()) == list(range(100, 500))
    # What reaches the engine: the comparisons it can evaluate, as SQL;
    # the others stay with Spark.
    from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNull, Not, StringContains

    reader = tablepin.spark._Reader({"repo": str(generated_1m), "table": "sales", "version": "main"},
                                    tablepin.spark.from_arrow_schema(pa.schema([("id", pa.int64())])))
    kept = list(reader.pushFilters([
        EqualTo(("country",), "Côte d'Ivoire"), GreaterThan(("id",), 5), In(("id",), (1, 2)),
        Not(IsNull(("price",))), StringContains(("country",), "a"), EqualTo(("a", "b"), 1),
    ]))
    assert reader.filters == ['"country" = \'Côte d\'\'Ivoire\'', '"id" > 5', '"id" IN (1, 2)', 'NOT ("price" IS NULL)']
    assert [type(f).__name__ for f in kept] == ["StringContains", "EqualTo"]


def test_the_lab_s_week_51_read_by_spark(spark, lab_out):
    repo = tablepin.Repo(lab_out / "repo")
    head = repo.scan("sales", "week-51", limit=0)
    rows = tablepin.spark.read(spark, repo, "sales", "week-51").toArrow()
    assert rows.num_rows == head.rows
    assert tablepin.content_hash(rows, head.schema) == head.content_hash


def test_a_wrong_revision_is_not_found_with_the_revision(spark, generated_1m):
    with pytest.raises(tablepin.NotFound, match="no-such-tag"):
        tablepin.spark.read(spark, generated_1m, "sales", "no-such-tag")
    with pytest.raises(Exception, match="NotFound.*no-such-tag|no-such-tag"):
        spark.read.format("tablepin").option("repo", str(generated_1m)).option("table", "sales").option(
            "rev", "no-such-tag"
        ).load().count()


def test_eight_tasks_write_one_version(spark, generated_1m, tmp_path):
    source = tablepin.Repo(generated_1m).read("sales")
    df = spark.createDataFrame(source).repartition(8)
    assert df.rdd.getNumPartitions() == 8
    expected = tablepin.content_hash(df.toArrow())
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    v = tablepin.spark.write(df, repo, "sales", key="id", message="from spark")
    assert len(repo.log()) == 1
    assert v.tables["sales"].content_hash == expected
    assert v.tables["sales"].rows == 1_000_000
    # Upserting the same rows again changes nothing but lands no second
    # copy of any row.
    again = tablepin.spark.write(df.limit(1000), repo, "sales", mode="upsert")
    assert again.tables["sales"].content_hash == expected
    assert repo.verify().ok


def test_a_job_that_fails_mid_write_leaves_no_version(spark, tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("t", pa.table({"id": pa.array([0], pa.int64())}), key="id")

    def die_in_one_task(batches):
        for b in batches:
            if 700 in b.column("id").to_pylist():
                raise RuntimeError("the task dies")
            yield b

    df = spark.range(1, 1000, numPartitions=4).mapInArrow(die_in_one_task, "id long")
    with pytest.raises(Exception, match="the task dies"):
        tablepin.spark.write(df, repo, "t", mode="append")
    assert len(repo.log()) == 1
    assert repo.verify().ok

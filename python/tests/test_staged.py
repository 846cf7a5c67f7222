"""Staged commits from Python: worker processes each write part of a
version (`repo.stage`), one driver commits all of it at once
(`repo.commit_staged`). The content hash is checked against the rows'
own hash (`tablepin.content_hash`), computed apart from the engine's
commit."""

from concurrent.futures import ProcessPoolExecutor
import multiprocessing
import pickle

import pyarrow as pa
import pytest

import tablepin


def rows(lo, hi, version=0):
    ids = list(range(lo, hi))
    return pa.table({"id": ids, "name": [f"n{i}-v{version}" for i in ids]})


def _stage(location, lo, hi, version):
    """A worker: opens the repository itself and stages its rows."""
    repo = tablepin.Repo(location)
    return repo.stage("t", rows(lo, hi, version))


def test_workers_in_other_processes_land_one_version(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path))
    repo.commit("t", rows(0, 1000), key="id")
    parts = [(1000, 1700), (1700, 2500), (500, 600)]
    # Spawned, not forked: a fork copies the engine's runtime threads'
    # locks, not the threads.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as pool:
        staged = list(pool.map(_stage, [str(tmp_path)] * 3, *zip(*parts), [1, 1, 1]))
    # A description is a small string that pickles.
    assert all(isinstance(s, str) for s in staged)
    assert pickle.loads(pickle.dumps(staged)) == staged
    before = len(repo.log())
    v = repo.commit_staged("t", staged, mode="upsert", message="three workers")
    assert len(repo.log()) == before + 1
    assert (v.change.rows_added, v.change.rows_changed) == (1500, 100)
    expected = pa.concat_tables([rows(0, 500), rows(500, 600, 1), rows(600, 1000), rows(1000, 2500, 1)])
    assert v.content_hash == tablepin.content_hash(expected)
    table = repo.read("t")
    assert table.num_rows == 2500
    assert tablepin.content_hash(table) == v.content_hash
    # The driver retries: the same descriptions land nothing again.
    again = repo.commit_staged("t", staged, mode="upsert")
    assert again.empty and again.version == v.version
    assert len(repo.log()) == before + 1
    assert repo.verify().ok


def test_staged_files_gc_removed_raise_not_found_and_land_nothing(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path))
    repo.commit("t", rows(0, 10), mode="append")
    staged = [repo.stage("t", rows(10, 20))]
    repo.gc(grace=0, sole_writer=True).apply()
    with pytest.raises(tablepin.NotFound, match="stage its rows again"):
        repo.commit_staged("t", staged)
    with pytest.raises(LookupError):
        repo.commit_staged("t", staged)
    assert len(repo.log()) == 1
    with pytest.raises(tablepin.BadInput, match="not a description of staged files"):
        repo.commit_staged("t", ["{}"])
    with pytest.raises(tablepin.BadInput, match="a list of the descriptions"):
        repo.commit_staged("t", staged[0])


def _stage_keys(location, lo, hi):
    """A worker: stages the keys of the rows to delete."""
    return tablepin.Repo(location).stage("t", pa.table({"id": list(range(lo, hi))}), mode="delete")


def test_workers_stage_keys_and_one_delete_removes_their_rows(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path))
    repo.commit("t", rows(0, 1000), key="id")
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as pool:
        staged = list(pool.map(_stage_keys, [str(tmp_path)] * 2, [100, 800], [200, 1100]))
    v = repo.commit_staged("t", staged, mode="delete")
    assert (v.change.rows_deleted, v.rows) == (300, 700)
    expected = pa.concat_tables([rows(0, 100), rows(200, 800)])
    assert v.content_hash == tablepin.content_hash(expected)
    again = repo.commit_staged("t", staged, mode="delete")
    assert again.empty and len(repo.log()) == 2
    # Rows staged to be added are not keys to delete.
    with pytest.raises(tablepin.BadInput, match="a delete takes the keys"):
        repo.commit_staged("t", [repo.stage("t", rows(5000, 5001))], mode="delete")

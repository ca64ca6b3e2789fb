"""The real-adapter benchmark workloads (``benchmarks/store_bench.py``) run and clean up.

Smallest sizes only: this checks the workloads' shape (every sample on a fresh copy of the
store, the result fields), never their speed — that is ``python -m benchmarks``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from benchmarks.workloads import BUILDERS, MAX_SAMPLES, WORKLOADS

STORE_WORKLOADS = {
    "deletion_sqlite": 3,
    "compaction_sqlite": 5,
    "compaction_jsonl": 5,
    "recall_lexical_sqlite": 200,
}


def _temps() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("cmk-bench-*")}


@pytest.mark.parametrize("name", sorted(STORE_WORKLOADS))
def test_a_store_workload_runs_twice_and_removes_its_stores(name: str) -> None:
    assert name in WORKLOADS and name in BUILDERS
    before = _temps()
    run, extra = BUILDERS[name](STORE_WORKLOADS[name])
    for _ in range(2):  # two samples, each on a fresh copy
        setup = getattr(run, "setup", None)
        if setup is not None:
            setup()
        run()
    fields = extra()
    assert fields
    if name == "deletion_sqlite":
        assert fields["receipts_purged"] == fields["authority_purged"] == 3
        assert fields["projection_entries_left"] == 0 and fields["events"] == 6
    elif name.startswith("compaction"):
        assert fields["selected"] >= 1 and fields["items"] == 6
    else:
        assert fields["results"] == fields["hits"] >= 1
    assert _temps() <= before  # every temp store removed


def test_only_the_slow_sqlite_deletion_caps_its_samples() -> None:
    assert MAX_SAMPLES == {"deletion_sqlite": 3}

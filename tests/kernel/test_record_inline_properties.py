"""The MemoryRecord normaliser's inline checks (``kernel.canonical.records``) in the digest
style: each equals its full check on generated values — the same value and type, or the
same error — and the recall/deletion benchmarks' records take every inline gate.
(``test_memory_inline_checks.py`` holds the hand-picked edge cases.)"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.recall_bench import bench_records
from kernel.canonical import records as R
from kernel.canonical.checks import identifier, timestamp
from kernel.canonical.items import _provenance, _string_set
from tests.kernel.test_memory_inline_checks import outcome


class Text(str):
    """A ``str`` subclass: the full checks convert it, so no gate may pass it through."""


_ID_CHARS = "aZ09._:/- é\n"
identifiers = (
    st.text(alphabet=_ID_CHARS, max_size=170)
    | st.text(alphabet="abc", min_size=158, max_size=162)
    | st.builds(Text, st.text(alphabet="ab", min_size=1, max_size=4))
    | st.none()
    | st.integers()
)
stamps = (
    st.sampled_from(
        [
            "2026-08-29T00:00:00.000Z",
            "2026-08-29T00:00:00Z",
            "2026-08-29T08:00:00.000+08:00",
            "2026-02-30T00:00:00Z",
            "Sat, 29 Aug 2026 00:00:00 GMT",
            "2026-08-29T00:00:00.000417Z",
        ]
    )
    | st.text(alphabet="0123456789-T:.Z", max_size=40)
    | st.builds(Text, st.just("2026-08-29T00:00:00.000Z"))
    | st.none()
)
PROPERTY = settings(max_examples=300, deadline=None)


@PROPERTY
@given(identifiers)
def test_fast_identifier_equals_identifier(value: Any) -> None:
    assert outcome(lambda: R.fast_identifier(value, "f")) == outcome(lambda: identifier(value, "f"))


@PROPERTY
@given(stamps)
def test_fast_timestamp_equals_timestamp(value: Any) -> None:
    assert outcome(lambda: R._fast_timestamp(value, "t")) == outcome(lambda: timestamp(value, "t"))


@PROPERTY
@given(
    st.lists(
        st.text(alphabet="ab-é\ud800", max_size=70) | st.builds(Text, st.just("a")), max_size=3
    )
    | st.tuples(st.just("cli"))
    | st.none(),
    st.sampled_from([0, 1]),
)
def test_short_string_set_equals_string_set(value: Any, lo: int) -> None:
    assert outcome(lambda: R._short_string_set(value, "s", lo)) == outcome(
        lambda: _string_set(value, "s", lo, 128, 128)
    )


@PROPERTY
@given(
    st.fixed_dictionaries(
        {"source": identifiers, "observedAt": stamps},
        optional={"actor": identifiers, "extra": st.just(1)},
    )
    | st.none()
)
def test_fast_provenance_equals_provenance(value: Any) -> None:
    assert outcome(lambda: R._fast_provenance(value)) == outcome(lambda: _provenance(value))


def test_the_benchmark_records_take_every_inline_gate() -> None:
    """A gate the benchmark's records fail is a dead fast path."""
    for raw in bench_records(300):
        for key in ("memoryId", "scopeId", "category"):
            assert type(raw[key]) is str and R._is_identifier(raw[key]), key
        for key in ("createdAt", "updatedAt"):
            assert type(raw[key]) is str and 20 <= len(raw[key]) <= 32, key
        provenance = raw["provenance"]
        assert type(provenance) is dict and len(provenance) == 2
        assert R._is_identifier(provenance["source"])
        assert len(raw["evidenceRefs"]) == 1 and len(raw["evidenceRefs"][0]) == 2
        assert raw["retentionPolicy"]["mode"] in R._BARE_MODES
        assert raw["tags"] == [] and len(raw["allowedSinks"]) == 1
        assert type(raw["confidence"]) is float and 0 < raw["confidence"] < 1

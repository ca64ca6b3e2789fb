"""The planner's fast paths equal the exact ones, byte for byte (key order included).

* :func:`kernel.canonical.item_batch.context_item_batch` — the columnar validation of a
  batch, whose items may carry optional fields on some items only — gives the columns,
  item dicts and errors of the exact per-item ``normalize_context_item``, and is actually
  taken for the batches it is meant for: generated valid batches and the benchmark
  workloads' own (plan; compaction's snapshot and selection); a bug inside it surfaces
  (nothing swallows it);
* :func:`kernel.planning.planner.plan_context` equals the kernel's specification,
  :func:`kernel.planning.reference.reference_plan` (the algorithm of the planner's
  docstring on normalized dicts, digested with the exact ``kernel.canonical.digest.digest``), for
  homogeneous and mixed batches, and equals itself with the columnar path switched off;
* :func:`kernel.canonical.items.identifier_collation_keys` orders as
  :func:`~kernel.canonical.items.identifier_collation_key`.

No timing here: benchmarks live in ``benchmarks/`` (``python -m benchmarks``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.workloads import (
    COMPACTION_REQUEST,
    COMPACTION_SESSION,
    _session_port,
    compaction_items,
    plan_request,
)
from kernel.canonical import item_batch as normalize_batch
from kernel.canonical.item_batch import context_item_batch, normalize_context_items
from kernel.canonical.items import (
    identifier_collation_key,
    identifier_collation_keys,
    normalize_context_item,
)
from kernel.errors import KernelError
from kernel.planning import planner
from kernel.planning.partitions import KIND_PARTITION
from kernel.planning.planner import (
    item_order_key,
    plan_context,
)
from kernel.planning.reference import reference_plan
from tests.kernel.plan_requests import draw_plan_request

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KINDS = list(KIND_PARTITION)
TRUSTS = ["host", "verified", "user", "external", "untrusted"]
SINKS = ["provider.local", "Provider.Local", "cli", "ide.vscode", "*", "sink_9", "mcp:server-1"]
NOW = "2026-08-29T00:00:00.000Z"
CANONICAL_STAMPS = ["2026-08-28T00:00:00.000Z", NOW, "2026-08-29T00:00:01.000Z"]
OTHER_STAMPS = [
    "2026-08-29T08:00:00.000+08:00",
    "2026-08-30T12:00:00Z",
    "2026-08-29T00:00:00.000417Z",
    "Sat, 29 Aug 2026 00:00:00 GMT",
]
ID_PREFIXES = ["item-", "Item:", "a_b.", "Z/", "m", "M-", "x.Y_", "0"]
SHAPE_FLAGS = (
    "scoped",
    "sequence",
    "revision",
    "uri",
    "source_digest",
    "actor",
    "degraded",
    "expires",
    "binding",
    "content_ref",
    "canonical_only",
    "single_sink",
    "shuffle",
)
BINDINGS: list[dict[str, Any]] = [
    {},
    {"taskState": "running"},
    {"taskState": "terminal"},
    {"requiredForRecovery": True},
    {"budgetRevision": 0},
    {"approvalId": "ap-1"},
]


@st.composite
def homogeneous_items(draw: st.DrawFn, max_size: int = 24) -> list[dict[str, Any]]:
    """Items sharing one key set (and one sourceRef / provenance key set)."""
    shape = {flag: draw(st.booleans()) for flag in SHAPE_FLAGS}
    stamps = CANONICAL_STAMPS if shape["canonical_only"] else CANONICAL_STAMPS + OTHER_STAMPS
    prefix = draw(st.sampled_from(ID_PREFIXES))
    scope, scope_id = draw(
        st.sampled_from([("session", "s-1"), ("user", "u-1"), ("session", "S:2")])
    )
    items = []
    for i in range(draw(st.integers(1, max_size))):
        item: dict[str, Any] = {
            "schemaVersion": 1,
            "itemId": f"{prefix}{draw(st.integers(0, 3))}{i}",
            "kind": draw(st.sampled_from(KINDS)),
            "scope": scope if shape["scoped"] else "global",
            "sourceRef": {"store": "log", "id": f"e-{i}"},
            "provenance": {"source": "fixture", "observedAt": draw(st.sampled_from(stamps))},
            "trust": draw(st.sampled_from(TRUSTS)),
            "sensitivity": draw(st.sampled_from(["internal", "public", "secret"])),
            "allowedSinks": [draw(st.sampled_from(SINKS))]
            if shape["single_sink"]
            else draw(st.lists(st.sampled_from(SINKS), min_size=1, max_size=3, unique=True)),
            "tokenEstimate": draw(st.integers(1, 400)),
            "priority": draw(st.sampled_from([0, 1, 50, 100, 1000, 1_000_000])),
            "pinned": draw(st.integers(0, 9)) == 0,
            "createdAt": draw(st.sampled_from(stamps)),
        }
        if shape["scoped"]:
            item["scopeId"] = scope_id
        if shape["sequence"]:
            item["sourceRef"]["eventSequence"] = draw(st.integers(0, 40))
        if shape["revision"]:
            item["sourceRef"]["revision"] = draw(st.integers(0, 3))
        if shape["uri"]:
            item["sourceRef"]["uri"] = "file:notes.md"
        if shape["source_digest"]:
            item["sourceRef"]["digest"] = "sha256:" + "a" * 64
        if shape["actor"]:
            item["provenance"]["actor"] = draw(st.sampled_from(["user-1", "Agent.2"]))
        if shape["degraded"]:
            item["provenance"]["degraded"] = draw(st.booleans())
        if shape["expires"]:
            item["expiresAt"] = draw(st.sampled_from(stamps))
        if shape["binding"]:
            item["binding"] = draw(st.sampled_from(BINDINGS))
        if shape["content_ref"]:
            item["contentRef"] = {
                "store": "blob",
                "objectId": f"o-{i}",
                "digest": "sha256:" + "c" * 64,
                "byteLength": draw(st.integers(0, 99)),
                "summary": "a summary",
                "recoverable": draw(st.booleans()),
            }
        else:
            item["content"] = draw(st.sampled_from(["", "plain", 'q"uote\\', "中文 é", "\n\t"]))
        if shape["shuffle"]:
            keys = list(item)
            random.Random(i).shuffle(keys)
            item = {k: item[k] for k in keys}
        items.append(item)
    return items


MUTATIONS: list[tuple[str, Any]] = [
    ("tokenEstimate", 5.0),
    ("tokenEstimate", True),
    ("priority", -1),
    ("schemaVersion", 1.0),
    ("pinned", 1),
    ("kind", "bogus"),
    ("itemId", "bad id"),
    ("scopeId", None),
    ("allowedSinks", ["a", "a"]),
    ("allowedSinks", ("cli",)),
    ("createdAt", "2026-02-30T00:00:00Z"),
    ("content", "\ud800"),
    ("digest", "sha256:" + "0" * 64),
    ("digest", None),
    ("extra", 1),
    ("sourceRef", {"store": "s", "id": "i", "eventSequence": 2.0}),
    ("provenance", {"source": "s", "observedAt": NOW, "parentDigests": []}),
    ("binding", {"budgetRevision": 2.0}),
    ("binding", {"toolCallId": "c-1", "toolRole": "call", "toolOutcome": "pending"}),
]


class Text(str):
    """A str subclass: the exact path converts it, so the fast path must not take it."""


#: Optional fields an item of a mixed batch may carry on its own.
OPTIONAL_FLAGS = SHAPE_FLAGS[: SHAPE_FLAGS.index("content_ref") + 1]


@st.composite
def mixed_items(draw: st.DrawFn, max_size: int = 16) -> list[dict[str, Any]]:
    """Valid items whose optional fields are drawn per item: key sets differ between
    items (and between their sourceRefs and provenances); the first item may lack a
    field later ones have."""
    items = []
    for i in range(draw(st.integers(1, max_size))):
        (item,) = draw(homogeneous_items(max_size=1))
        item["itemId"] = f"mixed-{i}"
        item["sourceRef"]["id"] = f"e-{i}"
        flags = set(draw(st.lists(st.sampled_from(OPTIONAL_FLAGS), unique=True)))
        if "scopeId" in item and "scoped" not in flags:
            del item["scopeId"]
            item["scope"] = "global"
        for flag, remove in (
            ("sequence", ("sourceRef", "eventSequence")),
            ("revision", ("sourceRef", "revision")),
            ("uri", ("sourceRef", "uri")),
            ("source_digest", ("sourceRef", "digest")),
            ("actor", ("provenance", "actor")),
            ("degraded", ("provenance", "degraded")),
        ):
            if flag not in flags:
                item[remove[0]].pop(remove[1], None)
        if "expires" not in flags:
            item.pop("expiresAt", None)
        if "binding" not in flags:
            item.pop("binding", None)
        if "contentRef" in item and "content_ref" not in flags:
            del item["contentRef"]
            item["content"] = "plain"
        items.append(item)
    return items


@st.composite
def item_batches(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool]:
    """(items, pristine): pristine batches are valid and meant for the columnar path."""
    items = draw(homogeneous_items() if draw(st.booleans()) else mixed_items())
    pristine = True
    if draw(st.booleans()):  # supply the right digests (verified, then dropped for hashing)
        for item in items:
            item["digest"] = normalize_context_item(item)["digest"]
    for index, (key, value) in draw(
        st.lists(st.tuples(st.integers(0, 30), st.sampled_from(MUTATIONS)), max_size=2)
    ):
        if index < len(items):
            items[index][key] = value
            pristine = False
    if draw(st.integers(0, 9)) == 0:
        items[0]["kind"] = Text(items[0]["kind"])
        pristine = False
    if draw(st.integers(0, 9)) == 0:  # a field removed from one item
        index = draw(st.integers(0, len(items) - 1))
        key = draw(st.sampled_from(["itemId", "scopeId", "content", "contentRef", "createdAt"]))
        if key in items[index]:
            del items[index][key]
            pristine = False
    if draw(st.integers(0, 9)) == 0:  # one item has both content and contentRef
        index = draw(st.integers(0, len(items) - 1))
        if "content" in items[index]:
            items[index]["contentRef"] = {
                "store": "blob",
                "objectId": "o",
                "digest": "sha256:" + "c" * 64,
                "byteLength": 1,
                "summary": "s",
                "recoverable": True,
            }
            items[index].pop("digest", None)
            pristine = False
    return items, pristine


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", json.dumps(fn(), ensure_ascii=False))
    except KernelError as exc:
        return ("error", exc.to_wire())


@SETTINGS
@given(item_batches(), st.sampled_from(["peer", "jcs"]))
def test_batch_equals_exact_normalisation(
    case: tuple[list[dict[str, Any]], bool], profile: str
) -> None:
    items, pristine = case
    exact = _outcome(lambda: [normalize_context_item(r, profile=profile) for r in items])  # type: ignore[arg-type]
    assert _outcome(lambda: normalize_context_items(items, profile=profile)) == exact  # type: ignore[arg-type]
    fast = normalize_batch._columnar(items) if pristine else None
    if pristine:
        assert fast is not None, "the columnar path declined a homogeneous valid batch"
    if fast is not None:
        assert exact[0] == "ok"
        normalized = [normalize_context_item(r) for r in items]
        reference = normalize_batch._batch_from_items(normalized)
        for field in (
            "ids",
            "kinds",
            "trusts",
            "scopes",
            "scope_ids",
            "sinks",
            "tokens",
            "priorities",
            "pinned",
            "sequences",
            "digests",
        ):
            assert list(getattr(fast, field)) == list(getattr(reference, field)), field
        for field in ("expires", "bindings"):
            ours, theirs = getattr(fast, field), getattr(reference, field)
            assert (ours is None) == (theirs is None)
            assert ours is None or list(ours) == list(theirs)
        for i, item in enumerate(normalized):
            built = fast.item(i)
            assert json.dumps(built) == json.dumps(item)
            assert built is not fast.item(i)  # fresh dicts


@st.composite
def plan_requests(draw: st.DrawFn) -> dict[str, Any]:
    items, _ = draw(item_batches())
    if draw(st.integers(0, 3)) == 0:  # a mixed batch: the per-item paths
        extra, _ = draw(item_batches())
        items += [
            {**{k: v for k, v in item.items() if k != "digest"}, "itemId": f"extra-{i}"}
            for i, item in enumerate(extra)
        ]
    if draw(st.integers(0, 3)) == 0:  # tool call/result groups
        for g in range(draw(st.integers(1, 3))):
            outcome = draw(st.sampled_from(["succeeded", "failed", "pending", "unknown"]))
            for role in draw(st.sampled_from([["call", "result"], ["call"], ["result"]])):
                index = draw(st.integers(0, len(items) - 1))
                items[index] = dict(
                    items[index],
                    binding={"toolCallId": f"call-{g}", "toolRole": role, "toolOutcome": outcome},
                )
        items = [{k: v for k, v in item.items() if k != "digest"} for item in items]
    window = draw(st.sampled_from([64, 600, 2000, 4096, 40_000]))
    request = draw_plan_request(draw, items, window)
    cap = window - request["reservedOutputTokens"] - request["safetyMarginTokens"]
    if draw(st.booleans()):
        request["partitionCeilings"] = {"conversation": draw(st.integers(0, max(0, min(cap, 500))))}
    if draw(st.booleans()):
        request["partitionMinimums"] = {
            "working-state": draw(st.integers(0, max(0, min(cap, 200))))
        }
    return request


def _plan_outcome(fn: Callable[[], dict[str, Any]]) -> Any:
    try:
        return ("plan", json.dumps(fn(), ensure_ascii=False))
    except KernelError as exc:
        return ("error", exc.to_wire())


@SETTINGS
@given(plan_requests(), st.sampled_from(["peer", "jcs"]))
def test_plan_equals_reference_planner(request: dict[str, Any], profile: str) -> None:
    ours = _plan_outcome(lambda: plan_context(request, profile=profile))  # type: ignore[arg-type]
    assert ours == _plan_outcome(lambda: reference_plan(request, profile))  # type: ignore[arg-type]


@SETTINGS
@given(plan_requests())
def test_plan_without_columnar_path_is_identical(request: dict[str, Any]) -> None:
    ours = _plan_outcome(lambda: plan_context(request))
    columnar = normalize_batch._columnar
    normalize_batch._columnar = lambda raws: None
    try:
        assert _plan_outcome(lambda: plan_context(request)) == ours
    finally:
        normalize_batch._columnar = columnar


def _benchmark_request(n: int, digests: bool = False) -> dict[str, Any]:
    """The peer's benchmark workload, as ``nox -s bench`` builds it."""
    request = plan_request(n)
    if digests:
        for item in request["items"]:
            item["digest"] = normalize_context_item(item)["digest"]
    return request


@pytest.mark.parametrize("digests", [False, True])
def test_benchmark_workload_takes_the_columnar_path_and_matches(digests: bool) -> None:
    request = _benchmark_request(2_000, digests)
    assert normalize_batch._columnar(request["items"]) is not None
    plan = plan_context(request)
    assert json.dumps(plan) == json.dumps(reference_plan(request))
    assert plan["selectedItemIds"] and len(plan["dropped"]) == 2_000 - len(plan["selected"])


def test_the_columnar_path_knows_every_item_field() -> None:
    assert frozenset(normalize_batch._ITEM_TYPES) == normalize_batch._ITEM_FIELDS
    assert normalize_batch._ITEM_REQUIRED <= normalize_batch._ITEM_FIELDS


def _compaction_batches(n: int) -> dict[str, list[dict[str, Any]]]:
    """The batches the compaction benchmark hands to ``context_item_batch``: the raw
    workload, the snapshot the seeded port gives back (normalized items; the goal alone
    has a ``binding``) and the plan's selection."""
    port = _session_port(compaction_items(n))
    snapshot = port.read_snapshot(COMPACTION_SESSION)
    assert snapshot is not None
    originals = list(snapshot.items)
    request = {
        **{k: v for k, v in COMPACTION_REQUEST.items() if k != "sessionId"},
        "items": originals,
        "sessionHead": snapshot.head,
        "memoryRevision": 1,
        "now": "2026-08-29T00:00:00.000Z",
    }
    plan = plan_context(request)
    return {"raw": compaction_items(n), "snapshot": originals, "selected": plan["selected"]}


@pytest.mark.parametrize("batch", ["raw", "snapshot", "selected"])
def test_compaction_workload_takes_the_columnar_path_and_matches(batch: str) -> None:
    items = _compaction_batches(1_000)[batch]
    assert any("binding" in item for item in items)  # key sets differ: an optional field
    assert any("binding" not in item for item in items) or batch == "selected"
    fast = normalize_batch._columnar(items)
    assert fast is not None, "the columnar path declined the compaction benchmark's batch"
    exact = [normalize_context_item(item) for item in items]
    assert list(fast.digests) == [item["digest"] for item in exact]
    assert json.dumps([fast.item(i) for i in range(len(items))]) == json.dumps(exact)


def test_compaction_workload_in_reverse_order_takes_the_columnar_path() -> None:
    """The first item lacks the field a later one has (found by counting keys)."""
    items = _compaction_batches(200)["snapshot"][::-1]
    assert "binding" not in items[0]
    assert normalize_batch._columnar(items) is not None


def test_a_bug_in_the_columnar_path_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the exact checks' refusals make it decline: any other error surfaces."""

    def broken(*args: Any) -> Any:
        raise RuntimeError("bug in the fast path")

    monkeypatch.setattr(normalize_batch, "_iso", broken)
    with pytest.raises(RuntimeError, match="bug in the fast path"):
        plan_context(_benchmark_request(5))
    with pytest.raises(RuntimeError, match="bug in the fast path"):
        normalize_context_items(_compaction_batches(5)["snapshot"])


def test_a_wrong_supplied_digest_is_still_reported() -> None:
    request = _benchmark_request(50, digests=True)
    request["items"][7]["digest"] = "sha256:" + "0" * 64
    with pytest.raises(KernelError) as info:
        plan_context(request)
    assert info.value.code == "digest_mismatch"
    assert info.value.details == {"itemId": "msg-000007"}


def test_batch_does_not_touch_its_input() -> None:
    request = _benchmark_request(20, digests=True)
    request["items"][3]["createdAt"] = "2026-08-29T00:00:00Z"  # normalised by a fix-up
    before = json.dumps(request)
    context_item_batch(request["items"])
    plan_context(request)
    assert json.dumps(request) == before


_IDENTIFIER = st.text(alphabet="abcXYZ019._:/-", min_size=0, max_size=6).map(lambda s: "a" + s)


@settings(max_examples=200, deadline=None)
@given(st.lists(_IDENTIFIER, unique=True, max_size=40))
def test_collation_keys_order_as_the_single_key(identifiers: list[str]) -> None:
    keys = identifier_collation_keys(identifiers)
    assert sorted(identifiers, key=identifier_collation_key) == [
        identifiers[i] for i in sorted(range(len(identifiers)), key=keys.__getitem__)
    ]
    lower = [i.lower() for i in identifiers if i.lower() == i]
    keys = identifier_collation_keys(lower)
    assert sorted(lower, key=identifier_collation_key) == [
        lower[i] for i in sorted(range(len(lower)), key=keys.__getitem__)
    ]


@SETTINGS
@given(item_batches(), st.data())
def test_order_keys_equal_the_item_by_item_packing(
    case: tuple[list[dict[str, Any]], bool], data: st.DataObject
) -> None:
    """``_order_keys``'s one-kind shortcut equals the exact packing, and both order as
    :func:`kernel.planning.planner.item_order_key` (itemId aside)."""
    items, _ = case
    try:
        batch = context_item_batch(items)
    except KernelError:
        return
    n = len(batch.ids)
    protected = data.draw(
        st.sampled_from([[False] * n, [True] * n])
        | st.lists(st.booleans(), min_size=n, max_size=n)
    )
    keys = planner._order_keys(batch, protected)
    assert keys == planner._packed_order_keys(batch, protected)
    exact = [
        item_order_key(batch.item(i), protected[i])[:4] for i in range(n)
    ]
    assert sorted(range(n), key=keys.__getitem__) == sorted(range(n), key=exact.__getitem__)


def test_the_benchmark_plan_takes_the_one_kind_shortcut() -> None:
    request = _benchmark_request(1_000)
    batch = context_item_batch(request["items"])
    protected = planner._protected(batch)
    assert planner._one_unprotected_kind(batch.kinds, protected) == "message"

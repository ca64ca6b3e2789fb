"""Property tests for the compaction invariants (kernel/compaction/invariants.py).

Any candidate that keeps protected items, tool groups and pending bindings
intact and derives items without widening passes; each kind of damage is
reported with its own code.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.compaction import invariants as inv

KINDS = ["message", "tool-evidence", "memory", "project-rule", "task-state", "system-policy"]


def _digest(item: dict[str, Any]) -> str:
    body = {k: v for k, v in item.items() if k != "digest"}
    raw = json.dumps(body, sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _seal(item: dict[str, Any]) -> dict[str, Any]:
    item = dict(item)
    item["digest"] = _digest(item)
    return item


def _item(item_id: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "itemId": item_id,
        "kind": "message",
        "scope": "session",
        "scopeId": "s1",
        "trust": "user",
        "sensitivity": "internal",
        "allowedSinks": ["provider.local"],
        "pinned": False,
        "provenance": {"source": "test"},
        "content": item_id,
    }
    base.update(fields)
    return _seal(base)


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 12))
    items: list[dict[str, Any]] = []
    for i in range(n):
        flavour = draw(
            st.sampled_from(["plain", "pinned", "policy", "pending", "tool", "task", "untrusted"])
        )
        if flavour == "tool":
            outcome = draw(st.sampled_from(["succeeded", "failed"]))
            for role in ("call", "result"):
                items.append(
                    _item(
                        f"t{i}-{role}",
                        kind="tool-evidence",
                        binding={
                            "toolCallId": f"call-{i}",
                            "toolRole": role,
                            "toolOutcome": outcome,
                        },
                    )
                )
            continue
        fields: dict[str, Any] = {
            "plain": {},
            "pinned": {"pinned": True},
            "policy": {"kind": "system-policy", "trust": "host"},
            "pending": {"kind": "task-state", "binding": {"approvalId": f"appr-{i}"}},
            "task": {"kind": "task-state", "binding": {"taskState": "running"}},
            "untrusted": {"kind": "system-policy", "trust": "untrusted"},
        }[flavour]
        fields.setdefault("kind", draw(st.sampled_from(KINDS[:4])))
        items.append(_item(f"i{i}", **fields))
    return items


def _valid_candidate(items: list[dict[str, Any]], keep: list[bool]) -> list[dict[str, Any]]:
    """Keep every must-survive item, whole tool groups, and a random rest."""
    groups: dict[str, bool] = {}
    out = []
    for item, flag in zip(items, keep, strict=False):
        call = inv.binding_of(item).get("toolCallId")
        if call is not None:
            flag = groups.setdefault(call, flag)
        if inv.is_protected(item) or (
            item["kind"] == "system-policy" and item["trust"] in ("host", "verified")
        ):
            flag = True
        if flag:
            out.append(item)
    return out


@settings(max_examples=200, deadline=None)
@given(items=sessions(), keep=st.lists(st.booleans(), min_size=40, max_size=40))
def test_a_conservative_candidate_passes(items: list[dict[str, Any]], keep: list[bool]) -> None:
    candidate = _valid_candidate(items, keep)
    result = inv.verify_compaction(items, candidate)
    assert result.ok, result.to_wire()


@settings(max_examples=200, deadline=None)
@given(items=sessions(), keep=st.lists(st.booleans(), min_size=40, max_size=40), data=st.data())
def test_dropping_a_protected_item_is_reported(
    items: list[dict[str, Any]], keep: list[bool], data: st.DataObject
) -> None:
    candidate = _valid_candidate(items, keep)
    protected = [
        i for i in candidate if inv.is_protected(i) and "toolCallId" not in i.get("binding", {})
    ]
    if not protected:
        return
    victim = data.draw(st.sampled_from(protected))
    damaged = [i for i in candidate if i is not victim]
    result = inv.verify_compaction(items, damaged)
    assert inv.PROTECTED_ITEM_CHANGED in result.codes
    assert {"code": "protected_item_changed", "itemId": victim["itemId"]} in result.to_wire()[
        "violations"
    ]
    if victim["pinned"]:
        assert inv.PINNED_ITEM_ALTERED in result.codes
    if inv.has_pending_binding(victim):
        assert inv.PENDING_BINDING_CHANGED in result.codes


def test_split_tool_pair_duplicate_and_identity_reuse() -> None:
    call = _item("c", kind="tool-evidence", binding={"toolCallId": "x", "toolRole": "call"})
    res = _item("r", kind="tool-evidence", binding={"toolCallId": "x", "toolRole": "result"})
    msg = _item("m")
    original = [call, res, msg]
    split = inv.verify_compaction(original, [call, msg])
    assert split.to_wire()["violations"] == [
        {"code": "tool_pair_split", "toolCallId": "x", "retained": ["c"]}
    ]
    dup = inv.verify_compaction(original, [call, res, msg, msg])
    assert dup.codes == ("duplicate_output_item",)
    altered = _seal({**msg, "content": "rewritten"})
    reuse = inv.verify_compaction(original, [call, res, altered])
    assert reuse.codes == ("identity_reused_with_new_digest",)


def test_dropping_whole_groups_and_plain_items_is_fine() -> None:
    call = _item("c", kind="tool-evidence", binding={"toolCallId": "x", "toolRole": "call"})
    res = _item("r", kind="tool-evidence", binding={"toolCallId": "x", "toolRole": "result"})
    assert inv.verify_compaction([call, res, _item("m")], []).ok


def _summary(item_id: str, parents: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "message",
        "trust": "untrusted",
        "sensitivity": "restricted",
        "allowedSinks": ["provider.local"],
        "provenance": {"source": "summarizer", "parentDigests": [p["digest"] for p in parents]},
    }
    base.update(fields)
    return _item(item_id, **base)


def test_derived_items_may_not_widen_or_pose_as_policy() -> None:
    a = _item("a", trust="user", sensitivity="personal")
    b = _item("b", trust="external", sensitivity="internal")
    original = [a, b]
    assert inv.verify_compaction(original, [_summary("s", [a, b])]).ok
    cases = {
        "kind-policy": (_summary("s", [a], kind="system-policy"), inv.UNTRUSTED_SUMMARY_AS_POLICY),
        "trust": (_summary("s", [a, b], trust="user"), inv.UNTRUSTED_SUMMARY_AS_POLICY),
        "scope": (_summary("s", [a], scopeId="other"), inv.DERIVED_WIDENS),
        "sinks": (_summary("s", [a], allowedSinks=["*"]), inv.DERIVED_WIDENS),
        "sensitivity": (_summary("s", [a], sensitivity="internal"), inv.DERIVED_WIDENS),
        "unbound": (_item("s", provenance={"source": "x"}), inv.DERIVED_WIDENS),
        "foreign": (_summary("s", [_item("zz")]), inv.DERIVED_WIDENS),
    }
    for name, (item, code) in cases.items():
        result = inv.verify_compaction(original, [item])
        assert code in result.codes, name
        assert not set(result.codes) & set(inv.PEER_CODES), name
        assert result.to_wire(peer_only=True) == {"ok": False, "violations": []}, name


def test_wildcard_parents_allow_any_sink() -> None:
    a = _item("a", allowedSinks=["*"])
    assert inv.verify_compaction([a], [_summary("s", [a], allowedSinks=["*"])]).ok
    assert inv.sink_intersection([a]) is None


def test_pending_binding_tampered_by_a_derived_item() -> None:
    pending = _item("p", kind="task-state", binding={"approvalId": "ap-1", "taskState": "waiting"})
    forged = _summary("s", [pending], binding={"approvalId": "ap-1", "taskState": "terminal"})
    result = inv.verify_compaction([pending], [pending, forged])
    assert result.codes == (inv.PENDING_BINDING_CHANGED,)
    assert result.violations[0].reason == "changed"


def test_pending_tool_pair_with_two_roles_is_not_a_binding_change() -> None:
    call = _item(
        "c",
        kind="tool-evidence",
        binding={"toolCallId": "x", "toolRole": "call", "toolOutcome": "pending"},
    )
    assert inv.verify_compaction([call], [call]).ok
    assert inv.verify_compaction([call], []).codes == (
        inv.PROTECTED_ITEM_CHANGED,
        inv.PENDING_BINDING_CHANGED,
    )


def test_every_code_is_documented() -> None:
    doc = inv.__doc__ or ""
    for code in inv.ALL_CODES:
        assert code in doc

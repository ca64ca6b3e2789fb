"""Session consolidation (design 108 §9.1, §10): session evidence → candidate memories.

:func:`consolidate_session` reads the session's ContextItems (wire dicts) and yields
**candidates** — never active facts, never a scope wider than the session or agent
the request names (``session`` or ``agent``; promotion to project, user or global is
the audited command of :func:`kernel.memory.policy.promote_scope`).

Strategies:

``llm``
    an injected summarizer ``summarizer(evidence, context) -> [draft, …]`` proposes
    drafts ``{category, content, summary?, tags?, confidence?, importance?,
    evidenceItemIds}``; a draft naming no known evidence, or another scope, is
    rejected (``unknown_evidence`` / ``scope_widening``).
``rules`` / ``rule-fallback``
    deterministic extraction: sentences of trusted messages (``host``/``verified``/
    ``user`` trust) that state a preference, an instruction or a decision.  When the
    summarizer raises (or answers malformed output) the fallback runs and the result
    is marked ``degraded`` with the reason code; candidate provenance carries
    ``degraded: true`` (§17: a fallback is never passed off as a semantic summary).

Every candidate, whatever the strategy: carries evidence refs (item id and digest)
and its sources' digests as ``provenance.parentDigests``; inherits the most
sensitive source sensitivity and only the sinks every source allows
(:func:`kernel.memory.policy.inherited_policy`); passes the secret filter
(:func:`kernel.memory.lifecycle.reject_secret_material`) and an injection screen — a rejected
draft is reported by reason code and evidence ids, never by content.  Memory ids are
content-derived, so consolidating the same session twice proposes the same ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kernel.canonical.checks import (
    bounded_integer,
    identifier,
    known_fields,
    object_value,
)
from kernel.canonical.digest import digest
from kernel.canonical.records import normalize_memory_record
from kernel.errors import InvalidArgument, KernelError
from kernel.memory.lifecycle import (
    SecretProbe,
    reject_secret_material,
)
from kernel.memory.policy import inherited_policy
from kernel.vocabulary import MAX_ITEMS, Trust

__all__ = ("ConsolidationResult", "ConsolidationSummarizer", "consolidate_session")

#: ``summarizer(evidence items, context) -> drafts``; raising means "failed".
ConsolidationSummarizer = Callable[[Sequence[Mapping[str, Any]], Mapping[str, Any]], Any]

CONSOLIDATION_SCOPES: Final = ("session", "agent")
#: Messages this trusted or more are consolidated (user-authored and above, §9.1).
TRUSTED: Final = frozenset(t.value for t in Trust if t >= Trust.USER)
MAX_CANDIDATES: Final = 64
MAX_SENTENCE: Final = 1000
_REQUEST_FIELDS: Final = frozenset({"sessionId", "scope", "scopeId", "items", "maxCandidates"})
_DRAFT_FIELDS: Final = frozenset(
    {
        "category",
        "content",
        "summary",
        "tags",
        "confidence",
        "importance",
        "evidenceItemIds",
        "scope",
        "scopeId",
    }
)
_RULES: Final = (
    (
        "preference",
        re.compile(r"\b(?:prefers?|preferred|i like|always|never)\b|喜欢|偏好|总是|不要", re.I),
    ),
    (
        "instruction",
        re.compile(r"\b(?:remember|make sure|must|do not|don't)\b|记住|务必|必须", re.I),
    ),
    ("decision", re.compile(r"\b(?:decided|we will|agreed|chose)\b|决定|约定|选择了", re.I)),
)
_INJECTION: Final = re.compile(
    r"ignore (?:all |any )?(?:previous|prior|above) instructions|disregard (?:the )?system|"
    r"^\s*(?:system|developer)\s*:|忽略(?:之前|以上)的?指令",
    re.I | re.M,
)
_SENTENCE: Final = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    candidates: tuple[dict[str, Any], ...]
    rejected: tuple[dict[str, Any], ...]
    strategy: str
    degraded: bool = False
    degraded_reason: str | None = None
    notes: tuple[str, ...] = field(default=())

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "degraded": self.degraded,
            "candidates": list(self.candidates),
            "rejected": list(self.rejected),
        }
        if self.degraded_reason is not None:
            out["degradedReason"] = self.degraded_reason
        return out


def _request(raw: Any) -> tuple[str, dict[str, str], list[Mapping[str, Any]], int]:
    request = object_value(raw, "ConsolidationRequest")
    known_fields(request, _REQUEST_FIELDS, "ConsolidationRequest")
    session_id = identifier(request.get("sessionId"), "sessionId")
    scope = request.get("scope", "session")
    if scope not in CONSOLIDATION_SCOPES:
        raise InvalidArgument(
            "consolidation yields session or agent candidates only (promotion is audited)",
            details={"field": "scope", "scope": scope},
        )
    scope_id = identifier(request.get("scopeId", session_id), "scopeId")
    items = request.get("items")
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise InvalidArgument("items must be a bounded array", details={"field": "items"})
    limit = bounded_integer(request.get("maxCandidates", MAX_CANDIDATES), "maxCandidates", 0, 1000)
    evidence = [object_value(i, f"items[{n}]") for n, i in enumerate(items)]
    return session_id, {"scope": str(scope), "scopeId": scope_id}, evidence, limit


def _rule_drafts(evidence: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    drafts: list[dict[str, Any]] = []
    for item in evidence:
        content = item.get("content")
        if item.get("kind") != "message" or item.get("trust") not in TRUSTED:
            continue
        if not isinstance(content, str):
            continue
        for match in _SENTENCE.finditer(content):
            sentence = match.group(0).strip()
            if not sentence or len(sentence) > MAX_SENTENCE:
                continue
            for category, pattern in _RULES:
                if pattern.search(sentence):
                    drafts.append(
                        {
                            "category": category,
                            "content": sentence,
                            "evidenceItemIds": [item.get("itemId")],
                        }
                    )
                    break
    return drafts


def _llm_drafts(
    summarizer: ConsolidationSummarizer,
    evidence: Sequence[Mapping[str, Any]],
    context: Mapping[str, Any],
) -> list[dict[str, Any]]:
    output = summarizer(evidence, context)
    if not isinstance(output, list | tuple):
        raise InvalidArgument("consolidation summary must be an array of drafts")
    drafts = []
    for index, draft in enumerate(output):
        value = object_value(draft, f"drafts[{index}]")
        known_fields(value, _DRAFT_FIELDS, f"drafts[{index}]")
        drafts.append(dict(value))
    return drafts


def _candidate(
    draft: Mapping[str, Any],
    sources: Sequence[Mapping[str, Any]],
    session_id: str,
    scope: Mapping[str, str],
    strategy: str,
    degraded: bool,
) -> dict[str, Any]:
    sensitivity, sinks = inherited_policy(sources)
    observed = max(
        str(s.get("createdAt") or s.get("provenance", {}).get("observedAt")) for s in sources
    )
    content = str(draft["content"])
    memory_id = (
        "mem-c-"
        + digest(
            {"sessionId": session_id, **scope, "content": content},
            "chainlesschain.memory-candidate/v1",
            "peer",
        )[7:39]
    )
    provenance: dict[str, Any] = {
        "source": "llm-summary" if strategy == "llm" else "rule-extract",
        "observedAt": observed,
        "parentDigests": sorted({str(s["digest"]) for s in sources if s.get("digest")}),
    }
    if degraded:
        provenance["degraded"] = True
    raw: dict[str, Any] = {
        "schemaVersion": 1,
        "memoryId": memory_id,
        **scope,
        "category": draft.get("category", "fact"),
        "content": content,
    }
    if draft.get("summary") is not None:
        raw["summary"] = draft["summary"]
    raw.update(
        provenance=provenance,
        evidenceRefs=[
            {
                "store": "session",
                "id": str(s["itemId"]),
                **({"digest": s["digest"]} if s.get("digest") else {}),
            }
            for s in sources
        ],
        confidence=draft.get("confidence", 0.5 if strategy == "llm" else 0.4),
        importance=draft.get("importance", 0.5),
        tags=list(draft.get("tags") or []),
        sensitivity=sensitivity,
        allowedSinks=sinks,
        state="candidate",
        retentionPolicy={"mode": "session" if scope["scope"] == "session" else "durable"},
        createdAt=observed,
        updatedAt=observed,
        accessCount=0,
        revision=1,
    )
    return normalize_memory_record(raw)


def _screen(
    draft: Mapping[str, Any],
    ids: Sequence[str],
    by_id: Mapping[str, Mapping[str, Any]],
    scope: Mapping[str, str],
    secret_probe: SecretProbe | None,
) -> str | None:
    """Why a draft cannot become a candidate (a reason code), or ``None``."""
    if ("scope" in draft and draft["scope"] != scope["scope"]) or (
        "scopeId" in draft and draft["scopeId"] != scope["scopeId"]
    ):
        return "scope_widening"
    if not ids or any(i not in by_id for i in ids):
        return "unknown_evidence"
    content, summary = draft.get("content"), draft.get("summary")
    if not isinstance(content, str) or not content or not isinstance(summary, str | None):
        return "invalid_draft"
    text = f"{content}\n{summary or ''}"
    try:
        reject_secret_material(text, secret_probe)
    except InvalidArgument:
        return "secret_material"
    if _INJECTION.search(text):
        return "possible_injection"
    return None


def consolidate_session(
    request: Any,
    *,
    summarizer: ConsolidationSummarizer | None = None,
    secret_probe: SecretProbe | None = None,
) -> ConsolidationResult:
    """Candidates from one session's evidence (see the module docstring)."""
    session_id, scope, evidence, limit = _request(request)
    by_id = {str(i.get("itemId")): i for i in evidence}
    strategy, degraded, reason = "rules", False, None
    drafts: list[dict[str, Any]]
    if summarizer is None:
        drafts = _rule_drafts(evidence)
    else:
        try:
            drafts = _llm_drafts(summarizer, evidence, {"sessionId": session_id, **scope})
            strategy = "llm"
        except Exception as exc:  # any summarizer failure degrades to the rules
            code = exc.code if isinstance(exc, KernelError) else getattr(exc, "code", None)
            strategy, degraded = "rule-fallback", True
            reason = str(code or "summarizer_failed")[:128]
            drafts = _rule_drafts(evidence)
    candidates: dict[str, dict[str, Any]] = {}
    rejected: list[dict[str, Any]] = []
    for index, draft in enumerate(drafts):
        ids = [str(i) for i in draft.get("evidenceItemIds") or []]
        code = _screen(draft, ids, by_id, scope, secret_probe)
        record = None
        if code is None:
            sources = [by_id[i] for i in ids]
            try:
                record = _candidate(draft, sources, session_id, scope, strategy, degraded)
            except KernelError as exc:
                code = exc.code
        if record is not None and len(candidates) >= limit and record["memoryId"] not in candidates:
            code = "candidate_limit"
        if code is not None or record is None:
            rejected.append({"draft": index, "reason": code, "evidenceItemIds": ids})
            continue
        candidates.setdefault(record["memoryId"], record)
    return ConsolidationResult(
        tuple(candidates.values()), tuple(rejected), strategy, degraded, reason
    )

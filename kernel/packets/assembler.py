"""ContextPacket and ContextAssembler (design 003 §4, design 108 §7 and §12).

Every model-visible fragment is a :class:`ContextPacket` carrying source,
scope, role, trust level, sensitivity, token budget, cache key, invalidation
and citation.  :func:`assemble` turns packets into an :class:`AssembledContext`
— the only thing a provider adapter renders — and records one
:class:`PacketDecision` per packet.  Decision records carry ids, reason codes,
token counts, digests and finding offsets, **never the body**.

Per packet, in input order (output order = input order):

1. sink admission — ``check_sink`` against the policy sink (allowed sinks and
   the sink's sensitivity ceiling): ``rejected`` on failure;
2. trust — capped by ``source_trust(role, source)``; below ``min_trust`` is
   ``rejected``; a ``system`` role without ``host`` trust is demoted to
   ``user`` (untrusted content never becomes a system packet);
3. dedup by content digest — a repeat of an admitted packet is
   ``deduplicated`` (``duplicateOf`` names the first);
4. anticorruption — secrets redacted (or the packet ``rejected`` under
   ``secret_action="reject"``), local paths rewritten, injection in untrusted
   content ``neutralised`` (wrapped as quoted data);
5. size — above ``reference_threshold`` (10,000 tokens) the body is replaced
   by a content reference (``externalized``, ``mustReference``); above the
   packet cap (default 1,000 tokens, or the packet's own smaller
   ``token_budget``) it is ``truncated``.

When several steps apply, ``decision`` is the strongest (externalized >
neutralised > redacted > truncated > admitted) and ``reasons`` lists them all.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, TypeVar

from kernel.errors import InvalidArgument
from kernel.packets.anticorruption import Finding, SecretAction, neutralise, sanitize
from kernel.packets.profiles import ProviderContextProfile, plan_budget
from kernel.packets.trust import SourceKind, TrustLabel, check_sink, derive, source_trust
from kernel.planning.tokens import TokenEstimator, cjk_estimate, utf8_byte_length
from kernel.vocabulary import SCOPE_ORDER, Sensitivity, Trust

__all__ = (
    "CONTENT_DIGEST_DOMAIN",
    "DEFAULT_PACKET_TOKEN_CAP",
    "DEFAULT_REFERENCE_THRESHOLD",
    "AssembledContext",
    "AssembledPacket",
    "AssemblyPolicy",
    "ContentReference",
    "ContextPacket",
    "Decision",
    "PacketDecision",
    "PacketRole",
    "assemble",
    "content_digest",
)

DEFAULT_PACKET_TOKEN_CAP: Final = 1_000
DEFAULT_REFERENCE_THRESHOLD: Final = 10_000
CONTENT_DIGEST_DOMAIN: Final = "cmk.context-packet-content/v1"
_INVALIDATION_RE: Final = re.compile(
    r"never|turn|session|compaction|source_change(?::\S+)?|expires_at:\S+"
)


def content_digest(text: str) -> str:
    """``sha256:<hex>`` of ``utf8(domain + NUL + text)`` (identity; never an estimate)."""
    data = f"{CONTENT_DIGEST_DOMAIN}\u0000{text}".encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()


class PacketRole(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Decision(StrEnum):
    ADMITTED = "admitted"
    TRUNCATED = "truncated"
    REDACTED = "redacted"
    NEUTRALISED = "neutralised"
    REJECTED = "rejected"
    DEDUPLICATED = "deduplicated"
    EXTERNALIZED = "externalized"


_STRENGTH: Final = MappingProxyType({
    Decision.ADMITTED: 0,
    Decision.TRUNCATED: 1,
    Decision.REDACTED: 2,
    Decision.NEUTRALISED: 3,
    Decision.EXTERNALIZED: 4,
})


@dataclass(frozen=True, slots=True)
class ContentReference:
    """A pointer to content kept out of the window (read back via a tool)."""

    digest: str
    tokens: int
    utf8_bytes: int

    def render(self) -> str:
        return (
            f"[content externalized: {self.digest} ({self.tokens} tokens, "
            f"{self.utf8_bytes} bytes); read it with a content tool if needed]"
        )

    def to_wire(self) -> dict[str, object]:
        return {"digest": self.digest, "tokens": self.tokens, "utf8Bytes": self.utf8_bytes}


_E = TypeVar("_E", bound=StrEnum)


def _enum(kind: type[_E], value: str, name: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise InvalidArgument(f"invalid {name} {value!r}", details={"field": name}) from None


@dataclass(frozen=True, slots=True)
class ContextPacket:
    """One model-visible fragment with its full governance envelope."""

    packet_id: str
    source: SourceKind
    scope: str
    role: PacketRole
    trust_level: Trust
    sensitivity: Sensitivity
    allowed_sinks: frozenset[str]
    token_budget: int
    cache_key: str
    invalidation: str
    citation: str
    content: str | None = None
    content_ref: ContentReference | None = None

    def __post_init__(self) -> None:
        for name in ("packet_id", "cache_key", "citation"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvalidArgument(f"packet {name} must be a non-empty string")
        object.__setattr__(self, "source", _enum(SourceKind, self.source, "source"))
        object.__setattr__(self, "role", _enum(PacketRole, self.role, "role"))
        label = TrustLabel(self.trust_level, self.sensitivity, self.allowed_sinks)
        object.__setattr__(self, "trust_level", label.trust)
        object.__setattr__(self, "sensitivity", label.sensitivity)
        object.__setattr__(self, "allowed_sinks", label.allowed_sinks)
        if self.scope not in SCOPE_ORDER:
            raise InvalidArgument(
                f"invalid packet scope {self.scope!r}", details={"known": SCOPE_ORDER}
            )
        if not isinstance(self.invalidation, str) or not _INVALIDATION_RE.fullmatch(
            self.invalidation
        ):
            raise InvalidArgument("invalid packet invalidation", details={"field": "invalidation"})
        budget = self.token_budget
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise InvalidArgument("packet token_budget must be a positive integer")
        if (self.content is None) == (self.content_ref is None):
            raise InvalidArgument("a packet carries exactly one of content and content_ref")

    @property
    def label(self) -> TrustLabel:
        return TrustLabel(self.trust_level, self.sensitivity, self.allowed_sinks)


@dataclass(frozen=True, slots=True)
class AssemblyPolicy:
    """Admission / truncation policy for one assembly (one provider sink)."""

    sink: str = "provider"
    packet_token_cap: int = DEFAULT_PACKET_TOKEN_CAP
    reference_threshold: int = DEFAULT_REFERENCE_THRESHOLD
    min_trust: Trust = Trust.UNTRUSTED
    secret_action: SecretAction = "redact"
    workspace_root: str | None = None
    estimator: TokenEstimator = field(default=cjk_estimate)

    def __post_init__(self) -> None:
        cap, ref = self.packet_token_cap, self.reference_threshold
        if not (isinstance(cap, int) and isinstance(ref, int)) or not 0 < cap <= ref:
            raise InvalidArgument("need 0 < packet_token_cap <= reference_threshold")
        object.__setattr__(self, "min_trust", _enum(Trust, self.min_trust, "min_trust"))
        if self.secret_action not in ("redact", "reject"):
            raise InvalidArgument("secret_action must be 'redact' or 'reject'")

    @classmethod
    def for_profile(
        cls, profile: ProviderContextProfile, *, workspace_root: str | None = None
    ) -> AssemblyPolicy:
        """Policy for a provider profile: sink ``provider:<name>``, caps scaled to small windows.

        Only the caps change with the model (cap ≤ input budget / 8, reference
        threshold ≤ input budget / 2); the 1k / 10k ceilings still apply.
        """
        budget = plan_budget(profile).input_budget
        cap = min(DEFAULT_PACKET_TOKEN_CAP, max(64, budget // 8))
        ref = max(cap, min(DEFAULT_REFERENCE_THRESHOLD, budget // 2))
        sink = f"provider:{profile.provider}" if profile.provider != "unknown" else "provider"
        return cls(
            sink=sink, packet_token_cap=cap, reference_threshold=ref, workspace_root=workspace_root
        )


@dataclass(frozen=True, slots=True)
class AssembledPacket:
    """A packet as the provider adapter renders it."""

    packet_id: str
    role: PacketRole
    text: str
    tokens: int
    trust_level: Trust
    sensitivity: Sensitivity
    allowed_sinks: frozenset[str]
    citation: str
    cache_key: str
    content_ref: ContentReference | None = None

    def __post_init__(self) -> None:
        if self.role is PacketRole.SYSTEM and self.trust_level is not Trust.HOST:
            raise InvalidArgument("only host-trust content may be a system packet")

    @property
    def label(self) -> TrustLabel:
        return TrustLabel(self.trust_level, self.sensitivity, self.allowed_sinks)


@dataclass(frozen=True, slots=True)
class PacketDecision:
    """What the assembler did with one packet — metadata only, never the body."""

    packet_id: str
    cache_key: str
    decision: Decision
    reasons: tuple[str, ...]
    tokens_in: int
    tokens_out: int
    content_digest: str
    output_digest: str | None
    findings: tuple[Finding, ...] = ()
    must_reference: bool = False
    duplicate_of: str | None = None

    def to_wire(self) -> dict[str, object]:
        return {
            "packetId": self.packet_id,
            "cacheKey": self.cache_key,
            "decision": self.decision.value,
            "reasons": list(self.reasons),
            "tokensIn": self.tokens_in,
            "tokensOut": self.tokens_out,
            "contentDigest": self.content_digest,
            "outputDigest": self.output_digest,
            "findings": [f.to_wire() for f in self.findings],
            "mustReference": self.must_reference,
            "duplicateOf": self.duplicate_of,
        }


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """Admitted packets in order plus one decision per input packet."""

    sink: str
    packets: tuple[AssembledPacket, ...]
    decisions: tuple[PacketDecision, ...]

    @property
    def total_tokens(self) -> int:
        return sum(p.tokens for p in self.packets)

    @property
    def sensitivity(self) -> Sensitivity:
        if not self.packets:
            return Sensitivity.PUBLIC
        return derive(p.label for p in self.packets).sensitivity

    @property
    def allowed_sinks(self) -> frozenset[str]:
        """Sinks every admitted packet allows (so ``check_sink`` works on the whole context)."""
        if not self.packets:
            return frozenset({self.sink})
        return derive(p.label for p in self.packets).allowed_sinks

    def to_wire(self) -> dict[str, object]:
        """Decision log (safe to persist/log: no bodies)."""
        return {
            "sink": self.sink,
            "totalTokens": self.total_tokens,
            "decisions": [d.to_wire() for d in self.decisions],
        }


# --------------------------------------------------------------------------- assembly

_MARKER: Final = "\n[truncated to the {cap}-token packet cap; full content: {digest}]"
_REDACTED_OPEN: Final = "[REDACTED:"


def _safe_cut(body: str, k: int) -> int:
    """Move a cut point back so it never splits a ``[REDACTED:…]`` marker."""
    opened = body.rfind(_REDACTED_OPEN, 0, k)
    if opened != -1 and body.find("]", opened, k) == -1:
        return opened
    return k


def _truncate(
    body: str, render: Callable[[str], str], cap: int, marker: str, estimate: TokenEstimator
) -> str | None:
    """Longest prefix whose rendering (with ``marker``) fits ``cap``; None if nothing fits."""
    if estimate(render(marker.lstrip("\n"))) > cap:
        return None
    lo, hi = 0, len(body)
    while lo < hi:  # largest k with estimate(render(body[:k] + marker)) <= cap
        mid = (lo + hi + 1) // 2
        if estimate(render(body[:mid] + marker)) <= cap:
            lo = mid
        else:
            hi = mid - 1
    k = _safe_cut(body, lo)
    return render(body[:k] + marker) if k else render(marker.lstrip("\n"))


def _reject(
    packet: ContextPacket,
    digest: str,
    tokens_in: int,
    reasons: list[str],
    reason: str,
    findings: tuple[Finding, ...] = (),
) -> tuple[PacketDecision, None]:
    record = PacketDecision(
        packet.packet_id, packet.cache_key, Decision.REJECTED, (*reasons, reason), tokens_in, 0,
        digest, None, findings,
    )  # fmt: skip
    return record, None


def assemble(
    packets: Iterable[ContextPacket], policy: AssemblyPolicy | None = None
) -> AssembledContext:
    """Admit, dedupe, sanitise and size ``packets`` for ``policy.sink``.

    Pure and deterministic: the same packets and policy give the same context
    and decisions.  Duplicate ``packet_id`` values are a caller bug.
    """
    pol = policy or AssemblyPolicy()
    est = pol.estimator
    out: list[AssembledPacket] = []
    decisions: list[PacketDecision] = []
    seen_ids: set[str] = set()
    seen_digests: dict[str, str] = {}
    for packet in packets:
        if not isinstance(packet, ContextPacket):
            raise InvalidArgument("assemble() takes ContextPacket values")
        if packet.packet_id in seen_ids:
            raise InvalidArgument("duplicate packet id", details={"packetId": packet.packet_id})
        seen_ids.add(packet.packet_id)
        decision, assembled = _assemble_one(packet, pol, est, seen_digests)
        decisions.append(decision)
        if assembled is not None:
            out.append(assembled)
            seen_digests.setdefault(decision.content_digest, packet.packet_id)
    return AssembledContext(pol.sink, tuple(out), tuple(decisions))


def _assemble_one(
    packet: ContextPacket,
    pol: AssemblyPolicy,
    est: TokenEstimator,
    seen_digests: dict[str, str],
) -> tuple[PacketDecision, AssembledPacket | None]:
    content = packet.content
    ref = packet.content_ref
    if content is not None:
        digest, tokens_in = content_digest(content), est(content)
    else:
        assert ref is not None
        digest, tokens_in = ref.digest, ref.tokens
    reasons: list[str] = []

    sink = check_sink(packet, pol.sink)
    if not sink.allowed:
        return _reject(packet, digest, tokens_in, reasons, sink.reason)

    trust = source_trust(packet.role.value, packet.source.value)
    if packet.trust_level < trust:
        trust = packet.trust_level
    elif trust < packet.trust_level:
        reasons.append("trust_capped_by_source")
    if trust < pol.min_trust:
        return _reject(packet, digest, tokens_in, reasons, "trust_below_floor")

    role = packet.role
    if role is PacketRole.SYSTEM and trust is not Trust.HOST:
        role = PacketRole.USER
        reasons.append("role_demoted")

    first = seen_digests.get(digest)
    if first is not None:
        reasons.append("duplicate_content")
        dup = PacketDecision(
            packet.packet_id, packet.cache_key, Decision.DEDUPLICATED, tuple(reasons),
            tokens_in, 0, digest, None, duplicate_of=first,
        )  # fmt: skip
        return dup, None

    def emit(
        decision: Decision,
        text: str,
        findings: tuple[Finding, ...] = (),
        reference: ContentReference | None = None,
    ) -> tuple[PacketDecision, AssembledPacket]:
        tokens = est(text)
        assembled = AssembledPacket(
            packet.packet_id, role, text, tokens, trust, packet.sensitivity,
            packet.allowed_sinks, packet.citation, packet.cache_key, reference,
        )  # fmt: skip
        record = PacketDecision(
            packet.packet_id, packet.cache_key, decision, tuple(reasons), tokens_in, tokens,
            digest, content_digest(text), findings, reference is not None,
        )  # fmt: skip
        return record, assembled

    if content is None:
        assert ref is not None
        reasons.append("content_ref_supplied")
        return emit(Decision.EXTERNALIZED, ref.render(), reference=ref)

    san = sanitize(
        content,
        trusted=trust >= Trust.USER,
        workspace_root=pol.workspace_root,
        secret_action=pol.secret_action,
        source=packet.source.value,
        wrap=False,
    )
    if san.rejected:
        return _reject(packet, digest, tokens_in, reasons, "secret_rejected", san.findings)
    decision = Decision.ADMITTED
    if san.redacted:
        reasons.append("secret_redacted")
    if san.paths_rewritten:
        reasons.append("local_path_rewritten")
    if san.redacted or san.paths_rewritten:
        decision = Decision.REDACTED
    if san.neutralised:
        reasons.append("injection_neutralised")
        decision = Decision.NEUTRALISED

    if tokens_in > pol.reference_threshold:
        reasons.append("over_reference_threshold")
        reference = ContentReference(digest, tokens_in, utf8_byte_length(content))
        return emit(Decision.EXTERNALIZED, reference.render(), san.findings, reference)

    assert san.text is not None

    def render(body: str) -> str:
        return neutralise(body, source=packet.source.value) if san.neutralised else body

    text = render(san.text)
    cap = min(packet.token_budget, pol.packet_token_cap)
    if est(text) > cap:
        marker = _MARKER.format(cap=cap, digest=digest)
        cut = _truncate(san.text, render, cap, marker, est)
        if cut is None:
            reasons.append("cap_below_marker")
            reference = ContentReference(digest, tokens_in, utf8_byte_length(content))
            return emit(Decision.EXTERNALIZED, reference.render(), san.findings, reference)
        reasons.append("truncated_to_cap")
        text = cut
        if _STRENGTH[decision] < _STRENGTH[Decision.TRUNCATED]:
            decision = Decision.TRUNCATED
    return emit(decision, text, san.findings)

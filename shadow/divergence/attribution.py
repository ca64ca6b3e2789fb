"""Who is wrong about one difference, and why (one vocabulary: ``shadow.codes.ATTRIBUTIONS``).

Each side of a comparison brings its **evidence**: the invariant violations of its own
projection and the falsified claims (``shadow.divergence.claims``), both indexed by item.
For a divergence the engine asks which side's evidence *explains* it — only the violation
codes relevant to that divergence code count (``RELEVANT``), on the divergence's items
(memory: on the operations it names; a refusal: on the items the refusal names);
provider outcome divergences are explained by the same finding on a side.  The answer:

* ``candidate`` / ``baseline`` / ``both`` — that side's evidence explains it; the
  divergence detail names it in ``attribution_basis`` (``"baseline:drop_reason.unjustified"``);
* ``twin`` — a comparison of two legacy surfaces (the basis still says which twin broke
  what);
* ``none`` — no evidence; ``attribution_reason`` says why (e.g. the legacy's claim could
  not be verified, or a policy difference).  The run then asks the reviewed
  intended-difference rules (``shadow.intended``), which turn a covered ``none`` into
  ``intended``.

Item-level divergences are split by basis, so every emitted divergence has one clean
attribution (``split``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from shadow.divergence import Violation

_PROVIDER: Final = frozenset({"provider.degraded_masked", "provider.usage_unknown_masked",
                              "provider.cancel_swallowed", "shadow.side_effect",
                              "secret.leaked"})
_DROPS: Final = frozenset({"drop_reason.unjustified", "protected.dropped", "pending.lost",
                           "tool_pair.split", "tool_pair.mismatch"})
_KEPT_WRONGLY: Final = frozenset({"secret.leaked", "trust.escalated", "tool_pair.split",
                                  "tool_pair.mismatch", "system_policy.altered"})
_MEMORY: Final = frozenset({"memory.scope_expanded", "memory.recall_mismatch",
                            "memory.sensitivity_lowered", "deletion.overbroad",
                            "deletion.backfill", "deletion.receipt_mismatch",
                            "trust.escalated", "provider.degraded_masked",
                            "provider.cancel_swallowed", "secret.leaked"})

#: divergence code -> (violation codes of the *dropping / differing* side that explain it,
#: violation codes of the *other* side that explain it).  For symmetric codes both sets
#: are the same.
RELEVANT: Final[Mapping[str, frozenset[str]]] = {
    "item.missing_in_candidate": _DROPS | _KEPT_WRONGLY,
    "item.missing_in_baseline": _DROPS | _KEPT_WRONGLY,
    "drop_reason.mismatch": frozenset({"drop_reason.unjustified", "protected.dropped",
                                       "pending.lost", "secret.leaked"}),
    "item.order": frozenset({"item.reordered", "tool_pair.mismatch"}),
    "digest.mismatch": frozenset({"alteration.unjustified", "system_policy.altered",
                                  "pinned.altered"}),
    "tool_pair.mismatch": frozenset({"tool_pair.mismatch", "tool_pair.split"}),
    "task_state.mismatch": frozenset({"pending.lost", "tool_pair.mismatch",
                                      "tool_pair.split"}),
    "item.derived_mismatch": _PROVIDER | frozenset({"trust.escalated",
                                                    "drop_reason.unjustified",
                                                    "protected.dropped", "pending.lost",
                                                    "tool_pair.split"}),
    "summary.text_only": _PROVIDER | frozenset({"trust.escalated"}),
    # on the items a refusal names (``candidate_error_detail.protectedItemIds``), or the
    # candidate's own false refusal
    "outcome.error_mismatch": frozenset({"protected.dropped", "pending.lost", "pinned.altered",
                                         "outcome.error_mismatch", "provider.cancel_swallowed",
                                         "provider.degraded_masked", "candidate.unavailable"}),
    "provider.degraded_masked": frozenset({"provider.degraded_masked"}),
    "provider.usage_unknown_masked": frozenset({"provider.usage_unknown_masked"}),
    "provider.cancel_swallowed": frozenset({"provider.cancel_swallowed"}),
    "memory.state_mismatch": _MEMORY,
    "memory.recall_mismatch": _MEMORY,
    "memory.scope_expanded": frozenset({"memory.scope_expanded"}),
    "memory.sensitivity_lowered": frozenset({"memory.sensitivity_lowered"}),
    "deletion.receipt_mismatch": _MEMORY,
}
#: violation codes that explain a divergence whatever items they name (an output order is
#: one fact about the whole output: the LCS picks *some* moved ids, the producer's own
#: check may name their neighbours)
ANY_ITEM: Final[Mapping[str, frozenset[str]]] = {
    "item.order": frozenset({"item.reordered"}),
    # a result where the other side failed: masking the provider's outcome is about the
    # whole output (a swallowed cancellation returns a history instead of aborting)
    "outcome.error_mismatch": frozenset({"provider.cancel_swallowed",
                                         "provider.degraded_masked",
                                         "candidate.unavailable"}),
}
#: codes judged without items: the same finding on a side explains them
ITEMLESS: Final = frozenset({"provider.degraded_masked", "provider.usage_unknown_masked",
                             "provider.cancel_swallowed"})


def op_indexes(detail: Mapping[str, Any]) -> list[int]:
    """Memory operation indexes a violation or divergence names (``op``, ``index``,
    ``ops``, ``effect_ops``)."""
    out: list[int] = []
    for key in ("op", "index"):
        v = detail.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
    for key in ("ops", "effect_ops", "order_only_ops"):
        vs = detail.get(key)
        if isinstance(vs, list):
            out.extend(v for v in vs if isinstance(v, int) and not isinstance(v, bool))
    return out


@dataclass(slots=True)
class Evidence:
    """One side's violations, indexed by item and by code."""

    violations: Sequence[Violation]
    by_item: dict[str, set[str]] = field(default_factory=dict)
    by_op: dict[int, set[str]] = field(default_factory=dict)
    codes: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for v in self.violations:
            self.codes.add(v.code)
            for i in v.item_ids:
                self.by_item.setdefault(i, set()).add(v.code)
            for n in op_indexes(v.detail):
                self.by_op.setdefault(n, set()).add(v.code)

    def explains(self, code: str, ids: Iterable[str], ops: Sequence[int] = ()) -> list[str]:
        rel = RELEVANT.get(code, frozenset())
        if not rel:
            return []
        ids = list(ids)
        found: set[str] = set()
        for i in ids:
            found |= self.by_item.get(i, set()) & rel
        for n in ops:
            found |= self.by_op.get(n, set()) & rel
        if code in ITEMLESS:
            found |= self.codes & rel
        found |= self.codes & ANY_ITEM.get(code, frozenset())
        return sorted(found)


@dataclass(frozen=True, slots=True)
class Attribution:
    who: str
    basis: tuple[str, ...] = ()
    reason: str = ""

    def detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.basis:
            out["attribution_basis"] = list(self.basis)
        if self.reason:
            out["attribution_reason"] = self.reason
        return out


class Judge:
    """Attribution for the divergences of one comparison (``a`` candidate or first twin,
    ``b`` baseline or second twin)."""

    def __init__(self, va: Sequence[Violation], vb: Sequence[Violation], *,
                 twin: bool = False) -> None:
        self.a = Evidence(va)
        self.b = Evidence(vb)
        self.twin = twin
        self._names = ("first", "second") if twin else ("candidate", "baseline")

    def of(self, code: str, ids: Sequence[str], reason: str = "",
           extra: tuple[Sequence[str], Sequence[str]] = ((), ()),
           ops: Sequence[int] = ()) -> Attribution:
        ea = [*self.a.explains(code, ids, ops), *extra[0]]
        eb = [*self.b.explains(code, ids, ops), *extra[1]]
        basis = tuple([f"{self._names[0]}:{c}" for c in ea] + [f"{self._names[1]}:{c}"
                                                               for c in eb])
        if self.twin:
            return Attribution("twin", basis)
        if ea and eb:
            return Attribution("both", basis)
        if ea:
            return Attribution("candidate", basis)
        if eb:
            return Attribution("baseline", basis)
        return Attribution("none", (), reason or "no invariant or falsified claim explains "
                                                 "it (a policy difference)")

    def split(self, code: str, ids: Sequence[str], reason: str = ""
              ) -> list[tuple[Attribution, list[str]]]:
        """Group item ids by their attribution (one divergence per group)."""
        if not ids:
            return [(self.of(code, (), reason), [])]
        groups: dict[tuple[str, tuple[str, ...], str], list[str]] = {}
        keyed: dict[tuple[str, tuple[str, ...], str], Attribution] = {}
        for i in ids:
            att = self.of(code, (i,), reason)
            key = (att.who, att.basis, att.reason)
            groups.setdefault(key, []).append(i)
            keyed[key] = att
        return [(keyed[k], groups[k]) for k in sorted(groups)]

"""Redaction at import: secrets and personal data out, what the comparison needs kept.

Every string of an imported event (message bodies, tool-call arguments, session
metadata, file names — keys too) is scanned by the kernel's own detectors
(:func:`kernel.packets.anticorruption.scan`, trusted: secrets and local paths; injection
text is evidence and stays) plus an e-mail rule the kernel does not have:

* a **secret** becomes ``[REDACTED <label>#<n> len<=<class>]``: its detector label, a
  number that is the same for the same value throughout one session (so equal messages
  stay equal and a repeated key stays recognisable) and its length class (the next power
  of two, at least 8; ``len>1024`` above);
* a **local path** becomes the kernel's own rewrite (``<home>/…``, ``<abs-path>/<name>``);
* an **e-mail address** becomes ``[REDACTED email#<n> len<=<class>]``.

Roles, tool-call ids and tool names are strings like any other: a detector never flags
them, and if one did, the stable placeholder would still pair a call with its result.
After rewriting, the text is scanned again; whatever is still found (a match the rewrite
itself formed) is rewritten again, and after three passes the whole string becomes one
placeholder — a secret never survives.  An object's string value is scanned as
``key: value`` (``{"apiKey": "…"}`` is an assignment).  Counts are kept per detector
rule id; values never.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kernel.packets.anticorruption import Finding, FindingCategory, sanitize, scan

EMAIL_RULE: Final = "personal.email"
RESIDUAL_RULE: Final = "redaction.residual"
EMAIL_RE: Final = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}"
    r"[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}"
    r"(?![A-Za-z0-9-])")
CATEGORY_OF: Final = {"secret": "secret", "path": "local_path", "personal": "personal",
                      "redaction": "secret"}
_PASSES: Final = 3


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    kind: str  # secret | path | email
    rule_id: str
    label: str


def length_class(n: int) -> str:
    size = 8
    while size < n and size <= 1024:
        size *= 2
    return f"len<={size}" if size <= 1024 else "len>1024"


def _merged_secrets(findings: list[Finding]) -> list[Span]:
    spans: list[Span] = []
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        if spans and f.start < spans[-1].end:
            last = spans[-1]
            spans[-1] = Span(last.start, max(last.end, f.end), "secret", last.rule_id,
                             last.label)
        else:
            spans.append(Span(f.start, f.end, "secret", f.rule_id, f.label))
    return spans


def _overlaps(span: Span | Finding, taken: list[Span]) -> bool:
    return any(span.start < t.end and t.start < span.end for t in taken)


def find_spans(text: str, key: str = "") -> list[Span]:
    """Non-overlapping spans to rewrite: merged secrets, then paths, then e-mails.

    ``key``: the object key the text is the value of; it is scanned as ``key: text`` so
    that ``{"password": "hunter2"}`` is seen as the assignment it is (spans are offsets
    in ``text``; a span inside the key is not one)."""
    prefix = f"{key}: " if key else ""
    full = prefix + text
    findings = list(scan(full, trusted=True))
    spans = _merged_secrets([f for f in findings if f.category is FindingCategory.SECRET])
    for f in findings:
        if f.category is FindingCategory.LOCAL_PATH and not _overlaps(f, spans):
            spans.append(Span(f.start, f.end, "path", f.rule_id, f.label))
    for m in EMAIL_RE.finditer(full):
        email = Span(m.start(), m.end(), "email", EMAIL_RULE, "email")
        if not _overlaps(email, spans):
            spans.append(email)
    shift = len(prefix)
    return sorted((Span(max(sp.start, shift) - shift, sp.end - shift, sp.kind, sp.rule_id,
                        sp.label) for sp in spans if sp.end > shift), key=lambda s: s.start)


def leaks(text: str, key: str = "") -> bool:
    """True when ``text`` (the value of ``key``) still holds anything the redactor
    rewrites."""
    return bool(find_spans(text, key))


@dataclass
class Redactor:
    """The redaction state of one session: stable placeholders and counts by rule id."""

    numbers: dict[tuple[str, str], int] = field(default_factory=dict)
    issued: Counter[str] = field(default_factory=Counter)  # placeholders per label
    counts: Counter[str] = field(default_factory=Counter)  # redactions per rule id

    def _numbered(self, label: str, value: str) -> str:
        key = (label, value)
        if key not in self.numbers:
            self.issued[label] += 1
            self.numbers[key] = self.issued[label]
        return f"[REDACTED {label}#{self.numbers[key]} {length_class(len(value))}]"

    def _replacement(self, span: Span, value: str) -> str:
        if span.kind == "path":
            rewritten = sanitize(value, trusted=True).text
            if rewritten is not None and rewritten != value and not leaks(rewritten):
                return rewritten
            return self._numbered("path", value)
        return self._numbered(span.label, value)

    def text(self, text: str, key: str = "") -> str:
        """``text`` (the value of ``key``, when it is one) with every finding rewritten."""
        for _ in range(_PASSES):
            spans = find_spans(text, key)
            if not spans:
                return text
            out, pos = [], 0
            for span in spans:
                value = text[span.start:span.end]
                out += [text[pos:span.start], self._replacement(span, value)]
                self.counts[span.rule_id] += 1
                pos = span.end
            text = "".join(out) + text[pos:]
        if not leaks(text, key):
            return text
        self.counts[RESIDUAL_RULE] += 1
        return self._numbered("text", text)

    def value(self, value: Any) -> Any:
        """A JSON value with every string (and key) redacted; an object's string values
        are scanned with their key."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.text(v, str(k)) if isinstance(v, str)
                    else self.value(v) for k, v in value.items()}
        return value


def by_category(counts: Mapping[str, int]) -> dict[str, int]:
    """Redaction counts per category (``secret``, ``local_path``, ``personal``)."""
    out: Counter[str] = Counter()
    for rule, n in counts.items():
        out[CATEGORY_OF.get(rule.split(".", 1)[0], "secret")] += n
    return dict(sorted(out.items()))

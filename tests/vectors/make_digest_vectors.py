"""Generate tests/vectors/digests.json: published RFC 8785 digest vectors.

    python tests/vectors/make_digest_vectors.py          # rewrite the file
    python tests/vectors/make_digest_vectors.py --check  # exit 1 if it is stale

The canonical text comes from the reference ``rfc8785`` package, never from
``kernel.canonical.digest``, so ``tests/kernel/test_digest.py`` checks the kernel against an
independent implementation. Another language checks itself by computing, for each
case, ``canonical`` from ``value`` and
``digest = "sha256:" + hex(sha256(utf8(domain + U+0000 + canonical)))``.

Reading note: ``value`` is written with Python's ``json`` (``ensure_ascii=False``);
a float that is integral is written with ``.0`` (``1.0``, ``-0.0``) and reads back
as the same IEEE-754 double in any language.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import rfc8785

OUT = Path(__file__).resolve().parent / "digests.json"
DEFAULT_DOMAIN = "chainlesschain.context-memory/v1"
ITEM_DOMAIN = "chainlesschain.context-item/v1"
RECORD_DOMAIN = "chainlesschain.memory-record/v1"

CONTEXT_ITEM = {
    "schemaVersion": 1,
    "itemId": "msg_1",
    "kind": "tool-schema",
    "scope": "user",
    "scopeId": "user-2",
    "sourceRef": {"store": "memory-store", "id": "src-msg_1", "eventSequence": 9730},
    "provenance": {
        "source": "user-input",
        "actor": "tool.exec",
        "observedAt": "2026-08-28T13:03:47.232Z",
        "parentDigests": [
            "sha256:36809cc5f7e0d6502dff75ba9ea1bfa0b9e688ac5c9c2ee37d6baaa6b399168c",
            "sha256:ce506c0762a9315a828994ffe62f9f4fb01e0b11a1ce0d09709a1a2189d93b4d",
        ],
    },
    "trust": "verified",
    "sensitivity": "public",
    "allowedSinks": ["kernel.tombstone", "provider.local", "provider/openai", "sink_9"],
    "tokenEstimate": 3953837,
    "priority": 885178,
    "pinned": False,
    "createdAt": "2026-08-28T13:03:47.232Z",
    "binding": {"requiredForRecovery": True, "toolCallId": "call-7", "toolRole": "result"},
    "content": "naïve café résumé — 中文 🙂\n\t\"quoted\" \\ path/to/file",
}

MEMORY_RECORD = {
    "schemaVersion": 1,
    "memoryId": "Mem.2",
    "scope": "project",
    "scopeId": "project-1",
    "category": "fact",
    "content": "summary rotation naïve project pool schema Kubernetes utf-8 Пример,",
    "provenance": {"source": "explicit-user-memory", "actor": "user-1"},
    "evidenceRefs": [{"store": "fixture", "id": "ev-Mem.2-0"}],
    "confidence": 0.56,
    "importance": 0.9500000000000001,
    "tags": ["VUE", "Vue", "vue", "é", "_x"],
    "state": "superseded",
    "retentionPolicy": {"mode": "legal_hold", "legalHoldId": "hold-7"},
    "revision": 38,
    "accessCount": 14,
}

RFC_8785_EXAMPLE = {
    "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
    "literals": [None, True, False],
}

RFC_8785_SORTING = {
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\U0001f600": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis",
}

# (id, value, domain) — ids are stable; append new cases at the end of a group.
CASES: list[tuple[str, Any, str]] = [
    # scalars
    ("scalar-null", None, DEFAULT_DOMAIN),
    ("scalar-true", True, DEFAULT_DOMAIN),
    ("scalar-false", False, DEFAULT_DOMAIN),
    # integers
    ("int-zero", 0, DEFAULT_DOMAIN),
    ("int-one", 1, DEFAULT_DOMAIN),
    ("int-minus-one", -1, DEFAULT_DOMAIN),
    ("int-max-safe", 2**53 - 1, DEFAULT_DOMAIN),
    ("int-min-safe", -(2**53 - 1), DEFAULT_DOMAIN),
    # floats: ECMAScript Number#toString forms
    ("float-tenth", 0.1, DEFAULT_DOMAIN),
    ("float-sum-rounding", 0.1 + 0.2, DEFAULT_DOMAIN),
    ("float-negative-zero", -0.0, DEFAULT_DOMAIN),
    ("float-integral", 1.0, DEFAULT_DOMAIN),
    ("float-integral-hundred", 100.0, DEFAULT_DOMAIN),
    ("float-two-pow-53", 9007199254740992.0, DEFAULT_DOMAIN),
    ("float-1e16", 1e16, DEFAULT_DOMAIN),
    ("float-1e20", 1e20, DEFAULT_DOMAIN),
    ("float-1e21-exponent", 1e21, DEFAULT_DOMAIN),
    ("float-big-int-literal", 123456789012345680000.0, DEFAULT_DOMAIN),
    ("float-1e-6-fixed", 1e-6, DEFAULT_DOMAIN),
    ("float-1e-7-exponent", 1e-7, DEFAULT_DOMAIN),
    ("float-small-fixed", 0.000001234, DEFAULT_DOMAIN),
    ("float-negative-small", -1.5e-10, DEFAULT_DOMAIN),
    ("float-min-subnormal", 5e-324, DEFAULT_DOMAIN),
    ("float-max", 1.7976931348623157e308, DEFAULT_DOMAIN),
    ("float-avogadro", 6.02214076e23, DEFAULT_DOMAIN),
    ("float-half-below-2-52", 4503599627370495.5, DEFAULT_DOMAIN),
    ("float-pi", 3.141592653589793, DEFAULT_DOMAIN),
    # strings
    ("string-empty", "", DEFAULT_DOMAIN),
    ("string-ascii", "hello world", DEFAULT_DOMAIN),
    ("string-quote-backslash", 'say "hi" \\ bye', DEFAULT_DOMAIN),
    ("string-short-escapes", "\b\f\n\r\t", DEFAULT_DOMAIN),
    ("string-all-c0-controls", "".join(chr(i) for i in range(0x20)), DEFAULT_DOMAIN),
    ("string-del-raw", "\x7f", DEFAULT_DOMAIN),
    ("string-c1-raw", "\x80\x9f", DEFAULT_DOMAIN),
    ("string-line-separators-raw", "\u2028\u2029", DEFAULT_DOMAIN),
    ("string-slash-not-escaped", "a/b</script>", DEFAULT_DOMAIN),
    ("string-non-bmp", "\U0001f600 \U0001f44d\U0001f3fd", DEFAULT_DOMAIN),
    ("string-zwj-sequence", "\U0001f468\u200d\U0001f469\u200d\U0001f467", DEFAULT_DOMAIN),
    ("string-combining-mark", "e\u0301", DEFAULT_DOMAIN),
    ("string-precomposed", "\u00e9", DEFAULT_DOMAIN),
    ("string-bom-and-nonchars", "\ufeffbom \uffff\ufffe", DEFAULT_DOMAIN),
    ("string-supplementary-han", "\U00020000\U00020001", DEFAULT_DOMAIN),
    ("string-max-code-point", "\U0010ffff", DEFAULT_DOMAIN),
    ("string-literal-backslash-u", "\\u0041 is not an escape", DEFAULT_DOMAIN),
    ("string-mixed-scripts", "İstanbul ǅ ß Ωμέγα مرحبا 中文", DEFAULT_DOMAIN),
    # key ordering (UTF-16 code units, not code points, not collation)
    ("keys-ascii-case", {"b": 1, "a": 2, "B": 3, "A": 4, "_": 5, "-": 6, "~": 7}, DEFAULT_DOMAIN),
    ("keys-digits-not-numeric", {"10": 1, "9": 2, "1": 3, "01": 4, "-1": 5}, DEFAULT_DOMAIN),
    ("keys-utf16-trap-private-use", {"\ue000": 1, "\U0001f600": 2}, DEFAULT_DOMAIN),
    ("keys-utf16-trap-ffff", {"\uffff": 1, "\U00010000": 2, "\ud7ff": 3}, DEFAULT_DOMAIN),
    ("keys-combining-vs-precomposed", {"\u00e9": 1, "e\u0301": 2, "f": 3}, DEFAULT_DOMAIN),
    ("keys-prefixes", {"ab": 1, "a": 2, "": 3, "a ": 4, "abc": 5}, DEFAULT_DOMAIN),
    ("keys-rfc8785-sorting-example", RFC_8785_SORTING, DEFAULT_DOMAIN),
    ("keys-proto-like", {"__proto__": {"x": 1}, "constructor": 2, "toString": 3}, DEFAULT_DOMAIN),
    # containers
    ("empty-array", [], DEFAULT_DOMAIN),
    ("empty-object", {}, DEFAULT_DOMAIN),
    ("empty-nested", [[], {}, [[]], [{}]], DEFAULT_DOMAIN),
    ("empty-members", {"a": {}, "b": [], "c": [[], {}], "": ""}, DEFAULT_DOMAIN),
    ("nested-mixed", {"z": [1, "two", {"y": None, "x": [True, 0.5]}], "a": {"b": {"c": -7}}},
     DEFAULT_DOMAIN),
    ("nested-deep", [[[[[[[[[[[[[[[[{"k": [0.25]}]]]]]]]]]]]]]]]], DEFAULT_DOMAIN),
    ("rfc8785-example", RFC_8785_EXAMPLE, DEFAULT_DOMAIN),
    # domain separation: same value, different domains
    ("domain-default", {"b": [1, "two"], "a": "值"}, DEFAULT_DOMAIN),
    ("domain-item", {"b": [1, "two"], "a": "值"}, ITEM_DOMAIN),
    ("domain-empty", {"b": [1, "two"], "a": "值"}, ""),
    ("domain-with-nul", {"b": [1, "two"], "a": "值"}, "a\u0000b"),
    ("domain-non-ascii", {"b": [1, "two"], "a": "值"}, "域/v1"),
    # records
    ("record-context-item", CONTEXT_ITEM, ITEM_DOMAIN),
    ("record-memory-record", MEMORY_RECORD, RECORD_DOMAIN),
]


def build_document() -> dict[str, Any]:
    cases = []
    for case_id, value, domain in CASES:
        canonical = rfc8785.dumps(value).decode("utf-8")
        framed = (domain + "\u0000" + canonical).encode("utf-8")
        cases.append(
            {
                "id": case_id,
                "value": value,
                "domain": domain,
                "canonical": canonical,
                "digest": "sha256:" + hashlib.sha256(framed).hexdigest(),
            }
        )
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case id"
    return {
        "format": "cmk-digest-vectors/v1",
        "profile": "jcs",
        "framing": "sha256(utf8(domain + U+0000 + canonical_json))",
        "generator": "tests/vectors/make_digest_vectors.py (reference: rfc8785 package)",
        "cases": cases,
    }


def render() -> str:
    return json.dumps(build_document(), ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = OUT.read_text(encoding="utf-8") if OUT.is_file() else ""
        if current != text:
            print(f"{OUT} is stale; run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {OUT} ({len(CASES)} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

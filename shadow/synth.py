"""``shadow synth``: a synthetic corpus for scale tests, built from the bundled captures.

The legacy code cannot run at synth time, so every synthetic session is a bundled real
capture (a *template*, ``fixtures/<template>/``) transformed so that the legacy behaviour
it recorded stays true (docs/scale.md, "Synthetic corpora"):

* session ``n`` (1-based) picks its template from ``sha256(seed, n)`` over
  :data:`WEIGHTS` (long zh/en sessions, tool-heavy, parallel and late tool results,
  pending approvals and questions, pinned items, IDE chips, secret canaries, memory
  operations); :data:`EXCLUDED` templates are never picked (their replay is slow);
* the free text of the session — message ``content`` strings, the Desktop ``prompt`` and
  ``text`` of provider exchanges, the ``content`` values inside JSON tool results and
  summaries — goes through one per-session :class:`TextPermutation` of ASCII letters and
  of the CJK ideographs U+4E00–U+9FFF, the same in ``input.json`` and in every capture:
  character classes and lengths are unchanged, so the token estimators and the budget
  decisions of both sides are too.  Keys, roles, ids, enums, tool arguments, file names,
  models, numbers are never touched; a string in which the kernel's detectors
  (:func:`kernel.packets.anticorruption.scan`: secrets, injections, local paths) find
  anything — before or after the permutation — is kept verbatim, so canaries survive;
* the CLI session-store lines (``raw_jsonl_lines``) are transformed event by event and
  re-chained (:func:`shadow.bootstrap.event_hash`, the JSONL chain's own); every old hash in the
  capture is replaced by its new one;
* :data:`VERBATIM` templates are copied untransformed (their text is what their legacy
  decision turned on, see docs/scale.md);
* the scenario is renamed ``synth-<seed>-<n>-<template>`` (folder and every ``scenario``
  field), ``input.json`` carries ``"synthetic": true`` and a description naming template,
  seed and session (so no two sessions are copies of each other).

The writer streams: one session is built, written and dropped at a time (memory stays
flat); files are compact ``JSON.stringify`` text and a final newline (``json.dumps`` where
it writes the same bytes, checked once per template file).
``SYNTHETIC.json`` at the top (corpus metadata, never replayed) records format, seed,
session count and the sessions per template.  ``--out`` is staged and swapped in complete
(:mod:`shadow.outdir`): it must be new, empty, or an earlier synthetic corpus.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kernel.canonical.jsjson import js_stringify
from kernel.packets.anticorruption import scan
from kernel.vocabulary import MAX_EXACT_INTEGER
from shadow.bootstrap import event_hash
from shadow.boundary import loads, read_regular
from shadow.errors import InputError, UsageError
from shadow.outdir import staged

FORMAT: Final = "shadow-synthetic/v1"
MARKER: Final = "SYNTHETIC.json"

_TIERS: Final = (
    # long zh/en sessions (several compactions, model windows): the scale shape
    (2, "claude-3-5-sonnet large-window-gpt-4o long-en-coding-session "
        "long-en-session-claude-3-5-sonnet long-en-session-qwen-plus "
        "long-en-session-unknown-model long-mixed-session-deepseek long-zh-session "
        "long-zh-session-llama3-8b mixed-zh-en small-window-llama3-8b "
        "two-successive-compactions"),
    # tool-heavy: parallel, late, orphan, failed and repeated tool results; pending
    # approvals and questions
    (3, "duplicate-tool-results-retry late-tool-result late-tool-result-after-user-turn "
        "near-duplicate-test-results null-content-tool-calls orphan-tool-result "
        "orphan-tool-result-at-head parallel-tool-calls parallel-tool-calls-missing-result "
        "pending-approval pending-approval-parallel-calls pending-question-text "
        "pending-question-zh tool-error-results"),
    # pinned items (messages, IDE chips), secret canaries, memory operations
    (2, "ide-all-removed ide-budget-over-max ide-budget-zero ide-default-budget-all-kinds "
        "ide-duplicate-identity ide-malformed-candidates ide-pin-and-remove-same-chip "
        "ide-pin-remove-refresh ide-selection-file-diagnostics-budget "
        "ide-too-many-candidates ide-utf8-zh-trim-budget ide-windows-paths-many-candidates "
        "memory-clear-scope memory-consolidate-trace memory-index-rebuild "
        "memory-offline-replica-deletion memory-partial-deletion memory-recall-chinese "
        "memory-scopes-overlap memory-scopes-project-overlap memory-update-remove "
        "memory-zh-tags-scopes pinned-facts-zh pinned-messages secrets-in-tool-output "
        "secrets-in-user-message"),
    # everything else once: edge cases, provider outcomes, session-store faults
    (1, "duplicate-user-messages empty-and-whitespace-content flags-snip-collapse "
        "missing-content-key multiple-system-messages prompt-injection-web-fetch "
        "provider-cancelled provider-cancelled-long-session provider-failure "
        "provider-failure-rate-limited provider-invalid-json "
        "provider-ok-then-failure-successive provider-summary-ok provider-summary-ok-zh "
        "provider-summary-partial-fields provider-usage-unknown "
        "provider-usage-unknown-anthropic replay-cc-summary session-store-cas-race "
        "session-store-crash-restart session-store-crash-torn-tail short-session "
        "threshold-probe-llama3-8b unicode-edge-cases windows-paths"),
)
#: template -> weight (relative frequency of the template in a synthetic corpus)
WEIGHTS: Final[Mapping[str, int]] = {
    name: w for w, names in _TIERS for name in names.split()}
#: bundled scenarios never used as templates, and why
EXCLUDED: Final[Mapping[str, str]] = {
    "large-tool-output-1mib": "a 1 MiB tool result: ~340 ms per replay (the corpus median "
                              "is ~9 ms)",
}
#: templates copied with their text untransformed, and why
_RECALL: Final = ("memory recall and consolidation read words (the kernel's tokens and "
                   "stop words, the legacy's tags and categories): permuted text recalls "
                   "other records")
VERBATIM: Final[Mapping[str, str]] = {
    **{f"memory-{m}": _RECALL for m in (
        "clear-scope", "consolidate-trace", "index-rebuild", "offline-replica-deletion",
        "partial-deletion", "recall-chinese", "scopes-overlap", "scopes-project-overlap",
        "update-remove", "zh-tags-scopes")},
    "flags-snip-collapse": "the snip/collapse flags pick messages by their text",
    "provider-failure": "the legacy's extractive fallback summary quotes the dropped "
                        "text (its trust.escalated defect is found by that quote)",
    "provider-invalid-json": "as provider-failure: the fallback summary quotes the input",
    "long-zh-session-llama3-8b": "the Desktop context engineering's tool-pair choice on "
                                 "this small window turns on the text (seed 12345 kept "
                                 "other pairs)",
}

_CJK_BASE: Final = 0x4E00
_CJK_SIZE: Final = 0x9FFF - 0x4E00 + 1  # 20992 = 2**9 * 41
_LOWER: Final = "abcdefghijklmnopqrstuvwxyz"
#: letters kept: U+0130 and U+212A, which the permutation keeps, lower-case to ``i`` + U+0307
#: and ``k`` (the only code points outside A-Z whose ``str.lower`` holds an ASCII letter)
_FIXED: Final = "ik"
#: the free-text fields of messages, provider exchanges and memory operations
TEXT_KEYS: Final = frozenset({"content", "prompt", "text"})
#: free-text fields inside a JSON tool result / summary (only their string values change)
JSON_TEXT_KEYS: Final = frozenset({"content", "text", "stdout", "stderr", "message",
                                   "output", "summary", "objective"})


class _Table(dict[int, int]):
    """A ``str.translate`` table filled on first use of each code point."""

    def __init__(self, lower: str, a: int, b: int) -> None:
        super().__init__()
        for src, dst in zip(_LOWER, lower, strict=True):
            self[ord(src)] = ord(dst)
            self[ord(src.upper())] = ord(dst.upper())
        self._a, self._b = a, b

    def __missing__(self, cp: int) -> int:
        out = cp
        if _CJK_BASE <= cp < _CJK_BASE + _CJK_SIZE:
            out = _CJK_BASE + (self._a * (cp - _CJK_BASE) + self._b) % _CJK_SIZE
        self[cp] = out
        return out


@dataclass(frozen=True, slots=True)
class TextPermutation:
    """One session's permutation of ``a-z`` but ``i`` and ``k`` (``A-Z`` alike, so case
    folding commutes with it, ``İ`` U+0130 and the Kelvin sign U+212A included)
    and an affine permutation of the CJK ideographs U+4E00–U+9FFF; everything else maps to
    itself.  A bijection that preserves each character's class and UTF-8 length."""

    lower: str
    a: int  # coprime with 20992
    b: int

    @classmethod
    def for_session(cls, seed: int, n: int) -> TextPermutation:
        rng = random.Random(_digest_int("text", seed, n))
        moved = [c for c in _LOWER if c not in _FIXED]
        rng.shuffle(moved)
        order = iter(moved)
        letters = [c if c in _FIXED else next(order) for c in _LOWER]
        a = rng.randrange(1, _CJK_SIZE, 2)
        while a % 41 == 0:
            a = rng.randrange(1, _CJK_SIZE, 2)
        return cls("".join(letters), a, rng.randrange(_CJK_SIZE))

    def table(self) -> dict[int, int]:
        return _Table(self.lower, self.a, self.b)


def _digest_int(domain: str, seed: int, n: int) -> int:
    h = hashlib.sha256(f"shadow-synth/v1\0{domain}\0{seed}\0{n}".encode()).digest()
    return int.from_bytes(h[:8], "big")


# --- the byte format, fast --------------------------------------------------------------

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _plain(v: Any) -> bool:
    """True when ``json.dumps`` writes ``v`` as ``JSON.stringify`` does: no float, no
    integer beyond 2**53, no lone surrogate, no object key JavaScript enumerates first (an
    array-index key such as ``"0"``)."""
    if isinstance(v, str):
        return _SURROGATE.search(v) is None
    if isinstance(v, dict):
        return all(not k[:1].isdigit() and _SURROGATE.search(k) is None and _plain(x)
                   for k, x in v.items())
    if isinstance(v, list):
        return all(_plain(x) for x in v)
    if isinstance(v, bool) or v is None:
        return True
    return isinstance(v, int) and abs(v) <= MAX_EXACT_INTEGER


def dumps(v: Any, indent: int | None = None) -> str:
    """``JSON.stringify(v[, null, indent])`` (:func:`js_stringify`), by ``json.dumps`` when
    :func:`_plain` holds (the same text, property-tested) — the exact path otherwise."""
    if not _plain(v):
        return js_stringify(v, indent)
    if indent:
        return json.dumps(v, ensure_ascii=False, indent=indent)
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# --- the transformation of one session ---------------------------------------------------


class _Session:
    """The text transformation of one session (memoised per distinct string)."""

    def __init__(self, perm: TextPermutation, flagged: dict[str, bool]) -> None:
        self._table = perm.table()
        self._memo: dict[str, str] = {}
        self._flagged = flagged  # template text -> a detector finds something (per run)
        self.hashes: dict[str, str] = {}

    def text(self, s: str) -> str:
        """Free text: permuted unless a detector finds anything in it (before or after)."""
        got = self._memo.get(s)
        if got is None:
            got = self._json_text(s)
            if got is None:
                out = s.translate(self._table)
                got = s if out == s or self._finds(s) or scan(out) else out
            self._memo[s] = got
        return got

    def _finds(self, s: str) -> bool:
        hit = self._flagged.get(s)
        if hit is None:
            hit = self._flagged[s] = bool(scan(s))
        return hit

    def _json_text(self, s: str) -> str | None:
        """A JSON object/array text (a tool result, a summary) that re-serialises to itself:
        its ``JSON_TEXT_KEYS`` values permuted, re-serialised compactly; else None."""
        if s[:1] not in ("{", "["):
            return None
        try:
            doc = json.loads(s)
        except ValueError:
            return None
        if dumps(doc) != s:
            return None
        return dumps(self._json_values(doc))

    def _json_values(self, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: self.text(x) if k in JSON_TEXT_KEYS and isinstance(x, str)
                    else self._json_values(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self._json_values(x) for x in v]
        return v

    def doc(self, v: Any) -> Any:
        """A document: every ``TEXT_KEYS`` string transformed, session-store lines re-chained."""
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            # system messages stay verbatim: the legacy rewrites host prompts by pattern
            # (volatile fields) and writes summaries in its own words from the input
            verbatim = v.get("role") == "system"
            for k, x in v.items():
                if k in TEXT_KEYS and isinstance(x, str) and not verbatim:
                    out[k] = self.text(x)
                elif k == "raw_jsonl_lines" and isinstance(x, list):
                    out[k] = self._chain(x)
                else:
                    out[k] = self.doc(x)
            return out
        if isinstance(v, list):
            return [self.doc(x) for x in v]
        return v

    def _chain(self, lines: list[Any]) -> list[Any]:
        """Session-store lines, each event's data transformed and the chain rebuilt; a line
        that is not a chained event (a torn tail) is kept as it is."""
        out: list[Any] = []
        for line in lines:
            ev = _event(line)
            if ev is None:
                out.append(line)
                continue
            data = self.doc(ev["data"])
            prev = ev["prevHash"]
            prev = self.hashes.get(prev, prev) if isinstance(prev, str) else prev
            new = event_hash(prev, ev["type"], ev["timestamp"], data)
            self.hashes[ev["hash"]] = new
            out.append(dumps({**ev, "data": data, "prevHash": prev, "hash": new}))
        return out

    def rehash(self, v: Any) -> Any:
        """Every string naming an old chain hash, renamed to its new hash."""
        if not self.hashes:
            return v
        if isinstance(v, dict):
            return {k: self.rehash(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.rehash(x) for x in v]
        if isinstance(v, str):
            return self.hashes.get(v, v)
        return v


def _event(line: Any) -> dict[str, Any] | None:
    if not isinstance(line, str):
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    if not isinstance(ev, dict) or set(ev) != {"type", "timestamp", "data", "prevHash",
                                               "hash"} or dumps(ev) != line:
        return None
    return ev


# --- templates ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    files: tuple[tuple[str, Any], ...]  # (file name, parsed document), input.json first
    #: per file: ``json.dumps`` writes it as ``JSON.stringify`` does.  The permutation
    #: changes strings only, letter for letter of one class (never a character JSON
    #: escapes), and chain hashes for hex: so this holds for every session too
    plain: tuple[bool, ...] = ()


def load_templates(root: Path | str = "fixtures") -> dict[str, Template]:
    """The weighted templates of the bundled corpus, parsed once."""
    root = Path(root)
    out: dict[str, Template] = {}
    for name in WEIGHTS:
        folder = root / name
        if not (folder / "input.json").is_file():
            raise InputError(folder, "", "a bundled template scenario (input.json)",
                             "no such file")
        files = sorted((p for p in folder.iterdir() if p.suffix == ".json"),
                       key=lambda p: (p.name != "input.json", p.name))
        docs = tuple((p.name, loads(read_regular(p), p)) for p in files)
        out[name] = Template(name, docs, tuple(
            json.dumps(d, ensure_ascii=False) == js_stringify(d) for _f, d in docs))
    return out


def _cumulative() -> tuple[tuple[int, str], ...]:
    out, total = [], 0
    for name, w in sorted(WEIGHTS.items()):
        total += w
        out.append((total, name))
    return tuple(out)


_CUMULATIVE: Final = _cumulative()


def pick(seed: int, n: int) -> str:
    """The template of session ``n`` of a corpus of ``seed``."""
    point = _digest_int("pick", seed, n) % _CUMULATIVE[-1][0]
    return next(name for bound, name in _CUMULATIVE if point < bound)


def scenario_name(seed: int, n: int, sessions: int, template: str) -> str:
    return f"synth-{seed}-{n:0{max(6, len(str(sessions)))}d}-{template}"


def session_files(template: Template, seed: int, n: int, name: str,
                  flagged: dict[str, bool] | None = None) -> Iterator[tuple[str, str]]:
    """(file name, text) of one synthetic session (``flagged``: a detector cache of
    template strings, shared by the sessions of one run)."""
    sess = None if template.name in VERBATIM else _Session(
        TextPermutation.for_session(seed, n), {} if flagged is None else flagged)
    docs = [(f, sess.doc(d) if sess else d) for f, d in template.files]
    for (fname, doc), plain in zip(docs, template.plain, strict=True):
        doc = sess.rehash(doc) if sess else doc
        doc = {**doc, "scenario": name}
        if fname == "input.json":
            doc = _input_fields(doc, template.name, seed, n)
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")) if plain \
            else js_stringify(doc)
        yield fname, text + "\n"


def _input_fields(doc: dict[str, Any], template: str, seed: int, n: int) -> dict[str, Any]:
    """``input.json`` with the synthetic marker and a description naming the session (so
    no two sessions of one template are copies of each other)."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if k in ("description", "synthetic"):
            continue
        out[k] = v
        if k == "scenario":
            out["description"] = (f"synthetic session {n} (seed {seed}) from the bundled "
                                  f"capture {template}; not release evidence")
            out["synthetic"] = True
    return out


# --- the command ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SynthResult:
    out: Path
    sessions: int
    templates: Mapping[str, int]
    files: int


def synth(sessions: int, seed: int, out: str | Path, templates: str | Path = "fixtures",
          progress: Callable[[int, int], None] | None = None) -> SynthResult:
    """Write ``sessions`` synthetic sessions of ``seed`` into ``out`` (staged, swapped in
    complete)."""
    if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1:
        raise UsageError(f"--sessions must be at least 1, got {sessions}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UsageError(f"--seed must be an integer >= 0, got {seed}")
    tpl, dst = Path(templates).resolve(), Path(out).resolve()
    if dst == tpl or tpl in dst.parents:
        raise UsageError(f"--out {out}: inside --templates (the captures are ground truth: "
                         "nothing is ever written there)")
    corpus = next((p for p in dst.parents if (p / MARKER).is_file()
                   or (p / "input.json").is_file()), None)
    if corpus is not None:  # it would become a folder of that corpus: quarantined there
        raise UsageError(f"--out {out}: inside the corpus {corpus} (a synthetic corpus is a "
                         "folder of its own)")
    loaded = load_templates(templates)
    counts: Counter[str] = Counter()
    flagged: dict[str, bool] = {}
    files = 0
    with staged(out, marker=MARKER, what="--out", kind="synthetic corpus") as stage:
        for n in range(1, sessions + 1):
            tname = pick(seed, n)
            counts[tname] += 1
            name = scenario_name(seed, n, sessions, tname)
            folder = stage.path / name
            folder.mkdir()
            for fname, text in session_files(loaded[tname], seed, n, name, flagged):
                (folder / fname).write_bytes(text.encode("utf-8"))
                files += 1
            if progress is not None:
                progress(n, sessions)
        meta = {"format": FORMAT, "synthetic": True, "seed": seed, "sessions": sessions,
                "templates": dict(sorted(counts.items()))}
        (stage.path / MARKER).write_bytes(dumps(meta, indent=2).encode() + b"\n")
        final = stage.commit()
    return SynthResult(final, sessions, dict(sorted(counts.items())), files)

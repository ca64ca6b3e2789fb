"""Noise learned, not guessed: control vs control (docs/noise.md).

``shadow capture --repeat 2`` records every input twice, with different clock origins and
id seeds.  Whatever differs between the two legacy runs of one capture is noise the
harness must not judge; :func:`learn` finds it and :func:`merge` turns it into rules of
the reviewed file ``shadow/policy/noise.v1.json`` (:mod:`shadow.noise_rules`).

* :func:`learn` (pure) — pairs of parsed capture documents in, learned fields out: every
  JSON pointer whose value differs between the runs, per capture (``surface``: the file
  name without ``.json``), array indices generalised to ``*``, strings holding JSON text
  descended into (``~json``), ``/determinism`` ignored (it describes the run).  Per field:
  the scenarios that showed it and how many values were compared and differed — never
  the values.  What cannot be noise is a :class:`Problem` instead: a file only one run
  has, ``input.json`` differing (not a control run), a difference in the call's identity
  (``/options``, ``/entry``…), and a capture whose runs still differ once the learned
  fields are neutralised (their values are not a consistent renaming).
* :func:`read_pairs` — the thin reader: two capture trees ``<scenario>/<file>.json`` in,
  :class:`CapturePair` values out (strict JSON, an InputError naming the file).
* :func:`merge` — learned fields into an existing rule file: a field an existing rule
  covers confirms it (its evidence becomes this run's counts; review fields untouched); a
  new one is added ``reviewed: false`` (reported, not applied, until a person reviews it);
  existing rules the run did not show are kept and listed as unconfirmed.
* :func:`update_policy` — read, learn, merge and write in one call (the ``--repeat``
  command's entry point); the file's bytes are deterministic (:func:`shadow.noise_rules.render`).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from shadow.boundary import load_path, pointer_escape
from shadow.noise_rules import (
    ANY,
    JSON_TEXT,
    ROOTS,
    Evidence,
    NoiseRule,
    NoiseRules,
    covers,
    given_values,
    json_text,
    load,
    neutralise,
    render,
    to_doc,
)

INPUT_FILE: Final = "input.json"
IGNORED: Final = frozenset({"determinism"})  # top-level fields describing the run itself
_ID: Final = re.compile(r"^NR-(\d+)$")


@dataclass(frozen=True, slots=True)
class CapturePair:
    """One file of one scenario in both runs (``None``: that run has no such file)."""

    scenario: str
    file: str  # e.g. "session-core.memory.json", or "input.json"
    first: Any = field(repr=False)
    second: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class LearnedField:
    surface: str  # the capture file name without .json
    path: str  # JSON pointer, array indices as "*"
    scenarios: tuple[str, ...]  # scenario pairs that showed a difference here
    values: int  # values compared at this path (over every pair of the surface)
    differing: int  # of those, how many differed


@dataclass(frozen=True, slots=True)
class Problem:
    scenario: str
    file: str
    what: str  # a sentence; never a value


@dataclass(frozen=True, slots=True)
class Learned:
    fields: tuple[LearnedField, ...] = ()
    problems: tuple[Problem, ...] = ()

    def rules(self) -> tuple[NoiseRule, ...]:
        """The learned fields as (unreviewed) rules, ids in (surface, path) order."""
        return tuple(_rule(f"NR-{n:03d}", f) for n, f in enumerate(self.fields, 1))


@dataclass(frozen=True, slots=True)
class Merged:
    rules: NoiseRules
    added: tuple[str, ...] = ()  # new rule ids (reviewed: false)
    confirmed: tuple[str, ...] = ()  # existing rules the run showed (evidence updated)
    unconfirmed: tuple[str, ...] = ()  # existing rules the run did not show (kept)


# --------------------------------------------------------------------------- learning


class _Stats:
    def __init__(self) -> None:
        self.values: dict[tuple[str, ...], int] = {}
        self.differing: dict[tuple[str, ...], int] = {}

    def record(self, tokens: tuple[str, ...], differs: bool) -> None:
        self.values[tokens] = self.values.get(tokens, 0) + 1
        if differs:
            self.differing[tokens] = self.differing.get(tokens, 0) + 1


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _walk(a: Any, b: Any, tokens: tuple[str, ...], stats: _Stats) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            here = (*tokens, pointer_escape(key))
            if not tokens and key in IGNORED:
                continue
            if key in a and key in b:
                _walk(a[key], b[key], here, stats)
            else:
                stats.record(here, True)
        return
    if isinstance(a, list) and isinstance(b, list):
        here = (*tokens, ANY)
        for i in range(max(len(a), len(b))):
            if i < len(a) and i < len(b):
                _walk(a[i], b[i], here, stats)
            else:
                stats.record(here, True)
        return
    inner_a, inner_b = json_text(a), json_text(b)
    if inner_a is not None and inner_b is not None:
        _walk(inner_a, inner_b, (*tokens, JSON_TEXT), stats)
        return
    stats.record(tokens, not _same(a, b))


def _surface(file: str) -> str:
    return file[: -len(".json")] if file.endswith(".json") else file


def _rule(rule_id: str, f: LearnedField) -> NoiseRule:
    return NoiseRule(rule_id, f.surface, f.path,
                     Evidence("repeat", len(f.scenarios), f.values, f.differing))


def learn(pairs: Iterable[CapturePair]) -> Learned:
    """Learned fields and problems from pairs of one scenario file in two runs (see the
    module docstring).  Pure: same pairs in, same result out, in any order."""
    pairs = sorted(pairs, key=lambda p: (p.scenario, p.file))
    problems: list[Problem] = []
    inputs = {p.scenario: p.first for p in pairs if p.file == INPUT_FILE}
    stats: dict[str, _Stats] = {}
    seen: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    shown: list[tuple[CapturePair, set[tuple[str, ...]]]] = []
    for p in pairs:
        if p.first is None or p.second is None:
            which = "first" if p.second is None else "second"
            problems.append(Problem(p.scenario, p.file, f"only the {which} run has this file"))
            continue
        if p.file == INPUT_FILE:
            if not _same_doc(_control_input(p.first), _control_input(p.second)):
                problems.append(Problem(p.scenario, p.file, "the inputs differ between the "
                                        "runs: not a control run"))
            continue
        one = _Stats()
        _walk(p.first, p.second, (), one)
        mine = {t for t in one.differing}
        bad = sorted(t for t in mine if not t or t[0] not in ROOTS)
        if bad:
            problems.append(Problem(p.scenario, p.file, f"the call itself differs at "
                                    f"/{'/'.join(bad[0])[:80]}: not noise"))
        mine -= set(bad)
        agg = stats.setdefault(_surface(p.file), _Stats())
        for t, n in one.values.items():
            agg.values[t] = agg.values.get(t, 0) + n
        for t, n in one.differing.items():
            agg.differing[t] = agg.differing.get(t, 0) + n
        for t in mine:
            seen.setdefault((_surface(p.file), t), set()).add(p.scenario)
        shown.append((p, mine))
    fields = tuple(
        LearnedField(surface, "/" + "/".join(t), tuple(sorted(scen)),
                     stats[surface].values[t], stats[surface].differing[t])
        for (surface, t), scen in sorted(seen.items()))
    learned = Learned(fields, ())
    rules = learned.rules()
    for p, mine in shown:
        if not mine:
            continue
        surface = _surface(p.file)
        mine_rules = [r for r in rules if r.surface == surface]
        given = given_values(inputs.get(p.scenario))
        a, _ = neutralise(p.first, mine_rules, given)
        b, _ = neutralise(p.second, mine_rules, given)
        if not _same_doc({k: v for k, v in a.items() if k not in IGNORED},
                         {k: v for k, v in b.items() if k not in IGNORED}):
            problems.append(Problem(p.scenario, p.file, "the runs still differ once the "
                                    "learned fields are neutralised (not a consistent "
                                    "renaming or clock shift)"))
    return Learned(fields, tuple(problems))


def _control_input(doc: Any) -> Any:
    """``input.json`` as two control runs must share it: the scenario and the exchanges,
    less the reply timestamps our own scripted Desktop ``llmManager`` stamps from the run's
    fake clock (the stub is the harness's, its clock the run's: not legacy behaviour)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("provider_responses"), list):
        return doc
    exchanges = []
    for x in doc["provider_responses"]:
        if isinstance(x, dict) and isinstance(x.get("response"), dict):
            x = {**x, "response": {k: v for k, v in x["response"].items() if k != "timestamp"}}
        exchanges.append(x)
    return {**doc, "provider_responses": exchanges}


def _same_doc(a: Any, b: Any) -> bool:
    one = _Stats()
    _walk(a, b, (), one)
    return not one.differing


# --------------------------------------------------------------------------- merging


def _next_ids(rules: Sequence[NoiseRule]) -> Iterator[str]:
    n = max((int(m.group(1)) for r in rules if (m := _ID.match(r.id))), default=0)
    while True:
        n += 1
        yield f"NR-{n:03d}"


def merge(existing: NoiseRules, learned: Learned) -> Merged:
    """``existing`` updated with ``learned`` (module docstring): the result's rules in
    (surface, path) order, new ids numbered after the highest ``NR-<n>``."""
    rules = list(existing.rules)
    scen: dict[str, set[str]] = {}
    values: dict[str, int] = {}
    differing: dict[str, int] = {}
    added: list[NoiseRule] = []
    ids = _next_ids(rules)
    for f in learned.fields:
        tokens = tuple(f.path.split("/")[1:])
        same = [r for r in rules if r.surface == f.surface]
        hit = next((r for r in same if r.path == f.path), None) or next(
            (r for r in same if covers(r.tokens, tokens)), None)
        if hit is None:
            added.append(_rule(next(ids), f))
            continue
        scen.setdefault(hit.id, set()).update(f.scenarios)
        values[hit.id] = values.get(hit.id, 0) + f.values
        differing[hit.id] = differing.get(hit.id, 0) + f.differing
    out = [replace(r, evidence=Evidence("repeat", len(scen[r.id]), values[r.id],
                                        differing[r.id])) if r.id in scen else r
           for r in rules]
    merged = NoiseRules(tuple(sorted([*out, *added], key=lambda r: (r.surface, r.path, r.id))),
                        existing.source, existing.description)
    return Merged(merged, tuple(r.id for r in added), tuple(sorted(scen)),
                  tuple(sorted(r.id for r in rules if r.id not in scen)))


# --------------------------------------------------------------------------- files


def _scenario_files(root: Path) -> dict[tuple[str, str], Path]:
    out: dict[tuple[str, str], Path] = {}
    for sdir in sorted(root.iterdir(), key=lambda p: p.name):
        if sdir.name.startswith(".") or not sdir.is_dir():
            continue
        for f in sorted(sdir.iterdir(), key=lambda p: p.name):
            if f.name.endswith(".json") and not f.name.startswith(".") and f.is_file():
                out[(sdir.name, f.name)] = f
    return out


def read_pairs(first: Path | str, second: Path | str) -> list[CapturePair]:
    """Every ``<scenario>/<file>.json`` of two capture trees, paired (strict JSON: a bad
    file is an InputError naming it; a file only one tree has pairs with ``None``)."""
    a, b = _scenario_files(Path(first)), _scenario_files(Path(second))
    return [CapturePair(s, f, load_path(a[(s, f)]) if (s, f) in a else None,
                        load_path(b[(s, f)]) if (s, f) in b else None)
            for s, f in sorted(set(a) | set(b))]


def write_rules(path: Path | str, rules: NoiseRules) -> str:
    """Write ``rules`` to ``path`` (the deterministic bytes, replaced atomically)."""
    p = Path(path)
    text = render(to_doc(rules.rules, rules.description))
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return text


def update_policy(first: Path | str, second: Path | str, policy: Path | str
                  ) -> tuple[Learned, Merged]:
    """Learn from two capture trees and merge into the rule file ``policy`` (created when
    absent; an existing file is parsed strictly first: a broken one is an InputError and
    nothing is written)."""
    existing = load(policy) if Path(policy).exists() else NoiseRules(
        (), str(policy), "Learned noise rules (docs/noise.md).")
    learned = learn(read_pairs(first, second))
    merged = merge(existing, learned)
    write_rules(policy, merged.rules)
    return learned, merged


"""Benign noise on every surface adds nothing above ``info``: key order, token counts
inside the noise band, timings, freshness stamps, and memory and tool-call ids renamed
consistently under the captures' determinism rules — on copies of real captures and on
the live kernel's recorded candidate.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.shadow._mutate import (
    SETTINGS,
    above_info,
    live,
    replay_baseline,
    replay_candidate,
    scenario,
)
from tests.shadow.test_divergence import _reverse_keys

# =========================================================================== benign noise


def _noise(doc: dict[str, Any], delta: int) -> None:
    out = doc.get("output")
    if not isinstance(out, dict):
        return
    stats = out.get("stats") if isinstance(out.get("stats"), dict) else out
    for k in ("originalTokens", "compressedTokens", "tokensSaved", "saved"):
        if isinstance(stats.get(k), int):
            stats[k] += delta
    if "processingTime" in out:
        out["processingTime"] = abs(delta) * 7
    for chip in out.get("chips") or ():
        chip["estimatedTokens"] = max(1, chip["estimatedTokens"] + delta)
        chip["freshness"] = {**(chip.get("freshness") or {}),
                             "capturedAt": "2030-01-01T00:00:00.000Z"}
    for ev in out.get("events") or ():
        if isinstance(ev, dict) and "ts" in ev:
            ev["ts"] += 1


_NOISE_FIXTURES = ("pending-approval", "provider-summary-ok", "ide-pin-remove-refresh",
                   "memory-update-remove", "replay-cc-summary", "parallel-tool-calls")


@SETTINGS
@given(name=st.sampled_from(_NOISE_FIXTURES), delta=st.integers(-3, 3))
def test_benign_noise_on_every_surface_adds_nothing_above_info(name: str, delta: int) -> None:
    sc = scenario(name)

    def noisy(d: dict[str, Any]) -> None:
        _noise(d, delta)
        d.update(_reverse_keys(dict(d)))

    def renamed_ids(d: dict[str, Any]) -> None:  # memory ids under the determinism rule
        text = json.dumps(d)
        for n, old in enumerate(sorted(set(re.findall(r"mem_[0-9a-f]{16}", text)))):
            text = text.replace(old, f"mem_{n:016x}")
        d.clear()
        d.update(json.loads(text))

    calls = sorted(set(re.findall(r"call_[A-Za-z0-9]{24}", json.dumps(sc.input))))
    fresh = {old: f"call_{n:024d}" for n, old in enumerate(calls)}

    def renamed_calls(d: dict[str, Any]) -> None:  # seeded tool-call ids, renamed everywhere
        text = json.dumps(d)
        for old, new in fresh.items():
            text = text.replace(old, new)
        d.clear()
        d.update(json.loads(text))

    def both(d: dict[str, Any]) -> None:
        noisy(d)
        renamed_calls(d)

    mutations: dict[str, Any] = {f"{c.name}.json": both for c in sc.captures}
    if calls:
        mutations["input.json"] = renamed_calls
    if sc.kind == "memory":
        first = f"{sc.captures[0].name}.json"
        mutations[first] = lambda d: (noisy(d), renamed_ids(d))
    r = replay_baseline(name, mutations)
    assert above_info(r) == above_info(live(name))


@SETTINGS
@given(name=st.sampled_from(_NOISE_FIXTURES), extra=st.integers(0, 50))
def test_benign_noise_in_a_recorded_candidate_adds_nothing_above_info(name: str,
                                                                      extra: int) -> None:
    surface = scenario(name).captures[0].name

    def noisy(d: dict[str, Any]) -> None:
        d["noise"] = {k: (v + extra if isinstance(v, int) else v)
                      for k, v in d.get("noise", {}).items()}
        d.update(_reverse_keys(dict(d)))
    assert above_info(replay_candidate(name, surface, noisy)) == above_info(live(name))




"""``kernel.canonical.jsjson``: JavaScript ``JSON.stringify``, compact and indented."""

from __future__ import annotations

import json
from pathlib import Path

from kernel.canonical.jsjson import js_stringify

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_every_capture_node_wrote_re_serialises_byte_for_byte() -> None:
    """The capture files and manifest were written by JSON.stringify(v, null, 2) in Node."""
    paths = [*sorted(FIXTURES.glob("*/*.json")), FIXTURES / "MANIFEST.json"]
    assert len(paths) > 300
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert js_stringify(json.loads(text), indent=2) + "\n" == text, path


def test_indented_form_follows_javascript_rules() -> None:
    value = {"b": [1.0, 1e21, 1e-7, [], {}], "10": "\u2028", "2": None, "a": "\x07\ud800"}
    assert js_stringify(value, indent=2) == (
        '{\n  "2": null,\n  "10": "\u2028",\n  "b": [\n    1,\n    1e+21,\n    1e-7,\n'
        '    [],\n    {}\n  ],\n  "a": "\\u0007\\ud800"\n}')
    assert js_stringify(value) == (
        '{"2":null,"10":"\u2028","b":[1,1e+21,1e-7,[],{}],"a":"\\u0007\\ud800"}')

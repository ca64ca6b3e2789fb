"""``docs/app-server-reference.md``, generated from ``protocol.v1.json``.

``python -m shadow.app_server.reference``          rewrite the page
``python -m shadow.app_server.reference --check``  exit 1 if the page is not what the schema gives

The page lists every method (kind, params, result, notifications, errors), every
notification and every error code, each from the same schema the server validates with
(:mod:`shadow.app_server.schema`); ``tests/shadow/test_app_server.py`` keeps them in step.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from shadow.app_server.schema import load

PAGE: Final = Path(__file__).resolve().parents[2] / "docs" / "app-server-reference.md"
_HEAD: Final = """# `shadow app-server` protocol reference

Generated from `shadow/app_server/protocol.v1.json` by
`python -m shadow.app_server.reference`: do not edit by hand. The server validates
every request's params with the same file before the method runs; the framing, the
lifecycle and the stores are in [app-server.md](app-server.md).
"""
_CONSTRAINTS: Final = ("minLength", "maxLength", "minimum", "maximum", "maxProperties",
                       "const", "enum")


def _type(s: Mapping[str, Any]) -> str:
    if "const" in s:
        return f"`{json.dumps(s['const'], ensure_ascii=False)}`"
    if "enum" in s:
        return " \\| ".join(f"`{json.dumps(v, ensure_ascii=False)}`" for v in s["enum"])
    t = s.get("type", "any")
    if t == "array" and isinstance(s.get("items"), Mapping):
        return f"array of {_type(s['items'])}"
    return str(t)


def _notes(s: Mapping[str, Any]) -> str:
    parts = [f"{k} {s[k]}" for k in _CONSTRAINTS if k in s and k not in ("const", "enum")]
    if s.get("description"):
        parts.append(str(s["description"]))
    return "; ".join(parts)


def _members(s: Mapping[str, Any], prefix: str = "") -> list[str]:
    """One table row per member (nested objects flattened with dots)."""
    rows = []
    required = set(s.get("required", ()))
    for name, sub in (s.get("properties") or {}).items():
        rows.append(f"| `{prefix}{name}` | {_type(sub)} | {'yes' if name in required else 'no'}"
                    f" | {_notes(sub)} |")
        if sub.get("type") == "object" and sub.get("properties"):
            rows += _members(sub, f"{prefix}{name}.")
    return rows


def _shape(title: str, s: Mapping[str, Any]) -> list[str]:
    out = [f"**{title}**: {_type(s)}"
           + (", no other members" if s.get("additionalProperties") is False else "")
           + (f" — {_notes(s)}" if _notes(s) else "")]
    rows = _members(s)
    if rows:
        out += ["", "| member | type | required | notes |", "|---|---|---|---|", *rows]
    return out


def render(doc: Mapping[str, Any] | None = None) -> str:
    doc = doc or load()
    lines = [_HEAD, "## Methods", ""]
    methods = doc["methods"]
    lines.append("| method | kind | summary |")
    lines.append("|---|---|---|")
    for name, spec in methods.items():
        lines.append(f"| [`{name}`](#{_anchor(name)}) | {spec['kind']} | {spec['summary']} |")
    for name, spec in methods.items():
        lines += ["", f"### `{name}`", "", f"{spec['kind'].capitalize()}. {spec['summary']}", ""]
        lines += _shape("Params", spec["params"])
        if "result" in spec:
            lines += ["", *_shape("Result", spec["result"])]
        if spec.get("notifications"):
            lines += ["", "**Notifications**, in this order: "
                      + " → ".join(f"`{n}`" for n in spec["notifications"])]
        if spec.get("errors"):
            lines += ["", "**Errors**: " + ", ".join(
                f"{c} ({doc['errors'][str(c)]['name']})" for c in spec["errors"])]
    lines += ["", "## Notifications"]
    for name, spec in doc["notifications"].items():
        lines += ["", f"### `{name}`", "", str(spec["summary"]), ""]
        lines += _shape("Params", spec["params"])
    lines += ["", "## Errors", "", "| code | name | when | `data` members |", "|---|---|---|---|"]
    for code, spec in doc["errors"].items():
        data = ", ".join(f"`{d}`" for d in spec["data"])
        lines.append(f"| {code} | {spec['name']} | {spec['when']} | {data} |")
    return "\n".join(lines) + "\n"


def _anchor(name: str) -> str:
    return "".join(c for c in name if c.isalnum() or c in "-_ ").lower().replace(" ", "-")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shadow.app_server.reference")
    ap.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE} is stale: run python -m shadow.app_server.reference", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

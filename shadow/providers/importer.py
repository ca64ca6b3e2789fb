"""Build the vcrpy cassettes under ``recordings/`` from the captures' provider exchanges.

    python -m shadow.providers.importer FIXTURES RECORDINGS [--check]

One cassette per scenario whose ``input.json`` has ``provider_responses``, named
``<scenario>.yaml``; interactions in ``provider_responses`` order.  Output is deterministic:
sorted keys, UTF-8, ``\\n`` line ends, no timestamps, so a second run writes identical bytes.
Cassettes this importer wrote that no longer have a source are removed; other files are left
alone.  ``--check`` writes nothing and exits 1 when a cassette is missing, stale or extra.
The translation rules (request body, response envelope, fault convention) are documented in
``recordings/README.md`` and implemented in :mod:`shadow.providers.cassettes`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml  # type: ignore[import-untyped]

from kernel.canonical.digest import digest
from shadow.errors import InputError
from shadow.providers.cassettes import (
    CHAT_URI,
    FORMAT,
    LegacyExchange,
    body_marker,
    chat_request,
    chat_response,
    default_model,
    legacy_exchanges,
    load_cassette,
)

SOURCE_DOMAIN: Final = "shadow.provider-exchanges/v1"
GENERATOR: Final = "python -m shadow.providers.importer"


def _interaction(exchange: LegacyExchange, model: str) -> dict[str, Any]:
    body = json.dumps(chat_request(exchange, model), ensure_ascii=False, sort_keys=True,
                      separators=(",", ":"))
    headers = {"content-type": ["application/json"],
               "x-shadow-call": [str(exchange.call)],
               "x-shadow-entry": [exchange.entry],
               "x-shadow-surface": [exchange.surface]}
    if exchange.variant is not None:
        headers["x-shadow-variant"] = [exchange.variant]
    answer = chat_response(exchange)
    return {
        "request": {"body": body_marker(body), "headers": headers, "method": "POST",
                    "uri": CHAT_URI},
        "response": {"body": {"string": answer.body},
                     "headers": {k: [v] for k, v in answer.headers.items()},
                     "status": {"code": answer.status, "message": answer.reason}},
    }


def cassette_document(doc: Mapping[str, Any], scenario: str) -> dict[str, Any] | None:
    """The vcrpy cassette of one scenario's ``input.json`` (``None``: nothing recorded)."""
    exchanges = sorted(legacy_exchanges(doc), key=lambda x: x.index)
    if not exchanges:
        return None
    model = default_model(doc)
    source = {"provider_responses": list(doc.get("provider_responses") or ())}
    return {
        "interactions": [_interaction(x, model) for x in exchanges],
        "metadata": {
            "conventions": "recordings/README.md",
            "format": FORMAT,
            "generator": GENERATOR,
            "scenario": scenario,
            "source": f"fixtures/{scenario}/input.json#/provider_responses",
            "sourceDigest": digest(source, SOURCE_DOMAIN, "jcs"),
        },
        "version": 1,
    }


def render(cassette: Mapping[str, Any]) -> bytes:
    """Deterministic YAML bytes (pure-Python dumper: the same on every machine)."""
    text: str = yaml.dump(dict(cassette), Dumper=yaml.SafeDumper, sort_keys=True,
                          allow_unicode=True, default_flow_style=False, width=1 << 20,
                          line_break="\n")
    return text.encode("utf-8")


def _scenarios(fixtures_dir: Path) -> list[Path]:
    if not fixtures_dir.is_dir():
        raise InputError(fixtures_dir, "", "a fixtures directory")
    return sorted((p for p in fixtures_dir.iterdir() if (p / "input.json").is_file()),
                  key=lambda p: p.name)


def expected_cassettes(fixtures_dir: str | Path) -> dict[str, bytes]:
    """``{file name: bytes}`` of every cassette the fixtures call for."""
    out: dict[str, bytes] = {}
    for folder in _scenarios(Path(fixtures_dir)):
        path = folder / "input.json"
        try:
            doc = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise InputError(path, "", "a UTF-8 JSON document", got="unparseable") from None
        if not isinstance(doc, dict):
            raise InputError(path, "", "an object")
        if not isinstance(doc.get("provider_responses", []), list):
            raise InputError(path, "/provider_responses", "an array")
        cassette = cassette_document(doc, folder.name)
        if cassette is not None:
            out[f"{folder.name}.yaml"] = render(cassette)
    return out


@dataclass(frozen=True, slots=True)
class ImportResult:
    written: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    stale: tuple[str, ...] = field(default=())  # --check: what a build would change

    @property
    def ok(self) -> bool:
        return not self.stale


def _generated(path: Path) -> bool:
    try:
        return load_cassette(path) is not None
    except InputError:
        return False


def build(fixtures_dir: str | Path, recordings_dir: str | Path, *, check: bool = False
          ) -> ImportResult:
    """Write (or with ``check`` only compare) the cassettes of every scenario."""
    wanted = expected_cassettes(fixtures_dir)
    root = Path(recordings_dir)
    written, unchanged, stale = [], [], []
    for name, data in sorted(wanted.items()):
        target = root / name
        if target.is_file() and target.read_bytes() == data:
            unchanged.append(name)
            continue
        stale.append(name)
        if not check:
            root.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
            written.append(name)
    extra = sorted(p.name for p in root.glob("*.yaml") if p.name not in wanted and _generated(p)) \
        if root.is_dir() else []
    stale.extend(extra)
    if not check:
        for name in extra:
            (root / name).unlink()
    return ImportResult(tuple(written), tuple(unchanged), tuple(extra), tuple(stale))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shadow.providers.importer",
                                     description="Build vcrpy cassettes from legacy captures.")
    parser.add_argument("fixtures", help="folder of <scenario>/input.json captures")
    parser.add_argument("recordings", help="folder the <scenario>.yaml cassettes go to")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a cassette is missing or stale")
    args = parser.parse_args(argv)
    try:
        result = build(args.fixtures, args.recordings, check=args.check)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for name in result.stale:
            print(f"stale: {name}")
        print(f"{len(result.unchanged)} up to date, {len(result.stale)} stale")
        return 0 if result.ok else 1
    print(f"{len(result.written)} written, {len(result.unchanged)} unchanged, "
          f"{len(result.removed)} removed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Soul (second seed §2): the user's interaction identity, kept apart from memory.

``MemorySoulConfig`` has three fields — ``identity``, ``communication_rhythm`` and
``artifact_voice`` — and lives in the app configuration (``memory.soul``), never in the
memory store folder: Soul is not long-term memory and writes no ``MEMORY.md``, summary or
note.

* :func:`preview_import` parses a ``SOUL.md`` (sections ``## Identity``,
  ``## Communication rhythm``, ``## Artifact voice``; the Chinese headings 身份 / 沟通节奏 /
  产出语气 too) into a config and warnings, at least: ``project_rules`` (a line that reads
  as a project or repository rule: it belongs in project memory), ``local_path`` (a local
  path: replaced), ``secret_like`` (secret material: redacted), ``too_long`` (a field over
  :data:`MAX_FIELD` characters: cut).  The preview's ``token`` is the digest of what
  would be saved; only a previewed result can be applied (the shell keeps the previews).
* :func:`artifact_brief` turns the artifact voice into a ``generation_brief_only`` brief:
  guidance for one generation, never a write.
* :func:`persona_view` is what an expert persona sees: the global
  ``communication_rhythm``, read-only; :func:`check_write` refuses any write by a persona.

Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from kernel.canonical.digest import digest
from kernel.errors import InvalidArgument
from kernel.packets.anticorruption import FindingCategory, redact_secrets, scan

FIELDS: Final = ("identity", "communication_rhythm", "artifact_voice")
MAX_FIELD: Final = 2000  # characters per field
MAX_SOURCE: Final = 64 * 1024  # characters of SOUL.md read
_HEADINGS: Final = MappingProxyType({
    "identity": "identity", "身份": "identity",
    "communication rhythm": "communication_rhythm", "communication_rhythm":
        "communication_rhythm", "沟通节奏": "communication_rhythm",
    "artifact voice": "artifact_voice", "artifact_voice": "artifact_voice",
    "产出语气": "artifact_voice",
})
_PROJECT_RULE: Final = re.compile(
    r"\b(project|repo(sitory)?|codebase|monorepo|lint(er)?|unit tests?|ci|pull request|"
    r"commit|branch|build)\b|项目|仓库|代码库", re.I)
_DOMAIN: Final = "memory.soul/v1"


def empty() -> dict[str, str]:
    return dict.fromkeys(FIELDS, "")


def check_config(value: Any) -> dict[str, str]:
    """A ``MemorySoulConfig`` (exactly its three string fields)."""
    if not isinstance(value, Mapping):
        raise InvalidArgument("soul config must be an object", details={"field": "soul"})
    extra = sorted(str(k) for k in value if k not in FIELDS)
    if extra:
        raise InvalidArgument("soul config has only identity, communication_rhythm, "
                              "artifact_voice", details={"unknown": extra})
    out = empty()
    for f in FIELDS:
        v = value.get(f, "")
        if not isinstance(v, str) or len(v) > MAX_FIELD:
            raise InvalidArgument(f"{f} must be a string of at most {MAX_FIELD} characters",
                                  details={"field": f})
        out[f] = v
    return out


def _sections(text: str) -> tuple[dict[str, list[str]], list[str]]:
    found: dict[str, list[str]] = {f: [] for f in FIELDS}
    unknown: list[str] = []
    current: str | None = None
    for line in text.splitlines():
        m = re.match(r"^#{1,3}\s+(.+?)\s*#*\s*$", line)
        if m:
            current = _HEADINGS.get(m.group(1).strip().lower())
            if current is None:
                unknown.append(m.group(1).strip()[:60])
            continue
        if current is not None:
            found[current].append(line)
    return found, unknown


def _clean(field: str, text: str, warnings: list[dict[str, Any]]) -> str:
    findings = scan(text, trusted=True)
    if any(f.category is FindingCategory.SECRET for f in findings):
        warnings.append({"code": "secret_like", "field": field,
                         "labels": sorted({f.label for f in findings
                                           if f.category is FindingCategory.SECRET})})
        text = redact_secrets(text)
    paths = [f for f in scan(text, trusted=True) if f.category is FindingCategory.LOCAL_PATH]
    if paths:
        warnings.append({"code": "local_path", "field": field, "count": len(paths)})
        for f in sorted(paths, key=lambda f: f.start, reverse=True):
            text = text[:f.start] + "[local path]" + text[f.end:]
    kept = []
    for n, line in enumerate(text.split("\n"), 1):
        if _PROJECT_RULE.search(line):
            warnings.append({"code": "project_rules", "field": field, "line": n})
            continue  # project rules go to project memory, never to Soul
        kept.append(line)
    text = "\n".join(kept).strip()
    if len(text) > MAX_FIELD:
        warnings.append({"code": "too_long", "field": field, "chars": len(text),
                         "limit": MAX_FIELD})
        text = text[:MAX_FIELD].rstrip()
    return text


def preview_import(source: str) -> dict[str, Any]:
    """``{"soul": config, "warnings": [...], "token": digest}`` for a ``SOUL.md`` text."""
    if not isinstance(source, str):
        raise InvalidArgument("SOUL.md must be text", details={"field": "source"})
    warnings: list[dict[str, Any]] = []
    if len(source) > MAX_SOURCE:
        warnings.append({"code": "too_long", "field": "source", "chars": len(source),
                         "limit": MAX_SOURCE})
        source = source[:MAX_SOURCE]
    found, unknown = _sections(source.replace("\r\n", "\n").replace("\r", "\n"))
    for title in unknown:
        warnings.append({"code": "unknown_section", "section": title})
    soul = {f: _clean(f, "\n".join(found[f]), warnings) for f in FIELDS}
    return {"soul": soul, "warnings": warnings, "token": token(soul)}


def token(soul: Mapping[str, str]) -> str:
    """The preview token: the digest of exactly what an apply would save."""
    return digest(dict(check_config(soul)), _DOMAIN, "jcs")


def artifact_brief(soul: Mapping[str, str], task: str) -> dict[str, Any]:
    """The artifact voice as a brief for one generation: guidance only, writes nothing."""
    config = check_config(soul)
    if not isinstance(task, str) or not 1 <= len(task) <= 200:
        raise InvalidArgument("task must be 1-200 characters", details={"field": "task"})
    return {"kind": "generation_brief_only", "task": task, "voice": config["artifact_voice"],
            "rhythm": config["communication_rhythm"], "writes": []}


def persona_view(soul: Mapping[str, str], persona: str) -> dict[str, Any]:
    """What expert persona ``persona`` reads of the global Soul: its rhythm, read-only."""
    if not isinstance(persona, str) or not 1 <= len(persona) <= 100:
        raise InvalidArgument("persona must be 1-100 characters", details={"field": "persona"})
    return {"persona": persona,
            "communication_rhythm": check_config(soul)["communication_rhythm"],
            "readOnly": True}


def check_write(persona: str | None) -> None:
    """Only the user's own settings write the global Soul: never an expert persona."""
    if persona is not None:
        raise InvalidArgument("an expert persona cannot write the global Soul",
                              details={"field": "persona", "code": "persona_write_denied"})

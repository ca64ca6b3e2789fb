"""Writer inventory (design 108 §16 phase 0): every context builder, compressor, memory
writer and store of the legacy surfaces, with its cutover stage.

Two formats are accepted and read into one :class:`Inventory`:

* the peer's ``chainlesschain.context-memory-writer-inventory/v1`` (its
  ``inventory/writers.v1.json``: ``requiredSurfaces``, ``cutoverStages``, ``entries`` with
  ``id``, ``surface``, ``role``, ``currentStage``, ``files``, ``mutationFunctions``,
  ``stores``, ``recoveryEntrypoints``, ``disposition``);
* ours, ``shadow-writer-inventory/v1``::

      {"schema": "shadow-writer-inventory/v1",
       "surfaces": ["cli", "desktop", ...],
       "stages": ["inventory", "shadow", ..., "retired"],          # optional
       "writers": [{"id": "cli-compressor", "surface": "cli", "role": "legacy_writer",
                    "stage": "shadow", "entry_points": ["PromptCompressor.compress"],
                    "stores": ["jsonl session"], "files": ["packages/cli/..."]}]}

Validation (both formats): ids unique, every surface and stage declared, every declared
surface covered by at least one entry, lists of non-empty strings.  A violation is an
:class:`~shadow.errors.InputError` naming the pointer.  Phase 0 needs a valid inventory;
phase 5 needs no *active* legacy writer (role ``legacy_writer`` in a stage the policy does
not list as inactive, e.g. ``legacy_read_only`` / ``retired``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from shadow.boundary import load_path
from shadow.errors import InputError

PEER_SCHEMA: Final = "chainlesschain.context-memory-writer-inventory/v1"
SCHEMA: Final = "shadow-writer-inventory/v1"
DEFAULT_STAGES: Final = ("inventory", "shadow", "internal_canary", "opt_in_canary",
                         "canonical_default", "legacy_read_only", "retired")
LEGACY_ROLE: Final = "legacy_writer"


@dataclass(frozen=True, slots=True)
class Writer:
    id: str
    surface: str
    role: str
    stage: str
    entry_points: tuple[str, ...]
    stores: tuple[str, ...]
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Inventory:
    source: str
    format: str  # "peer" | "shadow"
    surfaces: tuple[str, ...]
    stages: tuple[str, ...]
    writers: tuple[Writer, ...]

    def active_legacy_writers(self, inactive_stages: Sequence[str]) -> list[Writer]:
        return [w for w in self.writers
                if w.role == LEGACY_ROLE and w.stage not in inactive_stages]

    def summary(self) -> dict[str, Any]:
        """What evidence.json records (no file lists: ids, surfaces, roles, stages)."""
        return {"source": self.source, "format": self.format,
                "surfaces": list(self.surfaces), "stages": list(self.stages),
                "writers": [{"id": w.id, "surface": w.surface, "role": w.role,
                             "stage": w.stage, "entry_points": len(w.entry_points),
                             "stores": len(w.stores), "files": len(w.files)}
                            for w in self.writers]}


def _strs(v: Any, src: str, ptr: str, *, nonempty: bool = False) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise InputError(src, ptr, "an array of non-empty strings", type(v).__name__)
    if nonempty and not v:
        raise InputError(src, ptr, "at least one entry", "an empty array")
    return tuple(v)


def _str(v: Any, src: str, ptr: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InputError(src, ptr, "a non-empty string",
                         "nothing" if v is None else type(v).__name__)
    return v


def _obj(v: Any, src: str, ptr: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise InputError(src, ptr, "an object", type(v).__name__)
    return v


# Field names per format: (id, surface, role, stage, entry points, stores, files)
_PEER_FIELDS: Final = ("id", "surface", "role", "currentStage", "mutationFunctions", "stores",
                       "files")
_OUR_FIELDS: Final = ("id", "surface", "role", "stage", "entry_points", "stores", "files")


def parse(doc: Any, src: str = "<inventory>") -> Inventory:
    d = _obj(doc, src, "")
    schema = d.get("schema")
    if schema == PEER_SCHEMA:
        fmt, fields = "peer", _PEER_FIELDS
        surfaces = _strs(d.get("requiredSurfaces"), src, "/requiredSurfaces", nonempty=True)
        stages = _strs(d.get("cutoverStages"), src, "/cutoverStages", nonempty=True)
        entries_key = "entries"
    elif schema == SCHEMA:
        fmt, fields = "shadow", _OUR_FIELDS
        surfaces = _strs(d.get("surfaces"), src, "/surfaces", nonempty=True)
        stages = _strs(d.get("stages", list(DEFAULT_STAGES)), src, "/stages", nonempty=True)
        entries_key = "writers"
    else:
        raise InputError(src, "/schema", f"{SCHEMA!r} or {PEER_SCHEMA!r}", repr(schema))
    raw = d.get(entries_key)
    if not isinstance(raw, list) or not raw:
        raise InputError(src, f"/{entries_key}", "a non-empty array of writers",
                         type(raw).__name__)
    fid, fsurf, frole, fstage, fentry, fstores, ffiles = fields
    writers: list[Writer] = []
    seen: set[str] = set()
    for i, e in enumerate(raw):
        ptr = f"/{entries_key}/{i}"
        e = _obj(e, src, ptr)
        wid = _str(e.get(fid), src, f"{ptr}/{fid}")
        if wid in seen:
            raise InputError(src, f"{ptr}/{fid}", "a unique id", f"{wid!r} again")
        seen.add(wid)
        surface = _str(e.get(fsurf), src, f"{ptr}/{fsurf}")
        if surface not in surfaces:
            raise InputError(src, f"{ptr}/{fsurf}", "one of the declared surfaces",
                             repr(surface))
        stage = _str(e.get(fstage), src, f"{ptr}/{fstage}")
        if stage not in stages:
            raise InputError(src, f"{ptr}/{fstage}", "one of the declared stages", repr(stage))
        writers.append(Writer(
            wid, surface, _str(e.get(frole), src, f"{ptr}/{frole}"), stage,
            _strs(e.get(fentry, []), src, f"{ptr}/{fentry}"),
            _strs(e.get(fstores, []), src, f"{ptr}/{fstores}"),
            _strs(e.get(ffiles, []), src, f"{ptr}/{ffiles}"),
        ))
    covered = {w.surface for w in writers}
    for i, s in enumerate(surfaces):
        if s not in covered:
            key = "requiredSurfaces" if fmt == "peer" else "surfaces"
            raise InputError(src, f"/{key}/{i}", "a surface with at least one writer entry",
                             f"no entry for {s!r}")
    writers.sort(key=lambda w: w.id)
    return Inventory(src, fmt, surfaces, stages, tuple(writers))


def load(path: str | Path) -> Inventory:
    return parse(load_path(Path(path)), Path(path).as_posix())

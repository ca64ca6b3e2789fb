"""The memory store folder and its four tools (second seed, "1. 文件化记忆 current").

Layout under the store root::

    memory_summary.md            the one memory summary injected by default
    MEMORY.md                    consolidated memory (read on demand)
    rollout_summaries/           rollout summaries (read on demand)
    extensions/ad_hoc/notes/     ad-hoc notes: the only thing a tool writes
    index/                       derived search index: deletable, rebuildable, degradable
    review/                      notes consolidation found doubtful (never readable by tools)

Tools (JSON-ready dicts in, out; relative paths only, checked by
:mod:`kernel.adapters.memory_folder.paths`):

* ``memory_list(path="")`` — files of the readable areas (or of one area directory).
* ``memory_read(path, start_line=None, end_line=None)`` — a UTF-8 file's lines (1-based,
  inclusive), with its digest.
* ``memory_search(query, limit=10)`` — lexical search (:mod:`kernel.memory.lexical`, canonical
  analyzer) over blocks of the readable files; each result cites ``path`` and its line
  range.  The persisted ``index/`` is a projection: missing → rebuilt; stale (a file
  changed) → rebuilt; corrupt or contradicted by a file (a cited block's digest differs)
  → the call scans the files instead and says so (``degraded``: ``index_degraded``).
* ``memory_add_note(title, body)`` — creates a *new* note in ``extensions/ad_hoc/notes/``
  (``O_CREAT|O_EXCL``: never overwrites); secret material is refused.

``MEMORY.md`` and ``memory_summary.md`` change only through :meth:`MemoryFolder.consolidate`,
which scans every new note for secrets and prompt injection (:mod:`kernel.packets.anticorruption`),
moves doubtful notes to ``review/`` (with the finding labels, never the matched text),
appends the clean ones to ``MEMORY.md`` and regenerates the summary — with the given
summarizer if any, whose output is scanned too; a failing or doubtful summarizer falls back
to the rule-based summary, marked ``degraded``.  Consolidation never raises for content: it
must not block the current turn.

All file I/O is binary + explicit UTF-8; reads accept ``\\r\\n`` / ``\\r`` and a BOM, writes
use ``\\n`` and no BOM.  OS errors become :class:`~kernel.errors.StoreFailure`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Final

from kernel.adapters.memory_folder.paths import (
    FD_WALK,
    FILE_SUFFIXES,
    MemoryPathRejected,
    check_relative_path,
    ensure_dirs,
    move_beneath,
    open_beneath,
    replace_beneath,
    walk_beneath,
    write_all,
)
from kernel.errors import InvalidArgument, KernelError, StoreFailure
from kernel.memory.index import IndexCorrupt, IndexHit, LexicalIndex
from kernel.memory.index import scan as scan_docs
from kernel.memory.lexical import analyze, compile_query
from kernel.outcomes import Degraded, IndexDegraded
from kernel.packets.anticorruption import FindingCategory, scan

__all__ = [
    "MemoryFileInvalid",
    "MemoryFolder",
    "MemoryNotFound",
    "MemoryNoteRejected",
    "MemoryPathRejected",
]

SUMMARY: Final = "memory_summary.md"
MEMORY: Final = "MEMORY.md"
ROLLOUTS: Final = ("rollout_summaries",)
NOTES: Final = ("extensions", "ad_hoc", "notes")
INDEX_FILE: Final = ("index", "lexical-v1.json")
REVIEW: Final = ("review",)
FOLDER_FORMAT: Final = "cmk.memory-folder-index/v1"
MAX_FILE_BYTES: Final = 4 * 1024 * 1024
MAX_BLOCK_LINES: Final = 40
SUMMARY_BYTES: Final = 4096
_PARTITION: Final = ("folder", None)
_DOUBTFUL: Final = frozenset({FindingCategory.SECRET, FindingCategory.INJECTION})
_MARKER: Final = re.compile(r"<!-- source: (\S+) (sha256:[0-9a-f]{64}) -->")


class MemoryNotFound(KernelError):
    """The memory file or directory does not exist (the caller's path)."""

    default_code = "not_found"


class MemoryFileInvalid(KernelError):
    """A memory file is not valid UTF-8 text or is too large (the store's content)."""

    default_code = "memory_file_invalid"


class MemoryNoteRejected(InvalidArgument):
    """A note was refused (secret material, size); ``details`` names findings, never text."""

    default_code = "note_rejected"


def _lines(data: bytes, path: str) -> list[str]:
    if len(data) > MAX_FILE_BYTES:
        raise MemoryFileInvalid("memory file is too large", details={"path": path})
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MemoryFileInvalid("memory file is not UTF-8", details={"path": path}) from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blocks(lines: list[str]) -> Iterator[tuple[int, int, str]]:
    """Blank-line separated blocks (at most 40 lines each): ``(start, end, text)``."""
    start: int | None = None
    for number, line in enumerate([*lines, ""], start=1):
        if line.strip():
            if start is None:
                start = number
            if number - start + 1 == MAX_BLOCK_LINES:
                yield start, number, "\n".join(lines[start - 1 : number])
                start = None
        elif start is not None:
            yield start, number - 1, "\n".join(lines[start - 1 : number - 1])
            start = None


class MemoryFolder:
    """One memory store folder.  ``clock`` (UTC ``datetime``) names new notes."""

    def __init__(
        self, root: str | os.PathLike[str], *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.root = os.path.realpath(os.fspath(root))
        self._clock = clock or (lambda: datetime.now(UTC))
        self._index: LexicalIndex | None = None
        self._manifest: dict[str, str] | None = None
        # Nothing is created here: reading a folder (or one that does not exist) leaves it
        # as it was; the writers make the directories they write into.
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise StoreFailure("memory store folder is not usable")

    def _ensure_root(self) -> None:
        """The store folder itself, for a writer (``memory_add_note``, ``consolidate``)."""
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise StoreFailure("memory store folder is not usable") from exc

    # --- paths ------------------------------------------------------------------------

    @staticmethod
    def _readable(segments: tuple[str, ...], *, directory: bool = False) -> None:
        path = "/".join(segments)
        if directory:
            ok = segments in ((), ROLLOUTS, NOTES) or segments[: len(ROLLOUTS)] == ROLLOUTS
            ok = ok or (segments[: len(NOTES)] == NOTES)
        else:
            ok = segments in ((SUMMARY,), (MEMORY,)) or (
                len(segments) > 1
                and (segments[:1] == ROLLOUTS or (segments[:3] == NOTES and len(segments) > 3))
            )
            if ok and not segments[-1].endswith(FILE_SUFFIXES):
                raise MemoryPathRejected(
                    "memory files are .md or .txt",
                    details={"reason": "extension", "path": ascii(path[:120])},
                )
        if not ok:
            raise MemoryPathRejected(
                "path is outside the readable memory areas",
                details={"reason": "outside_area", "path": ascii(path[:120])},
            )

    def _read_bytes(self, segments: tuple[str, ...]) -> bytes:
        try:
            fd = open_beneath(self.root, segments, os.O_RDONLY)
        except MemoryPathRejected:
            raise
        except FileNotFoundError:
            raise MemoryNotFound(
                "memory file not found", details={"path": "/".join(segments)}
            ) from None
        except OSError as exc:
            raise StoreFailure("memory file could not be read") from exc
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
                if sum(map(len, chunks)) > MAX_FILE_BYTES:
                    break
            return b"".join(chunks)
        except OSError as exc:
            raise StoreFailure("memory file could not be read") from exc
        finally:
            os.close(fd)

    def _files(self, base: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        """Readable files (``.md``/``.txt``, not hidden, not links) under ``base``."""
        if base:
            return self._walk(base)
        top = [(name,) for name in (SUMMARY, MEMORY) if self._is_file((name,))]
        return [*top, *self._walk(ROLLOUTS), *self._walk(NOTES)]

    def _is_file(self, segments: tuple[str, ...]) -> bool:
        try:
            with walk_beneath(self.root, segments[:-1]) as parent:
                if FD_WALK:
                    st = os.stat(segments[-1], dir_fd=parent, follow_symlinks=False)
                else:
                    st = os.lstat(os.path.join(self.root, *segments))
        except (OSError, MemoryPathRejected):
            return False
        return stat.S_ISREG(st.st_mode) and st.st_nlink == 1

    def _walk(self, base: tuple[str, ...]) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        try:
            with walk_beneath(self.root, base) as fd:
                if FD_WALK:
                    names = sorted(os.listdir(fd))
                else:
                    names = sorted(os.listdir(os.path.join(self.root, *base)))
        except (OSError, MemoryPathRejected):
            return out
        for name in names:
            segments = (*base, name)
            try:
                check_relative_path("/".join(segments))
            except MemoryPathRejected:
                continue  # hidden, reserved or otherwise unsafe names are never listed
            if name.endswith(FILE_SUFFIXES) and self._is_file(segments):
                out.append(segments)
            elif not name.endswith(FILE_SUFFIXES):
                out.extend(self._walk(segments))
        return out

    # --- tools --------------------------------------------------------------------------

    def memory_list(self, path: str = "") -> dict[str, Any]:
        segments = check_relative_path(path, allow_empty=True)
        self._readable(segments, directory=True)
        files = self._files(segments)
        entries = []
        for segs in files:
            data = self._read_bytes(segs)
            entries.append({"path": "/".join(segs), "bytes": len(data), "digest": _sha(data)})
        return {"path": "/".join(segments), "entries": entries}

    def memory_read(
        self, path: str, *, start_line: int | None = None, end_line: int | None = None
    ) -> dict[str, Any]:
        segments = check_relative_path(path)
        self._readable(segments)
        data = self._read_bytes(segments)
        lines = _lines(data, "/".join(segments))
        total = len(lines)
        start = 1 if start_line is None else start_line
        end = total if end_line is None else end_line
        if type(start) is not int or type(end) is not int or start < 1 or end < start - 1:
            raise InvalidArgument("line range is invalid", details={"field": "start_line"})
        end = min(end, total)
        return {
            "path": "/".join(segments),
            "startLine": start,
            "endLine": end,
            "totalLines": total,
            "content": "\n".join(lines[start - 1 : end]),
            "digest": _sha(data),
        }

    def memory_add_note(self, title: str, body: str) -> dict[str, Any]:
        if not isinstance(title, str) or not 1 <= len(title.strip()) <= 200 or "\n" in title:
            raise MemoryNoteRejected("note title must be one line of 1-200 characters",
                                     details={"field": "title"})  # fmt: skip
        if not isinstance(body, str) or not 1 <= len(body) <= 64 * 1024:
            raise MemoryNoteRejected("note body must be 1-65536 characters",
                                     details={"field": "body"})  # fmt: skip
        text = f"# {title.strip()}\n\n{body.replace(chr(13) + chr(10), chr(10))}".rstrip("\n")
        text = text.replace("\r", "\n") + "\n"
        secrets = [f for f in scan(text, trusted=True) if f.category is FindingCategory.SECRET]
        if secrets:
            raise MemoryNoteRejected(
                "note contains secret material",
                details={"findings": sorted({f.label for f in secrets})},
            )
        data = text.encode("utf-8", "surrogatepass")
        stamp = self._clock().astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        slug = "-".join(re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKC", title).lower()))
        base = f"{stamp}-{slug[:48].strip('-') or 'note'}"
        self._ensure_root()
        try:
            ensure_dirs(self.root, NOTES)
            for n in range(1, 1000):
                name = f"{base}.md" if n == 1 else f"{base}-{n}.md"
                segments = (*NOTES, name)
                try:
                    fd = open_beneath(self.root, segments, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                except FileExistsError:
                    continue
                try:
                    write_all(fd, data)
                finally:
                    os.close(fd)
                return {"path": "/".join(segments), "bytes": len(data), "digest": _sha(data)}
        except MemoryPathRejected:
            raise
        except OSError as exc:
            raise StoreFailure("note could not be written") from exc
        raise StoreFailure("no free note name")

    def add_rollout_summary(self, name: str, text: str) -> dict[str, Any]:
        """Write ``rollout_summaries/<name>.md`` once (a compaction's rollout summary: the
        one way a compaction result reaches the memory store).  Secret and injection
        findings are redacted (``[redacted:<label>]``); the same name again returns the
        file already there, unchanged."""
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}", name) or ".." in name:
            raise MemoryPathRejected("rollout summary name is not a safe file name",
                                     details={"field": "name"})  # fmt: skip
        findings = sorted((f for f in scan(text, trusted=False) if f.category in _DOUBTFUL),
                          key=lambda f: f.start, reverse=True)  # fmt: skip
        for f in findings:
            text = text[: f.start] + f"[redacted:{f.label}]" + text[f.end :]
        data = (text.rstrip("\n") + "\n").encode("utf-8", "surrogatepass")[:64 * 1024]
        segments = (*ROLLOUTS, f"{name}.md")
        self._ensure_root()
        try:
            ensure_dirs(self.root, ROLLOUTS)
            try:
                fd = open_beneath(self.root, segments, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                data = self._read_bytes(segments)
            else:
                try:
                    write_all(fd, data)
                finally:
                    os.close(fd)
        except MemoryPathRejected:
            raise
        except OSError as exc:
            raise StoreFailure("rollout summary could not be written") from exc
        self._index = None
        return {"path": "/".join(segments), "bytes": len(data), "digest": _sha(data),
                "redacted": len(findings)}

    # --- search -------------------------------------------------------------------------

    def _read_all(self) -> dict[str, bytes]:
        """Every readable file's bytes (the authority a search is checked against)."""
        return {"/".join(segs): self._read_bytes(segs) for segs in self._files()}

    @staticmethod
    def _file_blocks(path: str, data: bytes) -> list[tuple[str, str, str]]:
        try:
            lines = _lines(data, path)
        except MemoryFileInvalid:
            return []
        return [
            (f"{path}#L{start}-L{end}", _sha(text.encode("utf-8", "surrogatepass")), text)
            for start, end, text in _blocks(lines)
        ]

    def _build(self, files: dict[str, bytes], manifest: dict[str, str]) -> LexicalIndex:
        index = LexicalIndex("canonical")
        for path, data in files.items():
            for doc_id, digest, text in self._file_blocks(path, data):
                index.add(_PARTITION, doc_id, text, digest=digest)
        body = {"format": FOLDER_FORMAT, "manifest": manifest, "index": index.to_wire()}
        wire = {**body, "digest": _sha(_json(body))}
        try:
            ensure_dirs(self.root, INDEX_FILE[:-1])
            replace_beneath(self.root, INDEX_FILE, _json(wire))
        except (OSError, MemoryPathRejected):
            pass  # the index is derived: failing to persist it (or a link) loses nothing
        self._index, self._manifest = index, manifest
        return index

    def rebuild_index(self) -> LexicalIndex:
        """Rebuild the derived index from the files and persist it under ``index/``."""
        files = self._read_all()
        return self._build(files, {p: _sha(d) for p, d in files.items()})

    def _load_index(
        self, files: dict[str, bytes], manifest: dict[str, str]
    ) -> tuple[LexicalIndex | None, str | None]:
        """The usable index, or ``(None, reason)`` when the persisted one is damaged."""
        if self._index is not None and self._manifest == manifest:
            return self._index, None
        try:
            data = self._read_bytes(INDEX_FILE)
        except MemoryNotFound:
            return self._build(files, manifest), None  # deleted: rebuilt, nothing lost
        except (MemoryPathRejected, StoreFailure):
            return None, "index_corrupt"  # a link, FIFO or unreadable file: rebuilt over
        try:
            wire = json.loads(data.decode("utf-8"))
            body = {k: v for k, v in wire.items() if k != "digest"}
            if wire.get("format") != FOLDER_FORMAT or wire.get("digest") != _sha(_json(body)):
                raise IndexCorrupt("folder index failed its digest check")
            index = LexicalIndex.from_wire(wire["index"])
        except (ValueError, AttributeError, KeyError, TypeError, IndexCorrupt):
            return None, "index_corrupt"
        if wire["manifest"] != manifest:
            return self._build(files, manifest), None  # stale: a file changed
        self._index, self._manifest = index, manifest
        return index, None

    def memory_search(self, query: str, *, limit: int = 10) -> dict[str, Any]:
        if not isinstance(query, str) or not 1 <= len(query) <= 4096:
            raise InvalidArgument("query must be 1-4096 characters", details={"field": "query"})
        if type(limit) is not int or not 1 <= limit <= 100:
            raise InvalidArgument("limit must be 1-100", details={"field": "limit"})
        compiled = compile_query(query, "canonical")
        files = self._read_all()
        manifest = {p: _sha(d) for p, d in files.items()}
        index, reason = self._load_index(files, manifest)
        hits: list[IndexHit] = []
        blocks: dict[str, tuple[str, str]] = {}
        if index is not None:
            hits = index.search(compiled, [_PARTITION])
            for path in {h.doc_id.split("#", 1)[0] for h in hits}:
                data = files.get(path, b"")
                blocks.update((d, (g, t)) for d, g, t in self._file_blocks(path, data))
            if any(blocks.get(h.doc_id, ("", ""))[0] != h.digest for h in hits):
                reason = "index_entry_mismatch"  # the files contradict the index
        if reason is not None:
            everything = [b for p, d in files.items() for b in self._file_blocks(p, d)]
            blocks = {d: (g, t) for d, g, t in everything}
            docs = ((_PARTITION, d, g, analyze(t, "canonical")) for d, g, t in everything)
            hits = scan_docs(compiled, docs)
            self._build(files, manifest)
        hits.sort(key=lambda h: (-h.lexical, -h.bm25, *_citation(h.doc_id)))
        results = []
        for hit in hits[:limit]:
            path, start, end = _citation(hit.doc_id)
            results.append({
                "path": path, "startLine": start, "endLine": end,
                "citation": f"{path}:{start}-{end}", "snippet": blocks[hit.doc_id][1][:240],
                "lexical": hit.lexical,
            })  # fmt: skip
        degraded = (
            IndexDegraded(index="memory-folder", fallback="lexical", reason_code=reason)
            if reason is not None
            else None
        )
        return {
            "query": query,
            "results": results,
            "path": "scan" if reason is not None else "index",
            "degraded": degraded.to_wire() if degraded is not None else None,
        }

    # --- consolidation ------------------------------------------------------------------

    def consolidate(self, *, summarizer: Callable[[str], str] | None = None) -> dict[str, Any]:
        """Fold new ad-hoc notes into ``MEMORY.md`` and regenerate ``memory_summary.md``."""
        report: dict[str, Any] = {"consolidated": [], "review": [], "skipped": [],
                                  "degraded": None}  # fmt: skip
        self._ensure_root()
        try:
            memory = "\n".join(_lines(self._read_bytes((MEMORY,)), MEMORY)) + "\n"
        except MemoryNotFound:
            memory = "# Memory\n"
        except MemoryFileInvalid:
            report["error"] = "memory_file_invalid"
            return report
        seen = {m.group(2) for m in _MARKER.finditer(memory)}
        additions: list[str] = []
        for segments in self._walk(NOTES):
            path = "/".join(segments)
            data = self._read_bytes(segments)
            digest = _sha(data)
            if digest in seen:
                report["skipped"].append(path)
                continue
            try:
                text = "\n".join(_lines(data, path))
            except MemoryFileInvalid:
                report["skipped"].append(path)
                continue
            findings = [f for f in scan(text, trusted=False) if f.category in _DOUBTFUL]
            if findings:
                report["review"].append(self._to_review(segments, findings))
                continue
            title, _, body = text.partition("\n")
            heading = title.removeprefix("# ").strip() or segments[-1]
            additions.append(
                f"\n## {heading}\n<!-- source: {path} {digest} -->\n\n{body.strip()}\n"
            )
            seen.add(digest)
            report["consolidated"].append(path)
        try:
            if additions:
                memory = memory + "".join(additions)
                replace_beneath(self.root, (MEMORY,), memory.encode("utf-8", "surrogatepass"))
            summary, degraded = self._summary(memory, summarizer)
            replace_beneath(self.root, (SUMMARY,), summary.encode("utf-8", "surrogatepass"))
        except OSError as exc:
            raise StoreFailure("consolidation could not write the memory files") from exc
        report["degraded"] = degraded.to_wire() if degraded is not None else None
        self._index = None
        return report

    def _to_review(self, segments: tuple[str, ...], findings: list[Any]) -> dict[str, Any]:
        entry = {
            "path": "/".join(segments),
            "findings": [{"category": f.category.value, "ruleId": f.rule_id, "label": f.label,
                          "start": f.start, "end": f.end} for f in findings],
        }  # fmt: skip
        try:
            ensure_dirs(self.root, REVIEW)
            for n in range(1, 1000):
                name = segments[-1] if n == 1 else f"{n}-{segments[-1]}"
                try:
                    move_beneath(self.root, segments, (*REVIEW, name))
                except FileExistsError:
                    continue
                reason = json.dumps(entry, sort_keys=True, indent=2).encode() + b"\n"
                replace_beneath(self.root, (*REVIEW, name + ".review.json"), reason)
                entry["review"] = "/".join((*REVIEW, name))
                break
        except OSError as exc:
            raise StoreFailure("a doubtful note could not be moved to review") from exc
        return entry

    @staticmethod
    def _summary(
        memory: str, summarizer: Callable[[str], str] | None
    ) -> tuple[str, Degraded | None]:
        reason = None
        if summarizer is not None:
            try:
                text = summarizer(memory)
                if not isinstance(text, str) or not text.strip():
                    reason = "summarizer_empty"
                elif any(f.category in _DOUBTFUL for f in scan(text, trusted=False)):
                    reason = "summarizer_output_rejected"
                elif len(text.encode("utf-8", "surrogatepass")) > SUMMARY_BYTES:
                    reason = "summarizer_output_too_long"
                else:
                    return text.rstrip("\n") + "\n", None
            except Exception:  # a failing summarizer must not block the turn
                reason = "summarizer_failed"
        lines = ["# Memory summary", ""]
        size = sum(len(x) + 1 for x in lines)
        for heading in re.findall(r"^## (.+)$", memory, flags=re.MULTILINE):
            line = f"- {heading.strip()}"
            size += len(line.encode("utf-8", "surrogatepass")) + 1
            if size > SUMMARY_BYTES:
                break
            lines.append(line)
        degraded = (
            Degraded(fallback_strategy="deterministic-fallback", reason_code=reason)
            if reason is not None
            else None
        )
        return "\n".join(lines) + "\n", degraded

    def summary_for_prompt(self) -> str:
        """``memory_summary.md`` — the only memory text injected by default ("" if none)."""
        try:
            return "\n".join(_lines(self._read_bytes((SUMMARY,)), SUMMARY))
        except MemoryNotFound:
            return ""


def _citation(doc_id: str) -> tuple[str, int, int]:
    path, lines = doc_id.rsplit("#L", 1)
    start, end = lines.split("-L")
    return path, int(start), int(end)


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")

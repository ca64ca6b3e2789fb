"""Adapter harnesses for the SessionContextPort conformance suite.

Each harness gives the suite the same verbs over a different store: create a
session with some conversation, add a turn (a concurrent writer), reopen the
store (durability), verify its chain, list its raw evidence.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.adapters.in_memory.session import InMemorySessionPort
from kernel.adapters.jsonl.messages import SourceMessage, messages_to_items
from kernel.adapters.jsonl.session import JsonlSessionPort
from kernel.adapters.sqlite.session import SqliteSessionPort
from kernel.ports import CasResult

T0 = 1_787_227_200_000  # 2026-08-20T12:00:00Z


def conversation(n: int, prefix: str = "turn") -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": f"{prefix} {i}: " + "lorem " * (i % 7 + 1)}
        for i in range(n)
    ]


def items_for(
    session_id: str, messages: list[dict[str, Any]], start: int = 0
) -> list[dict[str, Any]]:
    sources = [
        SourceMessage(
            m,
            hashlib.sha256(f"{session_id}/{start + i}".encode()).hexdigest(),
            0,
            (start + i) * 100_000,
            T0 + start + i,
        )
        for i, m in enumerate(messages)
    ]
    return messages_to_items(sources, session_id)


@dataclass
class Harness:
    name: str
    root: Path
    factory: Callable[[], Any]
    port: Any = None

    def __post_init__(self) -> None:
        self.port = self.factory()
        self._counter = 0

    # -- verbs -------------------------------------------------------------------------
    def create(self, session_id: str, n: int = 6) -> str:
        messages = conversation(n)
        if self.name == "jsonl":
            self.port.start_session(session_id, title="conformance")
            for i, m in enumerate(messages):
                self.port.append_message(session_id, m["role"], m["content"], timestamp=T0 + i)
        else:
            self.port.seed(
                session_id, head=f"head:{session_id}", items=items_for(session_id, messages)
            )
        snapshot = self.port.read_snapshot(session_id)
        assert snapshot is not None
        return str(snapshot.head)

    def add_turn(self, session_id: str, text: str, expected_head: str | None = None) -> CasResult:
        self._counter += 1
        if self.name == "jsonl":
            return self.port.append_message(  # type: ignore[no-any-return]
                session_id,
                "user",
                text,
                expected_head=expected_head,
                timestamp=T0 + 10_000 + self._counter,
            )
        items = items_for(
            session_id, [{"role": "user", "content": text}], start=10_000 + self._counter
        )
        return self.port.append_items(session_id, items, expected_head)  # type: ignore[no-any-return]

    def reopen(self) -> Any:
        if self.name != "memory":
            if hasattr(self.port, "close"):
                self.port.close()
            self.port = self.factory()
        return self.port

    def verify(self, session_id: str) -> bool:
        if self.name == "jsonl":
            return self.port.verify(session_id).status in ("verified", "partial")  # type: ignore[no-any-return]
        if self.name == "sqlite":
            return self.port.verify(session_id)  # type: ignore[no-any-return]
        return True

    def evidence(self, session_id: str) -> list[dict[str, Any]]:
        return self.port.evidence(session_id)  # type: ignore[no-any-return]

    def close(self) -> None:
        if hasattr(self.port, "close"):
            self.port.close()


def make_harness(name: str, root: Path) -> Harness:
    root.mkdir(parents=True, exist_ok=True)
    if name == "memory":
        shared = InMemorySessionPort()
        return Harness(name, root, lambda: shared)
    if name == "sqlite":
        return Harness(name, root, lambda: SqliteSessionPort(root / "sessions.db"))
    if name == "jsonl":
        return Harness(name, root, lambda: JsonlSessionPort(root / "sessions"))
    raise ValueError(name)


@contextmanager
def harness(name: str, root: Path) -> Iterator[Harness]:
    h = make_harness(name, root)
    try:
        yield h
    finally:
        h.close()


ADAPTERS = ("memory", "jsonl", "sqlite")

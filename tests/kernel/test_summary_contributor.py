"""The memory summary contributor (second seed §1): memory_summary.md is the one memory
injected by default, as a ContextPacket through the assembler; MEMORY.md, rollout
summaries and notes never are."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kernel.adapters.memory_folder.store import MemoryFolder
from kernel.errors import InvalidArgument
from kernel.memory.summary_contributor import INVALIDATION, memory_summary_packet
from kernel.packets.assembler import AssemblyPolicy, assemble


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _folder(root: Path, summary: str) -> MemoryFolder:
    (root / "rollout_summaries").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\nLONG-TERM-ONLY fact.\n", encoding="utf-8")
    (root / "rollout_summaries" / "r.md").write_text("ROLLOUT-ONLY text.\n", encoding="utf-8")
    (root / "memory_summary.md").write_text(summary, encoding="utf-8")
    return MemoryFolder(root)


def test_only_the_summary_is_contributed_with_its_envelope(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m", "# Memory summary\n\n- prefers tabs\n")
    text = folder.summary_for_prompt()
    packet = memory_summary_packet(text, _digest(text))
    assert packet is not None
    assert (packet.citation, packet.invalidation) == ("memory_summary.md", INVALIDATION)
    assert packet.cache_key == f"memory_summary.md@{_digest(text)}"
    assert packet.source == "memory" and packet.trust_level == "user"
    ctx = assemble([packet], AssemblyPolicy(sink="provider"))
    assert [d.decision.value for d in ctx.decisions] == ["admitted"]
    body = "".join(p.text for p in ctx.packets)
    assert "prefers tabs" in body
    assert "LONG-TERM-ONLY" not in body and "ROLLOUT-ONLY" not in body


def test_a_changed_summary_is_another_cache_key(tmp_path: Path) -> None:
    a = memory_summary_packet("- a\n", _digest("- a\n"))
    b = memory_summary_packet("- b\n", _digest("- b\n"))
    assert a is not None and b is not None and a.cache_key != b.cache_key


def test_no_summary_no_packet() -> None:
    assert memory_summary_packet("", _digest("")) is None
    assert memory_summary_packet("  \n", _digest("  \n")) is None
    with pytest.raises(InvalidArgument):
        memory_summary_packet("x", "md5:1")


def test_the_assembler_redacts_a_secret_and_caps_the_packet() -> None:
    key = "sk-live-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    text = f"- the deploy key is {key}\n" + "- filler words here\n" * 400
    packet = memory_summary_packet(text, _digest(text))
    assert packet is not None and packet.token_budget == 1000
    ctx = assemble([packet], AssemblyPolicy(sink="provider"))
    decision = ctx.decisions[0]
    assert decision.tokens_in > 1000 >= ctx.packets[0].tokens  # capped, never passed whole
    assert ctx.packets[0].citation == "memory_summary.md"
    body = "".join(p.text for p in ctx.packets)
    assert key not in body and "the deploy key is" in body

"""Soul (second seed §2): a test per rule of kernel.memory.soul."""

from __future__ import annotations

import pytest

from kernel.errors import InvalidArgument
from kernel.memory import soul

SOURCE = """# My Soul
## Identity
I am a careful pair programmer.
## Communication rhythm
Short answers first, details on request.
## Artifact voice
Plain, warm, no jargon.
"""


def _codes(preview: dict[str, object]) -> list[str]:
    return [w["code"] for w in preview["warnings"]]  # type: ignore[index, union-attr]


def test_a_clean_soul_md_parses_into_the_three_fields() -> None:
    p = soul.preview_import(SOURCE)
    assert p["soul"] == {"identity": "I am a careful pair programmer.",
                         "communication_rhythm": "Short answers first, details on request.",
                         "artifact_voice": "Plain, warm, no jargon."}
    assert _codes(p) == ["unknown_section"]  # "My Soul": named, never guessed into a field
    assert p["token"] == soul.token(p["soul"]) and p["token"].startswith("sha256:")


def test_chinese_headings_are_read() -> None:
    p = soul.preview_import("## 身份\n我是助手。\n## 沟通节奏\n先结论。\n## 产出语气\n简洁。\n")
    assert p["soul"] == {"identity": "我是助手。", "communication_rhythm": "先结论。",
                         "artifact_voice": "简洁。"}


def test_project_rules_are_warned_and_left_out() -> None:
    p = soul.preview_import("## Identity\nFriendly.\nAlways run the unit tests before a "
                            "commit in this repo.\n")
    assert p["soul"]["identity"] == "Friendly."
    assert {"code": "project_rules", "field": "identity", "line": 2} in p["warnings"]


def test_a_local_path_is_warned_and_replaced() -> None:
    p = soul.preview_import("## Identity\nMy notes live in /home/alice/private/notes.\n")
    assert "/home/alice" not in p["soul"]["identity"]
    assert "[local path]" in p["soul"]["identity"]
    assert any(w["code"] == "local_path" for w in p["warnings"])


def test_secret_like_material_is_warned_and_redacted() -> None:
    key = "sk-live-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    p = soul.preview_import(f"## Artifact voice\nSign with {key} please.\n")
    assert key not in p["soul"]["artifact_voice"] and key not in str(p["warnings"])
    assert any(w["code"] == "secret_like" for w in p["warnings"])


def test_a_field_too_long_is_warned_and_cut() -> None:
    p = soul.preview_import("## Identity\n" + "word " * 1000)
    assert len(p["soul"]["identity"]) <= soul.MAX_FIELD
    assert any(w["code"] == "too_long" and w["field"] == "identity" for w in p["warnings"])
    big = soul.preview_import("## Identity\nx\n" + "y" * (soul.MAX_SOURCE + 5))
    assert any(w["code"] == "too_long" and w["field"] == "source" for w in big["warnings"])


def test_the_token_is_the_digest_of_what_would_be_saved() -> None:
    a, b = soul.preview_import(SOURCE), soul.preview_import(SOURCE + "\n")
    assert a["token"] == b["token"]  # same config, same token
    c = soul.preview_import(SOURCE.replace("warm", "cold"))
    assert c["token"] != a["token"]


def test_the_artifact_voice_is_a_brief_that_writes_nothing() -> None:
    s = soul.preview_import(SOURCE)["soul"]
    brief = soul.artifact_brief(s, "release notes")
    assert brief == {"kind": "generation_brief_only", "task": "release notes",
                     "voice": "Plain, warm, no jargon.",
                     "rhythm": "Short answers first, details on request.", "writes": []}


def test_a_persona_reads_the_rhythm_and_never_writes() -> None:
    s = soul.preview_import(SOURCE)["soul"]
    view = soul.persona_view(s, "reviewer")
    assert view == {"persona": "reviewer", "readOnly": True,
                    "communication_rhythm": "Short answers first, details on request."}
    assert "identity" not in view and "artifact_voice" not in view
    with pytest.raises(InvalidArgument) as exc:
        soul.check_write("reviewer")
    assert exc.value.details["code"] == "persona_write_denied"
    soul.check_write(None)  # the user's own settings may


def test_a_config_has_exactly_its_three_fields() -> None:
    with pytest.raises(InvalidArgument):
        soul.check_config({"identity": "x", "memory": "y"})
    with pytest.raises(InvalidArgument):
        soul.check_config({"identity": 3})
    assert soul.check_config({}) == soul.empty()

"""JSON Schema v1 is frozen: the contracts must keep generating the committed files."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from kernel import contracts as k
from kernel.contracts import CONTRACTS
from shadow import schemas
from tests.conftest import load_peer_vectors

ROOT = Path(__file__).resolve().parent.parent
ADR = ROOT / "docs" / "adr" / "0002-schema-v1-vs-peer.md"


def test_committed_schema_v1_matches_the_contracts() -> None:
    problems = schemas.drift(schemas.generate())
    assert not problems, schemas.drift_message(problems)


def test_a_changed_contract_is_reported_as_drift() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class ContextItem(k.ContextItem):  # same name, one extra wire field
        reviewer_note: str | None = None

    changed = tuple(ContextItem if c is k.ContextItem else c for c in CONTRACTS)
    problems = schemas.drift(schemas.generate(changed))
    assert problems == [
        "ContextItem.json: differs from the committed file (first at /properties/reviewerNote)",
        "index.json: differs from the committed file (first at /files/ContextItem.json)",
    ]
    message = schemas.drift_message(problems)
    assert "frozen" in message and "python -m shadow.schemas" in message


def test_removed_and_added_contracts_are_reported(tmp_path: Path) -> None:
    files = schemas.generate()
    schemas.write(files, tmp_path)
    assert schemas.drift(files, tmp_path) == []
    (tmp_path / "Retired.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "SourceRef.json").unlink()
    assert schemas.drift(files, tmp_path) == [
        "Retired.json: committed but no longer generated",
        "SourceRef.json: generated but not committed",
    ]


def test_generation_is_deterministic_and_canonical() -> None:
    first, second = schemas.generate(), schemas.generate()
    assert first == second
    for name, data in first.items():
        text = data.decode("utf-8")
        assert text.endswith("}\n") and "\r" not in text, name
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True,
                                  ensure_ascii=False) + "\n", name


def test_index_lists_every_file_with_its_digest() -> None:
    index = json.loads((schemas.SCHEMA_DIR / schemas.INDEX_NAME).read_text(encoding="utf-8"))
    assert index["schemaVersion"] == k.SCHEMA_VERSION == 1
    assert set(index["files"]) == {f"{c.__name__}.json" for c in CONTRACTS}
    for name, digest in index["files"].items():
        data = (schemas.SCHEMA_DIR / name).read_bytes()
        assert digest == "sha256:" + hashlib.sha256(data).hexdigest(), name


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.__name__)
def test_each_file_is_a_valid_draft_2020_12_schema_with_wire_names(contract: type) -> None:
    schema = json.loads((schemas.SCHEMA_DIR / f"{contract.__name__}.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["title"] == contract.__name__
    assert set(schema["properties"]) == {f.wire for f in k.wire_fields(contract)}
    assert schema["additionalProperties"] is False


@pytest.mark.peer
def test_adr_0002_records_the_current_peer_comparison() -> None:
    peer = load_peer_vectors("schema/context-memory-kernel.schema.json")
    text = ADR.read_text(encoding="utf-8")
    found = re.search(r"<!-- BEGIN GENERATED -->\n(.*)<!-- END GENERATED -->", text, re.S)
    assert found, "ADR 0002 lost its generated section"
    assert found.group(1) == schemas.peer_diff_markdown(peer), (
        "the schema comparison changed; paste the output of "
        "`python -m shadow.schemas --peer-diff` into ADR 0002 and explain the new rows"
    )


@pytest.mark.peer
def test_peer_comparison_notices_a_changed_peer_constraint() -> None:
    peer = copy.deepcopy(load_peer_vectors("schema/context-memory-kernel.schema.json"))
    baseline = schemas.compare_with_peer(peer)
    peer["$defs"]["ContextItem"]["properties"]["priority"]["maximum"] = 10
    peer["$defs"]["ContextMemoryBinding"]["properties"]["newFlag"] = {"type": "boolean"}
    added = set(schemas.compare_with_peer(peer)) - set(baseline)
    assert {(d.contract, d.pointer, d.peer, d.ours) for d in added} == {
        ("ContextItem", "/priority#maximum", "10", "1000000"),
        ("ItemBinding", "/newFlag", "defined", "absent"),
    }

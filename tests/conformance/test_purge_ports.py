"""One conformance suite for the PurgePort adapters (``kernel.ports.PurgePort``).

What the kernel uses of a purge port is its ``name`` (the store a deletion receipt names)
and ``purge(request)``: a receipt mapping whose ``status`` is ``purged`` once the copy is
gone, and ``purged`` again for a copy already gone (``reconcile`` re-runs every target).
The adapters: the in-memory projection store (it holds copies) and the shadow's
``ProjectionPurgePort`` (the peer's double, which holds none).  A purge never keeps the
caller's request: changing it afterwards changes nothing the port reports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kernel.adapters.in_memory.projection import InMemoryProjectionStore
from kernel.ports import PurgePort
from shadow.memory_methods import ProjectionPurgePort
from tests.kernel.test_memory_lifecycle import make

RECORD = make(memoryId="mem-1", scope="project", scopeId="project-1")


def _projection() -> PurgePort:
    store = InMemoryProjectionStore("search-index")
    store.put(RECORD, ("tokens",))
    return store


ADAPTERS: dict[str, Callable[[], PurgePort]] = {
    "projection": _projection,
    "peer-projection": lambda: ProjectionPurgePort("search-index"),
}


@pytest.fixture(params=sorted(ADAPTERS))
def port(request: pytest.FixtureRequest) -> PurgePort:
    return ADAPTERS[request.param]()


def _request(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "memoryId": "mem-1", "fence": "fence-1", "subject": "user-1",
        "selector": "memory:mem-1", "scope": "project", "scopeId": "project-1",
        "evidenceRefs": [{"kind": "message", "id": "m-1"}],
    }  # fmt: skip
    base.update(kw)
    return base


def test_adapters_satisfy_the_protocol(port: PurgePort) -> None:
    assert isinstance(port, PurgePort)
    assert isinstance(port.name, str) and port.name == "search-index"


def test_a_purge_answers_purged_and_is_idempotent(port: PurgePort) -> None:
    first = port.purge(_request())
    assert isinstance(first, dict) and first["status"] == "purged"
    assert (first["memoryId"], first["fence"]) == ("mem-1", "fence-1")
    again = port.purge(_request())
    assert again["status"] == "purged"
    absent = port.purge(_request(memoryId="mem-absent", selector="memory:mem-absent"))
    assert absent["status"] == "purged" and absent["memoryId"] == "mem-absent"


def test_a_purge_keeps_nothing_of_the_callers_request(port: PurgePort) -> None:
    request = _request()
    receipt = port.purge(request)
    kept = dict(receipt)
    request["memoryId"] = "changed"
    request["evidenceRefs"].append({"kind": "message", "id": "m-2"})
    assert receipt == kept


def test_the_projection_store_removes_exactly_the_named_copy() -> None:
    store = InMemoryProjectionStore("index")
    store.put(RECORD, ("tokens",))
    store.put(make(memoryId="mem-2", scope="project", scopeId="project-1"), ("more",))
    assert store.purge(_request())["existed"] is True
    assert "mem-1" not in store and "mem-2" in store and len(store) == 1
    payload = store.get("mem-2")
    assert payload == ("more",)

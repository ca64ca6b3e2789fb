"""The one machine pattern (``kernel/machine.py``) and the four machines built on it.

Table-driven: for every machine, every (state, event kind) pair is either an edge of its
table — ``step`` returns that target — or refused with :class:`IllegalTransition`
naming the machine, the state and the event (never ``AssertionError``).  The diagrams in
``docs/`` are the generated ones.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from kernel.compaction import machine as compaction
from kernel.errors import IllegalTransition, InvalidArgument
from kernel.machine import Machine, kind_name
from kernel.memory import deletion, lifecycle
from kernel.memory import service as memory_service

DOCS = Path(__file__).resolve().parents[2] / "docs"

TOY: Machine[str, str, str] = Machine(
    name="toy",
    initial="off",
    table={"off": {"switched": "on"}, "on": {"switched": "off", "broken": "dead"}, "dead": {}},
    effects={("off", "switched"): ("light",), ("on", "broken"): ("smoke", "call")},
)

# --------------------------------------------------------------------------- the pattern


def test_step_returns_the_target_and_the_edges_effects() -> None:
    assert TOY.step("off", "switched") == ("on", ("light",))
    assert TOY.step("on", "switched") == ("off", ())
    assert TOY.step("on", "broken") == ("dead", ("smoke", "call"))


@pytest.mark.parametrize(("state", "event"), [("off", "broken"), ("dead", "switched"), ("x", "y")])
def test_a_refused_event_names_machine_state_and_event(state: str, event: str) -> None:
    with pytest.raises(IllegalTransition) as info:
        TOY.step(state, event)
    error = info.value
    assert (error.machine, error.state, error.event) == ("toy", state, event)
    assert error.code == "illegal_transition"
    assert error.details == {"machine": "toy", "state": state, "event": event}
    assert error.to_wire()["message"] == f"toy: event {event} is not allowed in state {state}"


def test_the_table_is_frozen_whatever_it_was_given() -> None:
    rows: dict[str, dict[str, str]] = {"a": {"go": "b"}, "b": {}}
    machine: Machine[str, str, object] = Machine("m", "a", rows)
    rows["a"]["go"] = "a"  # the caller's dict changes; the machine's table does not
    assert machine.step("a", "go") == ("b", ())
    with pytest.raises(TypeError):
        machine.table["a"]["go"] = "a"  # type: ignore[index]
    with pytest.raises(TypeError):
        machine.effects[("a", "go")] = ()  # type: ignore[index]


@pytest.mark.parametrize(
    "table,effects",
    [
        ({"a": {"go": "nowhere"}}, {}),  # a target outside the table
        ({"a": {"go": "a"}}, {("a", "stop"): ("x",)}),  # effects on an edge that is not there
        ({"b": {}}, {}),  # the initial state outside the table
    ],
)
def test_edges_outside_the_table_are_refused(table: Any, effects: Any) -> None:
    with pytest.raises(InvalidArgument) as info:
        Machine("bad", "a", table, effects)
    assert info.value.details["machine"] == "bad"


def test_the_table_as_data() -> None:
    assert TOY.states == ("off", "on", "dead")
    assert TOY.terminal == frozenset({"dead"})
    assert TOY.reachable() == frozenset(TOY.states)
    assert TOY.targets("on") == frozenset({"off", "dead"})
    assert TOY.allows("on", "broken") and not TOY.allows("off", "broken")
    assert list(TOY.edges()) == [
        ("off", "switched", "on"),
        ("on", "switched", "off"),
        ("on", "broken", "dead"),
    ]
    assert TOY.diagram() == "\n".join(
        [
            "stateDiagram-v2",
            "    [*] --> off",
            "    off --> on: switched",
            "    on --> off: switched",
            "    on --> dead: broken",
            "    dead --> [*]",
        ]
    )
    assert TOY.diagram((("off", None), ("on", "wired"))).splitlines()[1:3] == [
        "    [*] --> off",
        "    [*] --> on: wired",
    ]
    assert kind_name(compaction.CasLost) == "CasLost" and kind_name("go") == "go"


# --------------------------------------------------------------------------- every machine

MACHINES: dict[str, tuple[Machine[Any, Any, Any], type[IllegalTransition]]] = {
    "compaction": (compaction.MACHINE, IllegalTransition),
    "memory": (lifecycle.MACHINE, lifecycle.IllegalMemoryTransition),
    "deletion": (deletion.OPERATION_MACHINE, IllegalTransition),
    "cutover": (memory_service.CUTOVER_MACHINE, memory_service.IllegalCutover),
}


def _pairs() -> list[tuple[str, Any, Any]]:
    out = []
    for name, (machine, _) in MACHINES.items():
        kinds = list(dict.fromkeys(k for _, k, _ in machine.edges()))
        out += [(name, s, k) for s, k in itertools.product(machine.states, kinds)]
    return out


@pytest.mark.parametrize(
    ("name", "state", "kind"), _pairs(), ids=lambda v: kind_name(v) if not isinstance(v, str) else v
)
def test_every_state_and_event_is_an_edge_or_refused(name: str, state: Any, kind: Any) -> None:
    machine, refusal = MACHINES[name]
    assert machine.name == name
    row = machine.table[state]
    if kind in row:
        assert machine.step(state, kind)[0] == row[kind]
        return
    with pytest.raises(IllegalTransition) as info:
        machine.step(state, kind)
    error = info.value
    assert type(error) is refusal
    assert (error.machine, error.state, error.event) == (name, str(state), kind_name(kind))


@pytest.mark.parametrize("name", MACHINES)
def test_every_state_is_reachable_and_some_state_is_terminal(name: str) -> None:
    machine, _ = MACHINES[name]
    assert machine.reachable() == frozenset(machine.states)
    assert machine.terminal


def test_the_derived_tables_agree_with_the_machines() -> None:
    for state, targets in lifecycle.TRANSITIONS.items():
        assert lifecycle.MACHINE.targets(state) == targets
    for kind, target in lifecycle.COMMAND_TARGETS.items():  # an edge's target is its command's
        assert all(row[kind] == target for row in lifecycle.MACHINE.table.values() if kind in row)
    for state, targets in deletion.OPERATION_TRANSITIONS.items():
        assert deletion.OPERATION_MACHINE.targets(state) == targets
    for state, targets in memory_service.STAGE_TRANSITIONS.items():
        assert memory_service.CUTOVER_MACHINE.targets(state) == targets
    assert compaction.MACHINE.table is not None
    assert dict(compaction.MACHINE.table) == dict(compaction.TRANSITIONS)


def test_wire_contracts_of_the_refusals_stay_the_peers() -> None:
    with pytest.raises(lifecycle.IllegalMemoryTransition) as memory:
        lifecycle.MACHINE.step("deleted", "delete")
    assert memory.value.to_wire() == {
        "code": "illegal_memory_transition",
        "message": "memory cannot transition from deleted to deleted",
        "details": {"from": "deleted", "to": "deleted"},
    }
    with pytest.raises(InvalidArgument) as cutover:  # still an InvalidArgument for callers
        memory_service.CUTOVER_MACHINE.step("inventory", "retired")
    assert isinstance(cutover.value, IllegalTransition)
    assert cutover.value.to_wire() == {
        "code": "invalid_argument",
        "message": "illegal cutover transition from inventory to retired",
        "details": {},
    }


# --------------------------------------------------------------------------- docs

DIAGRAMS = [
    ("compaction.md", compaction.state_diagram()),
    ("compaction.md", compaction.effects_table()),
    ("memory.md", lifecycle.state_diagram()),
    ("memory.md", deletion.OPERATION_MACHINE.diagram()),
    ("memory.md", memory_service.CUTOVER_MACHINE.diagram()),
]


@pytest.mark.parametrize(("doc", "generated"), DIAGRAMS)
def test_docs_show_the_generated_diagrams(doc: str, generated: str) -> None:
    assert generated in (DOCS / doc).read_text(encoding="utf-8")


def test_the_registry_refuses_a_cutover_the_table_does_not_allow() -> None:
    registry = memory_service.AuthorityRegistry(lambda: 0)
    binding = {
        "scopeKey": "cli:s-1",
        "surface": "cli",
        "mode": "legacy",
        "stage": "inventory",
        "writerId": "w",
        "generation": 1,
    }
    registry.bind(binding)
    registry.bind({**binding, "stage": "shadow", "generation": 2})
    leap = {**binding, "stage": "canonical_default", "generation": 3, "mode": "canonical"}
    with pytest.raises(memory_service.IllegalCutover) as info:
        registry.bind({**leap, "leaseExpiresAt": "2026-09-01T00:00:00.000Z"})
    error = info.value
    assert (error.machine, error.state, error.event) == ("cutover", "shadow", "canonical_default")
    assert isinstance(error, InvalidArgument)
    assert registry.get("cli:s-1")["stage"] == "shadow"  # type: ignore[index]

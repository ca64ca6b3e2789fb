"""One state-machine pattern for the kernel (h11's ``_state.py`` style).

A :class:`Machine` is a name, an initial state and one transition table
``state -> {event kind -> target state}``, optionally with the effects each edge emits.
:meth:`Machine.step` is its only reducer: ``(state, event kind) -> (target, effects)``,
pure; an event kind the table does not list for the current state raises
:class:`kernel.errors.IllegalTransition` naming the machine, the state and the event
(never ``AssertionError``).  :meth:`Machine.diagram` draws the table as a Mermaid
``stateDiagram-v2``, so the diagrams in ``docs/`` are generated, never drawn by hand.

The machines built on it:

* ``kernel.compaction.machine.MACHINE`` — a compaction operation (design 108 §8.1); its
  edges carry effect *types*, which the compaction reducer instantiates from the
  operation's data and ``kernel.compaction.service`` interprets, one effect at a time;
* ``kernel.memory.lifecycle.MACHINE`` — a memory record's lifecycle (§9), events are the
  ``MemoryCommand`` types;
* ``kernel.memory.deletion.OPERATION_MACHINE`` — a deletion operation (§9.4, §12.3);
* ``kernel.memory.service.CUTOVER_MACHINE`` — a scope key's cut-over stage (§16).

An event kind is a string or a class (its ``__name__`` names it); a state is a string
(``StrEnum`` members included).  The table is frozen (``MappingProxyType`` rows in a
``MappingProxyType``) by the constructor, whatever mapping it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

from kernel.errors import IllegalTransition, InvalidArgument

__all__ = ("Machine", "kind_name")

S = TypeVar("S", bound=str)
K = TypeVar("K")
X = TypeVar("X")

#: Builds the error for a refused event from ``(machine, state, event)``.
Refusal = Callable[[str, str, str], IllegalTransition]

def kind_name(kind: object) -> str:
    """How an event kind is named in errors and diagrams: a string as it is, a class by
    its ``__name__``."""
    if isinstance(kind, str):
        return kind
    name = getattr(kind, "__name__", None)
    return name if isinstance(name, str) else type(kind).__name__


@dataclass(frozen=True, slots=True)
class Machine(Generic[S, K, X]):
    """A named transition table and its reducer.

    ``table[state][kind]`` is the target of event ``kind`` in ``state``; a state whose row
    is empty is terminal.  ``effects[(state, kind)]`` are the frozen effect values (or
    effect types) that edge emits — none when absent.  ``refusal`` builds the error for
    an event the table refuses (a subclass of :class:`IllegalTransition` when a machine's
    wire contract names its own code)."""

    name: str
    initial: S
    table: Mapping[S, Mapping[K, S]]
    effects: Mapping[tuple[S, K], tuple[X, ...]] = field(default_factory=dict)
    refusal: Refusal = IllegalTransition

    def __post_init__(self) -> None:
        frozen = MappingProxyType({s: MappingProxyType(dict(row)) for s, row in self.table.items()})
        object.__setattr__(self, "table", frozen)
        object.__setattr__(self, "effects", MappingProxyType(dict(self.effects)))
        unknown: list[tuple[str, str, str]] = [
            (s, kind_name(k), t)
            for s, row in frozen.items()
            for k, t in row.items()
            if t not in frozen
        ]
        unknown += [(s, kind_name(k), "?") for s, k in self.effects if k not in frozen.get(s, {})]
        if self.initial not in frozen or unknown:
            raise InvalidArgument(
                f"machine {self.name}: edges outside its table",
                details={"machine": self.name, "edges": [list(e) for e in unknown]},
            )

    # ----------------------------------------------------------------- the reducer
    def step(self, state: S, kind: K) -> tuple[S, tuple[X, ...]]:
        """``(state, event kind) -> (target, effects)``; refuses what the table lacks."""
        try:
            row = self.table.get(state)
            target = None if row is None else row.get(kind)
        except TypeError:  # an unhashable state or event read from a store: not in the table
            target = None
        if target is None:
            named = state if isinstance(state, str) else type(state).__name__
            raise self.refusal(self.name, str(named), kind_name(kind))
        return target, self.effects.get((state, kind), ())

    def allows(self, state: S, kind: K) -> bool:
        try:
            row = self.table.get(state)
            return row is not None and kind in row
        except TypeError:  # unhashable: not in the table
            return False

    # ----------------------------------------------------------------- the table as data
    @property
    def states(self) -> tuple[S, ...]:
        return tuple(self.table)

    @property
    def terminal(self) -> frozenset[S]:
        """States no event leaves."""
        return frozenset(s for s, row in self.table.items() if not row)

    def edges(self) -> Iterator[tuple[S, K, S]]:
        """Every ``(source, kind, target)``, in table order."""
        for source, row in self.table.items():
            for kind, target in row.items():
                yield source, kind, target

    def targets(self, state: S) -> frozenset[S]:
        """The states one event can lead to from ``state``."""
        return frozenset(self.table.get(state, MappingProxyType({})).values())

    def reachable(self) -> frozenset[S]:
        """The states some sequence of events reaches from ``initial``."""
        seen, todo = {self.initial}, [self.initial]
        while todo:
            for target in self.table[todo.pop()].values():
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return frozenset(seen)

    def diagram(self, entries: tuple[tuple[S, str | None], ...] | None = None) -> str:
        """The table as a Mermaid ``stateDiagram-v2``: ``[*]`` enters at each of
        ``entries`` (``(state, label)``; default: the initial state), one arrow per edge
        labelled with its event, and every terminal state leaves to ``[*]``."""
        lines = ["stateDiagram-v2"]
        for state, label in entries or ((self.initial, None),):
            lines.append(f"    [*] --> {state}" + ("" if label is None else f": {label}"))
        lines.extend(f"    {s} --> {t}: {kind_name(k)}" for s, k, t in self.edges())
        lines.extend(f"    {s} --> [*]" for s in sorted(self.terminal))
        return "\n".join(lines)

"""Context planning under a token budget (design 108 §7): ``plan_context`` and its parts.

Public modules:

* ``drop_reasons`` — registry of the planner's drop reasons
* ``partitions`` — input-budget partitions and their ceilings
* ``planner`` — ``plan_context(request) -> ContextPlan`` (the fast path)
* ``reference`` — the planner's specification, written plainly; the fast path is tested against it
* ``tokens`` — deterministic, pluggable token estimators
* ``types`` — typed planner API over the frozen v1 contracts

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("drop_reasons", "partitions", "planner", "reference", "tokens", "types")

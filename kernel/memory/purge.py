"""The purge step of a deletion: every copy purged with its own request, every store's
answer settled into a receipt entry (design 108 §9.4, §12.3).

:func:`run_targets` purges the content object (when the record had a ``contentRef``) and
then each :class:`~kernel.ports.PurgePort`, in order, and never raises: a copy that
fails or answers anything but ``purged`` becomes a ``pending`` entry with an error code.
Each port gets a private copy of the request, and the kernel keeps a private copy of each
port's receipt, so nothing one port does reaches the next or the receipt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kernel.errors import InvalidArgument
from kernel.ports import (
    Clock,
    ContentPort,
    ContentRef,
    MemoryPort,
    NewId,
    PurgePort,
    PurgeReceipt,
    json_copy,
)

__all__ = ("DeletionContext", "port_names", "run_targets")

MAX_CODE: Final = 128


@dataclass(frozen=True, slots=True)
class DeletionContext:
    """The ports and injected values a deletion runs with."""

    memory: MemoryPort
    clock: Clock
    new_id: NewId
    content: ContentPort | None = None
    purge_ports: Sequence[PurgePort] = ()
    #: :func:`port_names` of ``purge_ports`` when already read (a batch reads them once);
    #: ``None``: read them for each deletion.
    purge_names: tuple[str, ...] | None = None


def _js_string(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _receipt_value(value: Any) -> dict[str, Any] | None:
    if type(value) is dict:
        return _private_copy(value)
    if isinstance(value, PurgeReceipt):
        return {
            "store": value.store,
            "status": value.status,
            "objectId": value.object_id,
            "fence": value.fence,
            "existed": value.existed,
        }
    if isinstance(value, Mapping):
        return json_copy(dict(value))
    return None


_FLAT_SCALARS: Final = frozenset({str, int, bool, type(None)})


def _private_copy(value: dict[str, Any]) -> dict[str, Any]:
    """``json_copy(value)`` of a dict: a shallow copy when every value is a string, an
    integer, a boolean or ``null`` (immutable: the shallow copy *is* a deep one)."""
    if _FLAT_SCALARS.issuperset(map(type, value.values())):
        return dict(value)
    return json_copy(value)


def _pending(store: str, code: Any) -> dict[str, Any]:
    return {"store": store, "status": "pending", "error": {"code": _js_string(code)[:MAX_CODE]}}


def _settled(store: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """One store entry from a purge's (privately copied) receipt: ``purged`` with it, or
    ``pending`` with an error code."""
    if value is not None and value.get("status") == "purged":
        return {"store": store, "status": "purged", "receipt": value}
    return _pending(store, (value or {}).get("code") or "purge_receipt_invalid")


def _failed(store: str, exc: Exception) -> dict[str, Any]:
    """One store entry for a purge that raised: ``pending`` with its error code."""
    return _pending(store, getattr(exc, "code", None) or "purge_failed")


def _settle(store: str, run: Callable[[], Any]) -> dict[str, Any]:
    """One store entry: ``purged`` with its receipt, or ``pending`` with an error code."""
    try:
        value = _receipt_value(run())
    except Exception as exc:  # a failing copy is a pending store, never a crash
        return _failed(store, exc)
    return _settled(store, value)


def _purge_request(operation: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """``{memoryId, fence, subject, selector, scope, scopeId?, evidenceRefs}``, a private
    deep copy, and whether its evidence references are flat objects of scalars
    (:func:`_flat_refs`: then a shallow copy of each is a deep one)."""
    request: dict[str, Any] = {
        "memoryId": operation["memoryId"],
        "fence": operation["fence"],
        "subject": operation["subject"],
        "selector": operation["selector"],
        "scope": operation["scope"],
    }
    if operation.get("scopeId"):
        request["scopeId"] = operation["scopeId"]
    refs = operation.get("evidenceRefs") or []
    if type(refs) is list and _flat_refs(refs):
        request["evidenceRefs"] = _copy_flat_refs(refs)
        return request, True
    request["evidenceRefs"] = list(refs)
    return json_copy(request), False


def _copy_flat_refs(refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of flat evidence references (:func:`_flat_refs`): each one copied shallowly
    (a record usually has one)."""
    return [dict(refs[0])] if len(refs) == 1 else list(map(dict, refs))


def _flat_refs(refs: list[Any]) -> bool:
    """Whether every evidence reference is a flat object of strings, integers, booleans and
    ``null`` (a verified record's always are): then a shallow copy of each is a deep one."""
    scalars = _FLAT_SCALARS
    return all(type(ref) is dict and scalars.issuperset(map(type, ref.values())) for ref in refs)


def port_names(ports: Sequence[PurgePort]) -> tuple[str, ...]:
    """The store name each purge port reports in a receipt (``projection-<index>`` for an
    empty name, as the peer)."""
    return tuple(str(port.name or f"projection-{index}") for index, port in enumerate(ports))


def run_targets(ctx: DeletionContext, operation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Purge every copy (content first, then each purge port, in order); never raises.
    Each port gets its own copy of the request: what one port does with it cannot reach
    the next (the copies are taken from a private one, which the last port gets).
    Returns the store entries."""
    entries: list[dict[str, Any]] = []
    ref = operation.get("contentRef")
    if ref:

        def purge_content() -> Any:
            if ctx.content is None:
                raise InvalidArgument("ContentPort is required to purge memory contentRef")
            return ctx.content.purge(ContentRef.from_wire(ref), operation["fence"])

        entries.append(_settle(str(ref["store"]), purge_content))
    ports = ctx.purge_ports
    if not ports:
        return entries
    request, flat = _purge_request(operation)
    refs = request["evidenceRefs"]
    scalars = _FLAT_SCALARS
    names = ctx.purge_names if ctx.purge_names is not None else port_names(ports)
    after = len(ports)  # ports still to run after the current one
    for name, port in zip(names, ports, strict=True):
        after -= 1
        if not after:
            own = request  # no port after this one: the private copy itself
        elif flat:
            own = dict(request)
            own["evidenceRefs"] = _copy_flat_refs(refs)
        else:
            own = json_copy(request)
        try:
            value = port.purge(own)
            # a flat receipt (the common shape) is copied inline, anything else in full
            if type(value) is dict and scalars.issuperset(map(type, value.values())):
                value = dict(value)
            else:
                value = _receipt_value(value)
        except Exception as exc:  # a failing copy is a pending store, never a crash
            entries.append(_failed(name, exc))
        else:
            if value is not None and value.get("status") == "purged":
                entries.append({"store": name, "status": "purged", "receipt": value})
            else:
                entries.append(_settled(name, value))
    return entries

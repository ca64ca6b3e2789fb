"""The kernel's language-agnostic entry point: one JSON request -> one JSON result.

``call(method, params)`` returns ``{"result": ...}`` or ``{"error": {code, message,
details}}``; it never raises for bad input.  Methods are registered in
``METHODS`` as they are built (digest, plan_context, compact_context, …); each
takes the wire-format params (the peer vectors' ``request`` objects as is).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kernel.canonical import digest as kdigest
from kernel.errors import KernelError
from shadow.boundary import loads
from shadow.errors import InputError, ShadowError

Method = Callable[[Any], Any]


def _require_object(params: Any, method: str) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise InputError(f"<{method} params>", "", "a JSON object", type(params).__name__)
    return params


def _digest(params: Any) -> dict[str, Any]:
    p = _require_object(params, "digest")
    unknown = sorted(set(p) - {"value", "domain", "profile"})
    if unknown:
        raise InputError("<digest params>", f"/{unknown[0]}", "only value, domain, profile",
                         "an unknown field")
    if "value" not in p:
        raise InputError("<digest params>", "/value", "a JSON value", "nothing")
    domain = p.get("domain", kdigest.DEFAULT_DOMAIN)
    if not isinstance(domain, str):
        raise InputError("<digest params>", "/domain", "a string", type(domain).__name__)
    profile = p.get("profile", "jcs")
    if profile not in ("jcs", "peer"):
        raise InputError("<digest params>", "/profile", '"jcs" or "peer"', repr(profile))
    canonical = kdigest.canonical_json(p["value"], profile)
    return {
        "digest": kdigest.digest(p["value"], domain, profile),
        "canonicalJson": canonical,
    }


METHODS: dict[str, Method] = {"digest": _digest}


def register(name: str, fn: Method) -> None:
    METHODS[name] = fn


def _load_optional_methods() -> None:
    """Import shell modules that register further methods (built by later work)."""
    import importlib

    for mod in ("shadow.kernel_methods", "shadow.memory_methods"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


def error_wire(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, KernelError):
        return exc.to_wire()
    if isinstance(exc, InputError):
        return exc.to_wire()
    if isinstance(exc, ShadowError):
        return {"code": exc.code, "message": str(exc), "details": {}}
    if isinstance(exc, RecursionError):
        return {"code": "invalid_argument", "message": "value nested too deeply", "details": {}}
    return {
        "code": "internal_error",
        "message": f"unexpected {type(exc).__name__}",
        "details": {},
    }


def call(method: str, params: Any) -> dict[str, Any]:
    _load_optional_methods()
    fn = METHODS.get(method)
    if fn is None:
        return {"error": {"code": "unknown_method", "message": f"unknown method {method!r}",
                          "details": {"known": sorted(METHODS)}}}
    try:
        return {"result": fn(params)}
    except Exception as exc:  # every failure becomes a typed error value
        return {"error": error_wire(exc)}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def batch(lines: Iterable[str], source: str = "<stdin>") -> Iterator[str]:
    """JSON Lines ``{"id", "method", "params"}`` -> one result line per request, in order."""
    _load_optional_methods()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        rid: Any = None
        try:
            req = loads(line, f"{source}:{lineno}")
            if not isinstance(req, dict):
                raise InputError(f"{source}:{lineno}", "", "a JSON object", type(req).__name__)
            rid = req.get("id")
            method = req.get("method")
            if not isinstance(method, str):
                raise InputError(f"{source}:{lineno}", "/method", "a method name string",
                                 type(method).__name__)
            out = call(method, req.get("params"))
        except InputError as exc:
            out = {"error": exc.to_wire()}
        yield dumps({"id": rid, **out})

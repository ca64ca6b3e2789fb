"""The protocol's schema, ``protocol.v1.json``: the one description of every method,
notification and error of ``shadow app-server``.

The server validates each request's params with its method's ``params`` schema (JSON
Schema 2020-12, :mod:`jsonschema`) before the method runs, and
``docs/app-server-reference.md`` is generated from the same file
(:mod:`shadow.app_server.reference`; a test keeps the two in step).  A violation is
``-32602`` whose ``data`` names where and what was expected — ``pointer`` (RFC 6901),
``keyword``, ``expected``, and for unknown or missing members their names — never a value
the client sent.  Methods whose params are the kernel's own requests (``context/plan``,
``memory/*`` of the design's API, ``reconcile``) are only required to be objects here:
the kernel validates them itself, as it does for ``shadow kernel call``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from shadow.app_server import protocol as rpc

SCHEMA_FILE: Final = Path(__file__).resolve().with_name("protocol.v1.json")


def load() -> dict[str, Any]:
    """The schema document (the file is part of the package)."""
    doc = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _data(err: ValidationError) -> dict[str, Any]:
    """What ``err`` says, from the schema's side only: the instance is never echoed."""
    keyword, value, instance = str(err.validator), err.validator_value, err.instance
    data: dict[str, Any] = {"pointer": _pointer(err.absolute_path), "keyword": keyword}
    if keyword == "additionalProperties" and isinstance(instance, dict):
        known = set((err.schema.get("properties") or {}) if isinstance(err.schema, dict)
                    else ())
        data["unknown"] = sorted(str(k) for k in instance if k not in known)
        data["expected"] = "only " + (", ".join(sorted(known)) or "no members")
    elif keyword == "required" and isinstance(instance, dict) and isinstance(value, list):
        data["missing"] = sorted(str(r) for r in value if r not in instance)
        data["expected"] = "members " + ", ".join(str(r) for r in value)
    elif keyword == "type":
        data["expected"] = f"a JSON {value}"
    else:
        data["expected"] = f"{keyword} {json.dumps(value, ensure_ascii=False)}"
    return data


@dataclass(frozen=True)
class Schema:
    """The methods' params validators, built once per server from :func:`load`."""

    doc: Mapping[str, Any] = field(default_factory=load)
    validators: Mapping[str, Draft202012Validator] = field(init=False)

    def __post_init__(self) -> None:
        Draft202012Validator.check_schema(self.doc)
        built = {}
        for name, spec in self.doc["methods"].items():
            Draft202012Validator.check_schema(spec["params"])
            built[name] = Draft202012Validator(spec["params"])
        object.__setattr__(self, "validators", built)

    def methods(self) -> list[str]:
        return sorted(self.doc["methods"])

    def check(self, method: str, params: Any) -> None:
        """Raise ``-32602`` unless ``params`` (absent: ``{}``) fit ``method``'s schema."""
        validator = self.validators[method]
        errors = sorted(validator.iter_errors({} if params is None else params),
                        key=lambda e: (list(map(str, e.absolute_path)), str(e.validator)))
        if errors:
            data = _data(errors[0])
            raise rpc.InvalidParams(f"{method} params at {data['pointer'] or '/'}: expected "
                                    f"{data['expected']}", data)

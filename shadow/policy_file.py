"""The strict skeleton shared by the reviewed policy files (waivers, intended differences,
retired entry points).

Both are ``{"schema": ..., "<entries>": [{...}, ...]}`` documents whose entries have a
unique ``id``, documented fields only and some required non-empty strings; every error
names the file, the JSON pointer and what was expected.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from shadow.errors import InputError


def entries(doc: Any, src: str, *, schema: str, key: str, noun: str,
            fields: Sequence[str], required: Sequence[str],
            top: Sequence[str] | None = None, ident: str = "id"
            ) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(pointer, entry) for each entry of ``doc[key]``, checked as the module says
    (``top``: the only top-level fields allowed, when given; ``ident``: the field that
    names an entry, unique)."""
    if not isinstance(doc, Mapping) or doc.get("schema") != schema:
        raise InputError(src, "/schema", repr(schema), "something else")
    if top is not None:
        unknown = sorted(set(doc) - set(top))
        if unknown:
            raise InputError(src, f"/{unknown[0]}", "only " + ", ".join(top),
                             "an unknown field")
    raw = doc.get(key)
    if not isinstance(raw, list):
        raise InputError(src, f"/{key}", f"an array of {key}", type(raw).__name__)
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        ptr = f"/{key}/{i}"
        if not isinstance(entry, Mapping):
            raise InputError(src, ptr, f"a {noun} object", type(entry).__name__)
        extra = sorted(set(entry) - set(fields))
        if extra:
            raise InputError(src, f"{ptr}/{extra[0]}", "only " + ", ".join(fields),
                             "an unknown field")
        for name in required:
            if not isinstance(entry.get(name), str) or not entry[name].strip():
                raise InputError(src, f"{ptr}/{name}", "a non-empty string",
                                 "nothing" if name not in entry else type(entry[name]).__name__)
        if entry[ident] in seen:
            raise InputError(src, f"{ptr}/{ident}", f"a unique {noun} {ident}", "a duplicate")
        seen.add(entry[ident])
        yield ptr, entry


def iso_date(value: str, src: str, ptr: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise InputError(src, ptr, "a date YYYY-MM-DD", "another format") from None

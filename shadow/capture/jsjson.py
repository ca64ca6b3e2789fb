"""The byte format of capture files: ``JSON.stringify(value, null, 2)`` and a final newline.

Capture files are written by the Node drivers themselves; the files this package writes
(``input.json``, ``MANIFEST.json``) use the kernel's own ``JSON.stringify``
(:mod:`kernel.canonical.jsjson`), so a recapture is byte-identical.
"""

from __future__ import annotations

from typing import Any

from kernel.canonical.jsjson import js_stringify

__all__ = ["dumps"]


def dumps(value: Any) -> str:
    """The text of ``JSON.stringify(value, null, 2)`` plus the final newline captures end with."""
    return js_stringify(value, indent=2) + "\n"

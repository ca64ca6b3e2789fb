"""The four memory tools as methods (second seed §1): ``memory/list``, ``memory/read``,
``memory/search``, ``memory/addNote`` over the memory store folder (``--memory DIR``).

Each is the memory folder's own tool (:func:`shadow.bootstrap.memory_folder`) with its
path rules: relative paths only, no hidden name, link or traversal, only the readable
areas (``MEMORY.md``, ``memory_summary.md``, ``rollout_summaries/``, the notes);
``memory/addNote`` writes a new ad-hoc note only (never ``MEMORY.md`` or the summary) and
refuses secret material.  Params are checked by the server against ``protocol.v1.json``
(:mod:`shadow.app_server.schema`); a refusal of the folder is ``-32602`` with the
kernel's code and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kernel.errors import KernelError
from shadow.app_server import protocol as rpc

NO_FOLDER: Final = -32000
METHODS: Final = ("memory/list", "memory/read", "memory/search", "memory/addNote")


@dataclass
class MemoryTools:
    root: Path | None

    def call(self, method: str, params: Any) -> Any:
        """Run a tool; its params already fit ``protocol.v1.json`` (the server checked)."""
        params = params or {}
        if self.root is None:
            raise rpc.RpcError(NO_FOLDER, "No memory folder",
                               {"expected": "shadow app-server --memory DIR"})
        from shadow import bootstrap

        folder = bootstrap.memory_folder(self.root)
        run: Mapping[str, Callable[[], Any]] = {
            "memory/list": lambda: folder.memory_list(params.get("path", "")),
            "memory/read": lambda: folder.memory_read(
                params["path"], start_line=params.get("startLine"),
                end_line=params.get("endLine")),
            "memory/search": lambda: folder.memory_search(params["query"],
                                                          limit=params.get("limit", 10)),
            "memory/addNote": lambda: folder.memory_add_note(params["title"], params["body"]),
        }
        try:
            return run[method]()
        except KernelError as exc:
            raise rpc.InvalidParams(str(exc), {"kernelError": exc.code,
                                               "details": dict(exc.details or {})}) from None

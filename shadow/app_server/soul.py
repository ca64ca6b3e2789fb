"""Soul through the app server, kept in the app configuration file (``--config FILE``,
key ``memory.soul``) — never in the memory store folder (:mod:`kernel.memory.soul`).

``soul/get`` ``{persona?}`` (a persona sees the rhythm only, read-only),
``soul/importPreview`` ``{source}`` (a ``SOUL.md`` text → the parsed config, warnings and a
token), ``soul/importApply`` ``{token}`` (saves exactly a result previewed on this
connection; an expert persona can never write), ``soul/artifactBrief`` ``{task}`` (a
``generation_brief_only`` brief: nothing is written).  The file is replaced atomically;
its other keys are kept as they were.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kernel.errors import KernelError
from kernel.memory import soul as soul_mod
from shadow.app_server import protocol as rpc

NO_CONFIG: Final = -32000
PREVIEWS: Final = 16  # previews a connection remembers (the oldest goes first)
METHODS: Final = ("soul/get", "soul/importPreview", "soul/importApply", "soul/artifactBrief")


def _only(params: Any) -> dict[str, Any]:
    """The params (already checked against ``protocol.v1.json`` by the server)."""
    return {} if params is None else dict(params)


@dataclass
class SoulConfig:
    """The app configuration file's ``memory.soul``, and this connection's previews."""

    path: Path | None
    previews: OrderedDict[str, dict[str, str]] = field(default_factory=OrderedDict)

    def _doc(self) -> dict[str, Any]:
        if self.path is None:
            raise rpc.RpcError(NO_CONFIG, "No app configuration",
                               {"expected": "shadow app-server --config FILE"})
        if not self.path.exists():
            return {}
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            raise rpc.RpcError(NO_CONFIG, "The app configuration is unreadable",
                               {"expected": "a JSON object in --config"}) from None
        if not isinstance(doc, dict):
            raise rpc.RpcError(NO_CONFIG, "The app configuration is unreadable",
                               {"expected": "a JSON object in --config"})
        return doc

    def current(self) -> dict[str, str]:
        memory = self._doc().get("memory", {})
        stored = memory.get("soul") if isinstance(memory, Mapping) else None
        return soul_mod.check_config(stored) if stored is not None else soul_mod.empty()

    def _save(self, soul: dict[str, str]) -> None:
        doc = self._doc()
        memory = doc.get("memory")
        doc["memory"] = {**(memory if isinstance(memory, dict) else {}), "soul": soul}
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                json.dump(doc, fh, ensure_ascii=False, indent=1, sort_keys=True)
                fh.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def call(self, method: str, params: Any) -> Any:
        try:
            return self._call(method, params)
        except KernelError as exc:
            raise rpc.InvalidParams(str(exc), {"kernelError": exc.code,
                                               "details": dict(exc.details or {})}) from None

    def _call(self, method: str, params: Any) -> Any:
        if method == "soul/get":
            p = _only(params)
            cur = self.current()
            return {"soul": cur} if "persona" not in p else soul_mod.persona_view(
                cur, p["persona"])
        if method == "soul/importPreview":
            p = _only(params)
            preview = soul_mod.preview_import(p["source"])
            self.previews[preview["token"]] = preview["soul"]
            while len(self.previews) > PREVIEWS:
                self.previews.popitem(last=False)
            return preview
        if method == "soul/importApply":
            p = _only(params)
            soul_mod.check_write(p.get("persona"))
            previewed = self.previews.get(str(p["token"]))
            if previewed is None:
                raise rpc.InvalidParams("only a previewed import can be applied",
                                        {"field": "token",
                                         "expected": "a token soul/importPreview gave"})
            self._save(previewed)
            del self.previews[str(p["token"])]
            return {"soul": previewed}
        p = _only(params)
        return soul_mod.artifact_brief(self.current(), p["task"])

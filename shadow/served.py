"""The served surfaces of ``shadow run``: the kernel's side of a fixture again, through
``shadow app-server`` as a subprocess (surface ``app-server``: raw protocol lines) and
through the Python SDK (:mod:`shadow.sdk`, surface ``sdk``), compared with the
in-process kernel on design 108 §14's terms.

For every capture the live kernel projects with its planner (session and IDE fixtures:
``cli.*``, ``desktop.*``, ``vscode.*``, ``jetbrains.*``), each ``plan_context`` call the
in-process kernel made (:meth:`~shadow.candidate.KernelCandidate.recording`) is sent again
over the wire: ``context/plan`` written as a JSON-RPC line by hand (``app-server``) or sent
by :meth:`shadow.sdk.Client.plan_context` (``sdk``).  Its case is ``<surface>.<capture>``
(``sdk.cli.compress``; top surface ``sdk``).  It passes when every served answer is the
in-process one (the same ContextPlan, or a refusal with the same code and details): the
served projection is then the in-process one by construction.  Otherwise the capture is
projected again through that surface and judged by the ordinary comparison
(:func:`shadow.divergence.compare.compare`: item identities and order, drop reasons, tool
pairs and pending state, output digests, provider outcome); ``served.mismatch`` names
the projection fields, or the plan members, that differ when no other code does.  A
server that ends, hangs or refuses makes ``served.unavailable`` (always blocking).  The
memory-lifecycle fixtures (``session-core.*``) are not served yet: the kernel's memory
side runs one stateful :class:`kernel.memory.service.MemoryKernel` per fixture, which
the stateless ``memory/*`` methods do not carry (docs/app-server.md, "In shadow run").

The server process is this process's (:func:`for_this_process`): opened on first use,
reused by every fixture judged here, opened again after it was lost, and ended when the
process ends (or by :func:`close_process`: the serial executor ends it with its run).
It holds no result between calls — ``context/plan`` is stateless — so reusing it
changes nothing judged, only the cost of starting a Python interpreter per fixture.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import multiprocessing.util
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kernel.errors import KernelError
from shadow.divergence import Divergence, make
from shadow.divergence.compare import compare
from shadow.projection import Projection, to_wire
from shadow.sdk import Client, ServerError, ServerGone, result_of

SURFACES: Final = ("app-server", "sdk")
__all__ = ["SURFACES", "Served", "close_process", "for_this_process", "judge", "wanted"]


def wanted(capture: str, patterns: Sequence[str]) -> tuple[str, ...]:
    """The served surfaces a ``--surface`` selection asks for, for one capture: all of
    them when nothing is selected, else those a pattern names (``sdk``, ``sdk.cli.*``)."""
    if not patterns:
        return SURFACES
    return tuple(s for s in SURFACES if any(
        fnmatch.fnmatchcase(s, p) or fnmatch.fnmatchcase(f"{s}.{capture}", p)
        for p in patterns))


@dataclass
class Served:
    """One ``shadow app-server`` process and the SDK client connected to it."""

    timeout: float = 60.0
    _client: Client | None = field(default=None, repr=False)
    _wire_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def client(self) -> Client:
        if self._client is not None and not self._client.connection.alive:
            self.close()
        if self._client is None:
            self._client = Client.spawn(timeout=self.timeout)
        return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                client, self._client = self._client, None
                client.close()

    def planner(self, surface: str) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        """``plan_context`` over the wire for ``surface``; one call at a time (a Dask worker
        may run several threads: one request and its answer never interleave)."""
        def plan(request: Mapping[str, Any]) -> dict[str, Any]:
            with self._lock:
                if surface == "sdk":
                    return self.client().plan_context(request)
                return self._wire_plan(request)
        return plan

    def _wire_plan(self, request: Mapping[str, Any]) -> dict[str, Any]:
        conn = self.client().connection
        ident = f"wire-{next(self._wire_ids)}"
        conn.send_line(json.dumps({"jsonrpc": "2.0", "id": ident, "method": "context/plan",
                                   "params": request}, ensure_ascii=False,
                                  separators=(",", ":")).encode("utf-8"))
        result = result_of(conn.receive(), ident)
        if not isinstance(result, dict):
            raise ServerGone("context/plan answered something that is not an object")
        return result


_PROCESS: list[Served] = []  # at most one: this process's server (see the module docstring)


_OPENING = threading.Lock()  # two threads of one worker never start two servers


def for_this_process() -> Served:
    """This process's :class:`Served` (one per process: the driver, a pool worker, a Dask
    worker, whatever its threads), ended with the process."""
    with _OPENING:
        if not _PROCESS:
            served = Served()
            _PROCESS.append(served)
            multiprocessing.util.Finalize(served, served.close, exitpriority=10)
        return _PROCESS[0]


def close_process() -> None:
    """End this process's server now (the next served fixture starts another)."""
    while _PROCESS:
        _PROCESS.pop().close()


def _differences(fx: str, case: str, remote: Projection, local: Projection
                 ) -> list[Divergence]:
    a, b = to_wire(remote), to_wire(local)
    if a == b:
        return []
    changed = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
    divs = [d for d in compare(remote, local, (), (), surface=case)]
    if not any(not d.reason_code.startswith("noise.") for d in divs):
        divs.append(make(fx, case, "served.mismatch", "candidate", (),
                         {"fields": changed, "attribution_reason": "the served kernel's "
                          "projection differs from the in-process kernel's"}))
    return divs


def _answer(plan: Callable[[Mapping[str, Any]], dict[str, Any]],
            request: Mapping[str, Any]) -> Any:
    """The served planner's answer to ``request``: the plan, or the kernel's refusal."""
    try:
        return plan(request)
    except KernelError as exc:
        return exc


def _differing(got: Any, local: Any) -> set[str]:
    """``plan.<member>`` names where one served answer differs from the in-process one
    (``plan.error`` for a refusal on one side, or a different refusal); empty if equal."""
    if isinstance(got, dict) and isinstance(local, dict):
        return {f"plan.{k}" for k in {*got, *local} if got.get(k) != local.get(k)}
    if isinstance(got, KernelError) and isinstance(local, KernelError) and (
            got.code, got.details) == (local.code, local.details):
        return set()
    return {"plan.error"}


def judge(candidate: Any, served: Served, canon: Any, capture: Any,
          siblings: Mapping[str, Any], local: Projection, calls: Sequence[Any],
          surfaces: Sequence[str]) -> tuple[list[str], list[Divergence]]:
    """The served cases of one capture: (case names, divergences).  ``candidate`` is the
    in-process :class:`~shadow.candidate.KernelCandidate`, ``local`` its projection and
    ``calls`` its planner's calls (:meth:`~shadow.candidate.KernelCandidate.recording`).

    Each call is sent again over the surface.  When every answer is the in-process one,
    the served projection is the same by construction (the candidate is a function of
    its inputs and its planner's answers, and each request follows from the answers
    before it), so nothing more is run.  Otherwise the whole capture is projected through
    the surface and compared; a plan difference the projection does not show is
    ``served.mismatch`` naming the plan's differing members."""
    fx = canon.name
    cases: list[str] = []
    divs: list[Divergence] = []
    for surface in surfaces:
        case = f"{surface}.{capture.name}"
        cases.append(case)
        plan = served.planner(surface)
        try:
            fields = sorted(set().union(*(_differing(_answer(plan, request), out)
                                          for request, out in calls)))
            if not fields:
                continue
            remote = candidate.with_planner(plan).project(canon, capture, siblings)
            found = _differences(fx, case, remote, local)
            if not found:
                found = [make(fx, case, "served.mismatch", "candidate", (), {
                    "fields": fields,
                    "attribution_reason": "the served kernel's plan differs from the "
                    "in-process kernel's for the same request"})]
        except (ServerGone, ServerError, OSError) as exc:
            served.close()  # the next call starts a fresh server
            code = getattr(exc, "code", None)
            found = [make(fx, case, "served.unavailable", "candidate", (), {
                "error": type(exc).__name__, **({"rpc_code": code} if code else {}),
                "problem": str(exc) if isinstance(exc, ServerGone) else "error answer",
                "attribution_reason": "the served kernel gave no projection to judge"})]
        divs += found
    return cases, divs

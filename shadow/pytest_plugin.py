"""pytest plugin (entry point ``pytest11``): ``pytest --shadow``.

Inactive unless ``--shadow`` is given.  With it, the shadow run is replayed once at
collection and every fixture × surface becomes a test item with a readable id,
``shadow::<fixture>::<surface>`` (marker ``shadow``; ``-k`` and ``-m`` work as usual), plus
one item ``shadow::gate::phase<N>``.  Only these items are collected unless
``--shadow-all`` asks for the project's own tests as well.

Outcomes come from the one failure rule (:mod:`shadow.gates.rule`) at ``--shadow-phase``,
as the run judged them — the same as junit.xml's testcases and the reports: a case item
fails when its case fails; twin (legacy-vs-legacy) cases never fail; the gate item fails
when ``shadow gate --phase N --platforms <this platform>`` would answer NO-GO on the run's
evidence (a missing check, too few fixtures), so ``pytest --shadow`` is green exactly when
``shadow run --phase N`` exits 0.  The reports are written to ``--shadow-out``.

Entry point only: parsing options, calling :mod:`shadow.run`, printing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

_KEY = pytest.StashKey["ShadowSession"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("shadow", "shadow evaluation (context-kernel-parity)")
    group.addoption("--shadow", action="store_true", default=False,
                    help="replay the shadow fixtures; one test per fixture × surface")
    group.addoption("--shadow-fixtures", default="fixtures", metavar="DIR",
                    help="fixture folder (default: fixtures)")
    group.addoption("--shadow-phase", type=int, default=1, metavar="N",
                    help="cutover phase 0..5 whose policy rules items are judged by")
    group.addoption("--shadow-out", default="reports/latest", metavar="DIR",
                    help="where the reports are written at session end")
    group.addoption("--shadow-waivers", default=None, metavar="FILE", help="waiver file")
    group.addoption("--shadow-intended", default=None, metavar="FILE",
                    help="intended-difference rules (default: the bundled file)")
    group.addoption("--shadow-candidate", default="kernel", metavar="kernel|DIR",
                    help="the candidate: the live kernel, or a recorded candidate folder")
    group.addoption("--shadow-recordings", default=None, metavar="DIR",
                    help="recorded provider exchanges (default: recordings/ when it exists)")
    group.addoption("--shadow-no-recordings", action="store_true", default=False,
                    help="do not use recordings/ even when it exists")
    group.addoption("--shadow-all", action="store_true", default=False,
                    help="collect the project's own tests too (default: only shadow items)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``--shadow`` only the shadow items are collected (unless ``--shadow-all``)."""
    if config.getoption("shadow") and not config.getoption("shadow_all"):
        return True
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "shadow: a shadow fixture × surface case (--shadow)")
    if config.getoption("shadow"):
        phase = config.getoption("shadow_phase")
        if phase not in range(6):
            raise pytest.UsageError(f"--shadow-phase must be 0..5, got {phase}")
        session = ShadowSession(config)
        config.stash[_KEY] = session
        config.pluginmanager.register(session, "shadow-session")


class ShadowCaseFailure(Exception):
    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


class ShadowFixture(pytest.Collector):
    """One fixture: its surfaces are the items."""

    def collect(self) -> Iterator[pytest.Item]:  # pragma: no cover - built eagerly
        return iter(())


class ShadowCase(pytest.Item):
    def __init__(self, *, fixture: str, surface: str, case: Mapping[str, Any],
                 divergences: Sequence[Mapping[str, Any]], phase: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.fixture, self.surface, self.case, self.phase = fixture, surface, case, phase
        self.divergences = list(divergences)
        self.add_marker("shadow")

    def runtest(self) -> None:
        if self.case.get("outcome") == "fail":
            failing = set(self.case.get("failing", []))
            raise ShadowCaseFailure([
                f"{d.get('id', '')} {d['severity']} {d['reason_code']} [{d['attribution']}] "
                f"{len(d.get('item_ids', []))} items {d.get('detail', {})}"
                for d in self.divergences if d.get("id") in failing])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, ShadowCaseFailure):
            from shadow.reports.views import case_anchor

            level = self.case.get("fail_at") or "a quarantine or NO-GO class only"
            head = (f"{self.fixture} / {self.surface}: fails at phase {self.phase} (fail at "
                    f"{level}; report.html#{case_anchor(self.fixture, self.surface)})")
            return "\n".join([head, *("  " + x for x in excinfo.value.lines)])
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"shadow {self.fixture} / {self.surface}"


class ShadowGate(pytest.Item):
    """The phase's other requirements (checks, evidence, fixture counts) as one item."""

    def __init__(self, *, step: Mapping[str, Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.step = step
        self.add_marker("shadow")

    def runtest(self) -> None:
        if self.step.get("verdict") != "GO":
            raise ShadowCaseFailure([f"{q['code']} {q['name']}: {q['message']}"
                                     for q in self.step.get("requirements", [])
                                     if q.get("status") != "pass"])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, ShadowCaseFailure):
            head = f"phase {self.step.get('phase')} ({self.step.get('title')}): NO-GO"
            return "\n".join([head, *("  " + x for x in excinfo.value.lines)])
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"shadow gate phase {self.step.get('phase')}"


class ShadowSession:
    """State of one ``pytest --shadow`` session (registered only when active)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.result: Any = None

    def _recordings(self) -> str | None:
        from shadow.run import default_recordings

        opt = self.config.getoption
        if opt("shadow_no_recordings"):
            return None
        return opt("shadow_recordings") or default_recordings(
            Path(self.config.invocation_params.dir))

    def _run(self) -> Any:
        from shadow.errors import ShadowError
        from shadow.run import RunOptions, execute

        opt = self.config.getoption
        out = Path(opt("shadow_out"))
        if not out.is_absolute():
            out = Path(self.config.invocation_params.dir) / out
        try:
            return execute(RunOptions(fixtures=opt("shadow_fixtures"), out=str(out),
                                      recordings=self._recordings(),
                                      phase=opt("shadow_phase"),
                                      waivers=opt("shadow_waivers"),
                                      intended=opt("shadow_intended"),
                                      candidate=opt("shadow_candidate")))
        except ShadowError as exc:
            raise pytest.UsageError(f"shadow: {exc}") from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        self.result = self._run()
        report = self.result.report
        phase = int(report["phase"])
        by_case: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for d in report["divergences"]:
            by_case.setdefault((d["fixture"], d["surface"]), []).append(d)
        nodes: dict[str, tuple[pytest.Collector, list[pytest.Item | pytest.Collector]]] = {}
        for case in report.get("cases", []):
            fx, sf = case["fixture"], case["surface"]
            if fx not in nodes:
                nodes[fx] = (ShadowFixture.from_parent(session, name=fx,
                                                       nodeid=f"shadow::{fx}"), [])
            nodes[fx][1].append(ShadowCase.from_parent(
                nodes[fx][0], name=sf, fixture=fx, surface=sf, case=case,
                divergences=by_case.get((fx, sf), []), phase=phase))
        step = next((s for s in report.get("ladder", []) if s["phase"] == phase), None)
        if step is not None:
            gate_node = ShadowFixture.from_parent(session, name="gate", nodeid="shadow::gate")
            nodes["\uffff"] = (gate_node, [ShadowGate.from_parent(
                gate_node, name=f"phase{phase}", step=step)])
        for node, children in nodes.values():
            # report the collection like any collector does ("collected N items")
            session.ihook.pytest_collectreport(report=pytest.CollectReport(
                node.nodeid, "passed", None, children))
            items.extend(c for c in children if isinstance(c, pytest.Item))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.result is None:
            return
        tr = terminalreporter
        tr.section("shadow")
        for line in self.result.lines:
            tr.write_line(line)
        tr.write_line(f"verdict: {self.result.verdict} (phase {self.result.report['phase']})")

"""pytest plugin (entry point ``pytest11``): ``pytest --shadow``.

Inactive unless ``--shadow`` is given.  With it, the shadow run is replayed once at
collection and every fixture × surface becomes a test item with a readable id,
``shadow::<fixture>::<surface>`` (marker ``shadow``; ``-k`` and ``-m`` work as usual).
An item fails when its case has an unwaived ``blocking`` divergence, or — for the
surfaces the phase's policy rules judge (``--shadow-phase N``, rules inherited) — a
divergence at or above that rule's severity.  At session end the reports
(report.json, evidence.json, report.md, report.html, junit.xml) are written to
``--shadow-out`` and a short summary is printed, with this platform's gate verdict.

Entry point only: parsing options, calling :mod:`shadow.run` and :mod:`shadow.gates`,
printing.  All logic lives there.
"""

from __future__ import annotations

import shutil
import tempfile
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
    def __init__(self, *, fixture: str, surface: str, divergences: Sequence[Mapping[str, Any]],
                 fail_at: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.fixture, self.surface = fixture, surface
        self.divergences = list(divergences)
        self.fail_at = fail_at
        self.add_marker("shadow")

    def runtest(self) -> None:
        from shadow import codes

        bad = [d for d in self.divergences if codes.fails(d, self.fail_at)]
        if bad:
            raise ShadowCaseFailure([
                f"{d['severity']} {d['reason_code']} [{d['attribution']}] "
                f"{len(d.get('item_ids', []))} items {d.get('detail', {})}" for d in bad])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, ShadowCaseFailure):
            from shadow.reports.tables import case_anchor

            head = (f"{self.fixture} / {self.surface}: divergences at or above "
                    f"{self.fail_at} (report.html#{case_anchor(self.fixture, self.surface)})")
            return "\n".join([head, *("  " + x for x in excinfo.value.lines)])
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"shadow {self.fixture} / {self.surface}"


class ShadowSession:
    """State of one ``pytest --shadow`` session (registered only when active)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.result: Any = None
        self.tmp: Path | None = None
        self.paths: list[Path] = []
        self.gate: Any = None

    def _run(self) -> Any:
        from shadow.errors import ShadowError
        from shadow.run import RunOptions, execute

        opt = self.config.getoption
        self.tmp = Path(tempfile.mkdtemp(prefix="shadow-pytest-"))
        try:
            return execute(RunOptions(fixtures=opt("shadow_fixtures"), out=str(self.tmp),
                                      phase=opt("shadow_phase"),
                                      waivers=opt("shadow_waivers"),
                                      intended=opt("shadow_intended"),
                                      candidate=opt("shadow_candidate")))
        except ShadowError as exc:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
            raise pytest.UsageError(f"shadow: {exc}") from None

    def _fail_at(self) -> dict[str, str]:
        """Per top-level surface, the severity at which the phase's rules fail a case."""
        from shadow import codes
        from shadow.gates import policy

        out: dict[str, str] = {}
        for ph in policy.load().chain(self.config.getoption("shadow_phase")):
            for rule in ph.rates:
                for s in rule.surfaces:
                    cur = out.get(s, "blocking")
                    out[s] = rule.fail_at if codes.severity_rank(rule.fail_at) > \
                        codes.severity_rank(cur) else cur
        return out

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        from shadow.evidence import top_surface

        self.result = self._run()
        report = self.result.report
        fail_at = self._fail_at()
        by_case: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for d in report["divergences"]:
            by_case.setdefault((d["fixture"], d["surface"]), []).append(d)
        nodes: dict[str, tuple[ShadowFixture, list[pytest.Item]]] = {}
        for case in report.get("cases", []):
            fx, sf = case["fixture"], case["surface"]
            if fx not in nodes:
                nodes[fx] = (ShadowFixture.from_parent(session, name=fx,
                                                       nodeid=f"shadow::{fx}"), [])
            twin = "~" in sf  # legacy vs legacy: only blocking fails
            nodes[fx][1].append(ShadowCase.from_parent(
                nodes[fx][0], name=sf, fixture=fx, surface=sf,
                divergences=by_case.get((fx, sf), []),
                fail_at="blocking" if twin else fail_at.get(top_surface(sf), "blocking")))
        for node, children in nodes.values():
            # report the collection like any collector does ("collected N items")
            session.ihook.pytest_collectreport(report=pytest.CollectReport(
                node.nodeid, "passed", None, children))
            items.extend(children)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from shadow import evidence as evidence_mod
        from shadow.gates import merge, policy
        from shadow.gates.evaluate import evaluate

        if self.result is None or self.tmp is None:
            return
        out = Path(self.config.getoption("shadow_out"))
        if not out.is_absolute():
            out = Path(self.config.invocation_params.dir) / out
        out.mkdir(parents=True, exist_ok=True)
        for src in sorted(self.tmp.iterdir()):
            shutil.copyfile(src, out / src.name)
            self.paths.append(out / src.name)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = None
        files = [merge.parse(self.result.evidence, str(out / "evidence.json"))]
        self.gate = evaluate(policy.load(), files, self.config.getoption("shadow_phase"),
                             platforms=[evidence_mod.platform_name()])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.result is None:
            return
        tr = terminalreporter
        tr.section("shadow")
        for line in self.result.lines:
            if not line.startswith("report: "):
                tr.write_line(line)
        tr.write_line(f"run verdict: {self.result.verdict}")
        if self.gate is not None:
            g = self.gate
            tr.write_line(f"gate phase {g.phase} on this platform only: {g.verdict}"
                          + (f" ({', '.join(sorted({r.code for r in g.reasons}))})"
                             if g.reasons else ""))
        for p in self.paths:
            tr.write_line(f"report: {p}")

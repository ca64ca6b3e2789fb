"""Import real CLI JSONL session stores as fixtures (``shadow import-sessions``).

Public modules:

* ``store`` — read and verify one session file, or quarantine it with a line number
* ``replay`` — the legacy ``rebuildMessages`` replay and each compact event's window
* ``redact`` — secrets, local paths and e-mail addresses replaced at import
* ``build`` — the fixture documents of one compact event
* ``session`` — one session → its fixtures and skipped compact events
* ``importer`` — every PATH → fixtures, ``MANIFEST.json``, ``import-report.json``
* ``command`` — the command-line wiring
"""

__all__ = ("build", "command", "importer", "redact", "replay", "session", "store")

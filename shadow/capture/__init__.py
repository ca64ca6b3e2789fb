"""``shadow capture``: fresh legacy evidence from a user's own checkout.

* ``plan`` — which capture files a scenario gets and which harness drives each;
* ``runner`` — one Node (or Java) subprocess per capture, deterministic, sandboxed;
* ``manifest`` — the capture folder's ``MANIFEST.json``;
* ``jsjson`` — ``JSON.stringify(value, null, 2)`` in Python (the files' byte format);
* ``noise`` — control vs control: learn the volatile fields of two runs into noise rules;
* ``command`` — the ``shadow capture`` argument wiring;
* ``harness/`` — this project's own Node and Java driver files (no legacy code).
"""

__all__ = ("command", "jsjson", "manifest", "noise", "plan", "runner")

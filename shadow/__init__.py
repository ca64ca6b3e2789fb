"""Shadow-evaluation toolkit: the imperative shell around ``kernel``.

Loads fixtures and recordings, replays legacy surfaces beside the canonical
kernel, names every divergence with a reason code, gates cutover phases and
writes reports.  Imports ``kernel``; ``kernel`` never imports this package.
"""

__version__ = "0.1.0"

"""The App Server surface (issue 17): the kernel behind JSON-RPC 2.0 over stdio.

:mod:`.protocol` frames and checks the messages, :mod:`.retired` holds the retired entry
points as data, :mod:`.server` dispatches and does the I/O (``shadow app-server``);
docs/app-server.md is the protocol reference.
"""

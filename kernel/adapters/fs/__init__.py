"""Filesystem adapters: the content-addressed ContentPort and the non-blocking file reader.

Public modules:

* ``content`` — ``FsContentPort``
* ``files`` — reading a regular file without following links or blocking

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("content", "files")

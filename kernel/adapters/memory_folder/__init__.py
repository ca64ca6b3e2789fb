"""The file-based memory store folder and its four tools (second seed, "1. 文件化记忆").

Public modules:

* ``paths`` — path safety for the folder
* ``store`` — ``MemoryFolder`` and the tools

Modules import only public names from other packages; the names a module exports are
its ``__all__``.
"""

__all__ = ("paths", "store")

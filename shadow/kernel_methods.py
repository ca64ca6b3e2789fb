"""Kernel methods exposed through ``shadow kernel call|batch`` beyond ``digest``.

Each takes the peer wire format (a vector's ``request`` verbatim) and returns the
kernel's wire result; kernel errors become ``{"error": …}`` in ``kernel_rpc``.
"""

from __future__ import annotations

from typing import Any

from kernel.planner import plan_context
from shadow.kernel_rpc import register


def _plan_context(params: Any) -> Any:
    # the kernel validates the request itself (invalid_argument, as the peer)
    return plan_context(params)


register("plan_context", _plan_context)

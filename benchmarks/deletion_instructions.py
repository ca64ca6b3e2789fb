"""A deterministic cost of one deletion: run it under callgrind and count instructions.

Wall-clock medians on a shared 2-vCPU machine move by ±5 % between runs of the same code;
an instruction count does not, so it is what a change to the deletion path is judged by
(ADR 0006).  The harness runs the ``deletion`` workload (``benchmarks/deletion_bench.py``)
over ``--n`` records — ``setup`` alone or ``setup`` then the timed call — with the wall
clock replaced by one that advances one millisecond every 48 reads (about the native pace:
four reads per deletion, ≈ 12 deletions per millisecond), so the clock-dependent caches
behave as in a real run and every run executes the same instructions::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python -m benchmarks.deletion_instructions call --n 2000
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python -m benchmarks.deletion_instructions setup --n 2000

Instructions per deletion = (``call`` − ``setup``) / n, from callgrind's ``Collected``
line.  valgrind hides the CPU's SHA extensions, so SHA-256 weighs more here than on the
machine: use the count to compare two versions of the code, the benchmark for time.
"""

from __future__ import annotations

import argparse
import itertools
import time

BASE_MS = 1_764_500_000_000
READS_PER_MS = 48


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deletion_instructions")
    parser.add_argument("mode", choices=("setup", "call"))
    parser.add_argument("--n", type=int, default=2000, help="records deleted (default 2000)")
    args = parser.parse_args(argv)
    reads = itertools.count()
    wall_clock = time.time_ns
    time.time_ns = lambda: (BASE_MS + next(reads) // READS_PER_MS) * 1_000_000
    try:
        from benchmarks.deletion_bench import deletion

        timed, _ = deletion(args.n)
        timed.setup()
        if args.mode == "call":
            receipts = timed.call()
            assert isinstance(receipts, list) and len(receipts) == args.n
    finally:
        time.time_ns = wall_clock
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The map stage of ``shadow run`` alone, for the scale benchmark's ``--stage map``.

    python -m benchmarks.scale_map CORPUS EXECUTOR JOBS

Opens the corpus as ``shadow run`` does, judges every scenario on the executor with the
bundled noise rules and the kernel candidate (provider answers from the captures, as
``--no-recordings``) and appends the rows to result shards in a temporary folder — the
stream, the executor, the batches and the shard writer, without the reduce and the
reports.  Prints one JSON line: fixtures mapped and the shard parts written.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    from shadow import noise_rules
    from shadow.candidate import make_candidate
    from shadow.corpus_source import open_source
    from shadow.executors import MapOptions
    from shadow.mapreduce import map_to_shards
    from shadow.mapstep import MapContext

    corpus, executor, jobs = argv[0], argv[1], int(argv[2])
    ctx = MapContext(make_candidate("kernel", None), (), noise_rules.load(None), None)
    with tempfile.TemporaryDirectory(prefix="shadow-map-") as tmp, open_source(corpus) as src:
        stream, _ = map_to_shards(src, ctx, MapOptions(executor=executor, jobs=jobs),
                                  Path(tmp) / "shards", sample=False)
        parts = sum(1 for _ in (Path(tmp) / "shards" / "fixtures").iterdir())
        print(json.dumps({"mapped": len(stream.names), "fixture_parts": parts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

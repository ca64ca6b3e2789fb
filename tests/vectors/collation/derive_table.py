"""Derive the collation table of ``kernel/canonical/collation.py`` from ICU (development only).

    python tests/vectors/collation/derive_table.py          # rewrite the two table blocks
    python tests/vectors/collation/derive_table.py --check  # exit 1 if they are stale

Needs PyICU (``pip install pyicu-wheels`` in a scratch environment; it bundles ICU 77.1)
and ``node`` (v20.20.2 with ICU 78.2, the peer's runtime) on ``PATH``. Nothing at run time
or in the test suite imports this script: the kernel carries the tables, and the vectors
written by ``make_vectors.js`` (Node, the oracle) *prove* them
(``tests/kernel/test_collation.py``).

For every character of the alphabet (``RANGES`` less ``EXCLUDED``), the root collator's collation
elements are read with ``CollationElementIterator`` and re-assembled into ICU's 64-bit
form (a 32-bit element whose tertiary byte has both top bits set is a continuation of the
previous one): primary (32 bits), secondary (16 bits), tertiary (16 bits, case bits
masked off as ``localeCompare`` — caseFirst off — does).  Unified ideographs
U+4E00–U+9FFF are not listed: each has one collation element (primary only, secondary
and tertiary common), their primaries follow every other primary of the alphabet, and
their order is the CLDR root's radical-stroke order — mostly, but not entirely, code
point order, and Unicode data that changes between ICU versions (ICU 77 and 78 differ on
U+52B3/U+52B4).  That order is therefore read from Node itself (``_HAN_ORDER``).

Entry format (whitespace separated): ``CP:CE,CE,...`` (hex code point; no element for a
completely ignorable character) where a CE is ``P[/SSSS][*TT]``: ``P`` the primary in hex
without trailing zero bytes (``0`` for none, ``hXXXX`` for the implicit primary of the
ideograph U+XXXX), ``SSSS`` the secondary when it is not ``0500``, ``TT`` the tertiary's
first byte when it is not ``05`` (every tertiary of the alphabet has a zero second byte).
"""

from __future__ import annotations

import bisect
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import icu  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[3]
MODULE = ROOT / "kernel" / "canonical" / "collation.py"
BLOCKS = ('_TABLE: Final = """\n', '_HAN_ORDER: Final = """\n')
END = '"""\n'

#: Characters that collate exactly like another character of the alphabet (a tie would
#: make the order depend on input order) or that start a contraction: left out.
EXCLUDED = {
    0x00AD,  # soft hyphen: completely ignorable
    0x00B7,  # middle dot: the root collation contracts "l·" / "L·" (= ŀ / Ŀ)
    0x037E,  # Greek question mark = ";"
    0x0384,  # Greek tonos = "´"
    0x0387,  # Greek ano teleia = "·"
    0x3007,  # ideographic number zero = "0"
    *range(0x3021, 0x302A),  # Hangzhou numerals one..nine = "1".."9"
    *range(0x302A, 0x3030),  # combining tone marks
    *range(0x0483, 0x048A),  # combining Cyrillic marks
}
RANGES = (
    (0x0000, 0x007F),  # ASCII
    (0x00A0, 0x00FF),  # Latin-1 Supplement
    (0x0100, 0x017F),  # Latin Extended-A
    (0x0370, 0x03FF),  # Greek and Coptic
    (0x0400, 0x04FF),  # Cyrillic
    (0x3000, 0x303F),  # CJK Symbols and Punctuation
    (0xFF01, 0xFF5E),  # Fullwidth ASCII variants
)
HAN = (0x4E00, 0x9FFF)


def alphabet() -> list[int]:
    return [
        cp
        for lo, hi in RANGES
        for cp in range(lo, hi + 1)
        if cp not in EXCLUDED and unicodedata.category(chr(cp)) != "Cn"
    ]


COLLATOR = icu.Collator.createInstance(icu.Locale("en"))
NULL = icu.CollationElementIterator.NULLORDER


def elements(text: str) -> list[tuple[int, int, int]]:
    it = COLLATOR.createCollationElementIterator(text)
    out: list[tuple[int, int, int]] = []
    while (ce := it.next()) != NULL:
        ce &= 0xFFFFFFFF
        if ce == 0:  # completely ignorable
            continue
        if ce & 0xC0 == 0xC0 and out:  # continuation: low halves of the previous element
            p, s, t = out[-1]
            out[-1] = (p | (ce >> 16), s | ((ce >> 8) & 0xFF), t | (ce & 0x3F))
        else:
            out.append(((ce >> 16) << 16, ((ce >> 8) & 0xFF) << 8, (ce & 0x3F) << 8))
    return out


NODE_HAN_ORDER = """
const c = new Intl.Collator("en");
const a = [];
for (let cp = 0x4e00; cp <= 0x9fff; cp++) a.push(String.fromCodePoint(cp));
a.sort(c.compare);
for (let i = 1; i < a.length; i++) if (c.compare(a[i - 1], a[i]) === 0) throw new Error("tie");
console.log(JSON.stringify({icu: process.versions.icu, order: a.map((s) => s.codePointAt(0))}));
"""


def han_order() -> list[int]:
    """The ideographs in ``localeCompare("en")`` order, from Node (ICU 78.2)."""
    out = subprocess.run(
        ["node", "-e", NODE_HAN_ORDER], check=True, capture_output=True, text=True
    ).stdout
    doc = json.loads(out)
    assert doc["icu"] == "78.2", doc["icu"]
    order: list[int] = doc["order"]
    assert sorted(order) == list(range(HAN[0], HAN[1] + 1))
    return order


def han_block(order: list[int]) -> str:
    """``order`` as runs "anchor + moved...": the ideographs of a longest increasing
    subsequence of ``order`` stay in code point order, each run of the others follows
    the anchor written before it (``kernel.canonical.collation._han_ranks`` decodes it)."""
    tails: list[int] = []
    tail_at: list[int] = []
    back = [-1] * len(order)
    for i, cp in enumerate(order):
        j = bisect.bisect_left(tails, cp)
        if j == len(tails):
            tails.append(cp)
            tail_at.append(i)
        else:
            tails[j] = cp
            tail_at[j] = i
        back[i] = tail_at[j - 1] if j else -1
    keep = set()
    k = tail_at[-1]
    while k != -1:
        keep.add(order[k])
        k = back[k]
    assert order[0] in keep
    runs: list[str] = []
    for i, cp in enumerate(order):
        if cp in keep:
            continue
        if order[i - 1] in keep:
            runs.append(chr(order[i - 1]))
        runs[-1] += chr(cp)
    return wrap(runs, 40)


def wrap(entries: list[str], width: int) -> str:
    lines, line = [], ""
    for entry in entries:
        if line and len(line) + len(entry) + 1 > width:
            lines.append(line)
            line = ""
        line = f"{line} {entry}" if line else entry
    lines.append(line)
    return "\n".join(lines) + "\n"


def table() -> str:
    han_primary = {elements(chr(cp))[0][0]: cp for cp in range(HAN[0], HAN[1] + 1)}
    for cp in range(HAN[0], HAN[1] + 1):
        assert [(s, t) for _, s, t in elements(chr(cp))] == [(0x0500, 0x0500)], hex(cp)
    first_han = min(han_primary)
    entries = []
    for cp in alphabet():
        parts = []
        for p, s, t in elements(chr(cp)):
            assert t & 0xFF == 0 and (s == 0 or s >= 0x0500), hex(cp)
            if p >= first_han:
                text = f"h{han_primary[p]:04x}"
            elif p:
                text = f"{p:08x}"
                while text.endswith("00"):
                    text = text[:-2]
            else:
                text = "0"
            if s != 0x0500:
                text += f"/{s:04x}"
            if t >> 8 != 0x05:
                text += f"*{t >> 8:02x}"
            parts.append(text)
        entries.append(f"{cp:x}:{','.join(parts)}")
    return wrap(entries, 92)


def main() -> int:
    blocks = (table(), han_block(han_order()))
    source = MODULE.read_text(encoding="utf-8")
    for begin, block in zip(BLOCKS, blocks, strict=True):
        start = source.index(begin) + len(begin)
        end = source.index(END, start)
        if "--check" in sys.argv:
            if source[start:end] != block:
                sys.stderr.write(f"kernel/canonical/collation.py: {begin.split(':')[0]} is stale\n")
                return 1
        else:
            source = source[:start] + block + source[end:]
    if "--check" not in sys.argv:
        MODULE.write_text(source, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

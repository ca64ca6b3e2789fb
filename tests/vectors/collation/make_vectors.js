// Oracle vectors for kernel/canonical/collation.py: String#localeCompare(other, "en") on Node.
//
//   node tests/vectors/collation/make_vectors.js > tests/vectors/collation/icu78-en-order.json
//
// Run with the peer's runtime (Node v20.20.2, full ICU 78.2, Unicode 17, CLDR 48); the
// script refuses any other ICU.  Development only: the test suite reads the JSON output
// and never needs Node (tests/kernel/test_collation.py).
//
// Every sort below is V8's (stable) Array#sort with `(a, b) => a.localeCompare(b, "en")`
// — the peer's comparator — on an input order the Python test rebuilds identically, so
// ties (strings that compare equal) keep their input order in both.  Contents:
//
//   alphabet      the reproduced alphabet (code points; ideographs as one range)
//   groups        its characters (not the ideographs) partitioned by primary equality
//                 (Intl.Collator sensitivity "base"), in collation order
//   explicit      random strings over the alphabet (mulberry32, seed 1) — families of
//                 strings that differ only in accents / case / variants, mixed scripts,
//                 ignorable controls, duplicates — with Node's sorted order and ties
//   hashed        orders too large to list, as sha256 of the sorted index permutation
//                 and tie flags: every single character of the alphabet, every pair of
//                 non-ideographs (plus 48 ideographs), and 200,000 random strings (seed 2)
"use strict";
const crypto = require("crypto");

if (process.versions.icu !== "78.2") throw new Error(`ICU ${process.versions.icu}, want 78.2`);

const RANGES = [
  [0x0000, 0x007f], [0x00a0, 0x00ff], [0x0100, 0x017f], [0x0370, 0x03ff],
  [0x0400, 0x04ff], [0x3000, 0x303f], [0xff01, 0xff5e],
];
const HAN = [0x4e00, 0x9fff];
const EXCLUDED = new Set([
  0x00ad, 0x00b7, 0x037e, 0x0384, 0x0387, 0x3007,
  0x3021, 0x3022, 0x3023, 0x3024, 0x3025, 0x3026, 0x3027, 0x3028, 0x3029,
  0x302a, 0x302b, 0x302c, 0x302d, 0x302e, 0x302f,
  0x0483, 0x0484, 0x0485, 0x0486, 0x0487, 0x0488, 0x0489,
]);
const assigned = (cp) => !/\p{Cn}/u.test(String.fromCodePoint(cp));

const nonHan = [];
for (const [lo, hi] of RANGES) {
  for (let cp = lo; cp <= hi; cp++) if (!EXCLUDED.has(cp) && assigned(cp)) nonHan.push(cp);
}
const han = [];
for (let cp = HAN[0]; cp <= HAN[1]; cp++) han.push(cp);

const cmp = (a, b) => a.localeCompare(b, "en");
const base = new Intl.Collator("en", { sensitivity: "base" });

// mulberry32, as in tests/kernel/test_collation.py
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a) >>> 0;
    t = ((t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t) >>> 0;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Groups: the non-ideographs partitioned by equal primary weights.
const byBase = nonHan.map((cp) => String.fromCodePoint(cp)).sort((a, b) => base.compare(a, b));
const groups = [];
for (const ch of byBase) {
  const last = groups[groups.length - 1];
  if (last && base.compare(last[0], ch) === 0) last.push(ch);
  else groups.push([ch]);
}
const groupOf = new Map();
for (const g of groups) for (const ch of g) groupOf.set(ch, g);

// Pools for random strings: [name, characters].
const chars = (cps) => cps.map((cp) => String.fromCodePoint(cp));
const inRange = (lo, hi) => chars(nonHan.filter((cp) => cp >= lo && cp <= hi));
const ignorable = (cp) => cp < 0x09 || (cp > 0x0d && cp < 0x20) || cp === 0x7f;
const POOLS = [
  ["ascii", inRange(0x00, 0x7f).filter((ch) => !ignorable(ch.codePointAt(0)))],
  ["ascii-letters", chars([...Array(26).keys()].flatMap((i) => [0x41 + i, 0x61 + i]))],
  ["latin", inRange(0xa0, 0x17f)],
  ["greek", inRange(0x370, 0x3ff)],
  ["cyrillic", inRange(0x400, 0x4ff)],
  ["cjk-symbols", [...inRange(0x3000, 0x303f), ...inRange(0xff01, 0xff5e)]],
  ["han", chars(han)],
  ["controls", inRange(0x00, 0x7f).filter((ch) => ignorable(ch.codePointAt(0)))],
];
// Pool choice: index into POOLS, weighted (ignorable controls rarely).
const POOL_WEIGHTS = [0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 6, 0, 1, 2, 4, 7];

function randomStrings(seed, count) {
  const rand = mulberry32(seed);
  const pick = (arr) => arr[Math.floor(rand() * arr.length)];
  const fresh = () => {
    const length = 1 + Math.floor(rand() * 8);
    let s = "";
    for (let i = 0; i < length; i++) s += pick(POOLS[pick(POOL_WEIGHTS)][1]);
    return s;
  };
  const variant = (s) => {
    // Replace 1-2 characters that have variants (same primary weight) by another one.
    const out = [...s];
    const edits = 1 + Math.floor(rand() * 2);
    for (let e = 0; e < edits; e++) {
      const open = [...out.keys()].filter((i) => (groupOf.get(out[i]) || []).length > 1);
      if (!open.length) break;
      const i = pick(open);
      out[i] = pick(groupOf.get(out[i]).filter((ch) => ch !== out[i]));
    }
    return out.join("");
  };
  const out = [];
  while (out.length < count) {
    const s = fresh();
    out.push(s);
    const family = Math.floor(rand() * 4);
    for (let k = 0; k < family && out.length < count; k++) out.push(variant(s));
    if (rand() < 0.05 && out.length < count) out.push(s); // duplicate: a tie
  }
  return out;
}

function sortIndices(strings) {
  const idx = strings.map((_, i) => i);
  idx.sort((i, j) => cmp(strings[i], strings[j]));
  const ties = idx.map((i, k) => (k > 0 && cmp(strings[idx[k - 1]], strings[i]) === 0 ? 1 : 0));
  return { order: idx, ties };
}

function digest(strings) {
  const { order, ties } = sortIndices(strings);
  const text = order.join(",") + "|" + ties.join("");
  return {
    count: strings.length,
    tieCount: ties.reduce((a, b) => a + b, 0),
    sha256: crypto.createHash("sha256").update(text).digest("hex"),
  };
}

// Deterministic inputs of the hashed orders (rebuilt by the Python test).
const singles = chars([...nonHan, ...han].sort((a, b) => a - b));
const pairAlphabet = chars([...nonHan, ...han.filter((_, i) => i % 439 === 0)]);
const pairs = [];
for (const x of pairAlphabet) for (const y of pairAlphabet) pairs.push(x + y);

const explicitStrings = randomStrings(1, 6000);
const explicit = sortIndices(explicitStrings);
const prng = mulberry32(7);

const doc = {
  format: "context-kernel-parity/collation-vectors/v1",
  comparator: 'String.prototype.localeCompare(other, "en") with a stable Array#sort',
  runtime: {
    node: process.version,
    icu: process.versions.icu,
    unicode: process.versions.unicode,
    cldr: process.versions.cldr,
  },
  alphabet: { codePoints: nonHan, hanRange: HAN, excluded: [...EXCLUDED] },
  prngCheck: { seed: 7, values: [prng(), prng(), prng(), prng()] },
  pools: POOLS.map(([name, cs]) => [name, name === "han" ? null : cs.join("")]),
  poolWeights: POOL_WEIGHTS,
  groups: groups.map((g) => g.join("")),
  hashed: {
    singles: digest(singles),
    pairs: { ...digest(pairs), hanEvery: 439 },
    random: { seed: 2, ...digest(randomStrings(2, 200000)) },
  },
  explicit: {
    seed: 1,
    strings: explicitStrings,
    order: explicit.order,
    ties: explicit.order.filter((_, k) => explicit.ties[k] === 1),
  },
};
// One top-level field per line, and one explicit string per line (readable diffs).
const out = [];
for (const [key, value] of Object.entries(doc)) {
  if (key !== "explicit") {
    out.push(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
    continue;
  }
  const rest = Object.entries(value).filter(([k]) => k !== "strings");
  const head = rest.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(",\n ");
  const strings = value.strings.map((s) => JSON.stringify(s)).join(",\n  ");
  out.push(`"explicit":{\n ${head},\n "strings":[\n  ${strings}\n ]}`);
}
process.stdout.write("{" + out.join(",\n") + "}\n");

"""Sort keys for the peer's ``String#localeCompare(other, "en")`` (ICU 78.2 root collation).

The peer sorts object keys and the normalizers' string sets (``allowedSinks``, ``tags``,
``supersedes``, ``parentDigests``) with ``localeCompare(other, "en")``: ICU's root
collation (CLDR 48, Unicode 17) at tertiary strength, punctuation non-ignorable, case
ordering off, and a stable sort, so strings that compare equal keep their input order.
:func:`collation_key` returns a ``bytes`` key whose plain byte order *is* that
comparison, for every string over the **reproduced alphabet**:

* ASCII — every character; the C0 controls other than TAB..CR, and DEL, are completely
  ignorable (strings differing only in them compare equal);
* Latin-1 Supplement U+00A0–U+00FF and Latin Extended-A U+0100–U+017F (letters with
  accents: ``é`` = e + acute at the secondary level, ``É`` its tertiary variant;
  expansions such as ``ß`` = s s, ``æ`` = a e, ``œ``, ``ĳ``, ``ŉ``; own letters such as
  ``þ``, ``ŋ``, ``ı``, ``ĸ``, ``ŧ``; symbols such as ``¡ § © « ½ ×``);
* Greek and Coptic U+0370–U+03FF and Cyrillic U+0400–U+04FF (after Latin, by alphabet);
* CJK Symbols and Punctuation U+3000–U+303F and the fullwidth forms U+FF01–U+FF5E;
* CJK Unified Ideographs U+4E00–U+9FFF (after every other script, in the root
  collation's radical-stroke order — *not* code point order for 1,537 of them);

less the characters that would make the comparison depend on more than the characters
themselves: U+00AD (ignorable), U+00B7 (the root collation contracts ``l·``/``L·``),
U+0384, U+0387, U+037E, U+3007 and U+3021–U+3029 (each collates exactly like another
character: ``΄`` = ``´``, ``·`` = ``·``, ``;`` = ``;``, ``〇`` = ``0``, ``〡`` = ``1`` …)
and combining marks (U+302A–U+302F, U+0483–U+0489).  So no two distinct strings over the
alphabet compare equal unless they differ only in ignorable ASCII controls.  Any other
character raises :class:`~kernel.errors.NonPortableValue` naming it — never a silently
different order.

**The key.**  Each character stands for a fixed list of ICU collation elements
(primary, secondary, tertiary weights; ``_TABLE``); ICU compares the primary weights of
the whole string, then the secondary weights, then the tertiary weights, each sequence
lexicographically with a shorter prefix first.  The key is
``primaries + 00 + [FF + secondaries + 00] + tertiaries``: primaries are re-coded
order-preservingly (one byte per ASCII primary — the same bytes as before — and three
bytes for every other primary, placed in the gap after the ASCII primary below it),
secondaries are two bytes each, tertiaries one byte each.  The secondary part is left
out when every secondary is the common weight (one per primary): common is the lowest
secondary, so such a string sorts first among strings with its primaries, as
``FF`` > any tertiary byte makes it.  ASCII keeps a translate-only fast path that
yields exactly these bytes.

**Provenance and proof.**  ``_TABLE`` holds ICU's root collation elements (ICU 77.1, via
``tests/vectors/collation/derive_table.py``), ``_HAN_ORDER`` the ideographs' order read
from Node v20.20.2 / ICU 78.2 itself (Unihan radical-stroke data moves between versions).
``tests/kernel/test_collation.py`` proves the key against vectors produced by Node
(ICU 78.2, the peer's runtime): every character of the alphabet alone, every pair of
non-ideographs, and thousands of random strings over the alphabet (mixed scripts,
case/accent-only differences, ignorable controls), sorted by ``localeCompare("en")``.

This module is pure: no I/O, clocks, randomness or environment access.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from kernel.errors import NonPortableValue

__all__ = (
    "ASCII_IGNORABLE",
    "ASCII_PRIMARY",
    "ASCII_TERTIARY",
    "collation_key",
    "is_collation_portable",
)

# ICU root collation elements per character (ICU 77.1; proven against ICU 78.2).
# ``CP:CE,CE``; CE = ``P[/SSSS][*TT]`` — primary in hex without trailing zero bytes (``0``:
# none; ``hXXXX``: the implicit primary of ideograph U+XXXX), secondary when not 0500,
# first tertiary byte (case bits masked) when not 05.  Generated: do not edit by hand.
_TABLE: Final = """
0: 1: 2: 3: 4: 5: 6: 7: 8: 9:0304 a:0306 b:0308 c:030a d:030c e: f: 10: 11: 12: 13: 14: 15:
16: 17: 18: 19: 1a: 1b: 1c: 1d: 1e: 1f: 20:04 21:075a 22:0974 23:0a92 24:0da6 25:0a94
26:0a8c 27:096e 28:097a 29:097c 2a:0a7c 2b:0c7a 2c:06 2d:050e 2e:08 2f:0a86 30:12 31:14
32:16 33:18 34:1a 35:1c 36:1e 37:20 38:22 39:24 3a:0736 3b:072a 3c:0c84 3d:0c86 3e:0c88
3f:0764 40:0a7a 41:2b*1c 42:2d*1c 43:2f*1c 44:31*1c 45:33*1c 46:35*1c 47:37*1c 48:39*1c
49:3b*1c 4a:3d*1c 4b:3f*1c 4c:41*1c 4d:43*1c 4e:45*1c 4f:47*1c 50:49*1c 51:4b*1c 52:4d*1c
53:4f*1c 54:51*1c 55:53*1c 56:55*1c 57:57*20 58:59*1c 59:5b*1c 5a:5d*1c 5b:097e 5c:0a88
5d:0980 5e:0c0a 5f:050a 60:0c04 61:2b 62:2d 63:2f 64:31 65:33 66:35 67:37 68:39 69:3b 6a:3d
6b:3f 6c:41 6d:43 6e:45 6f:47 70:49 71:4b 72:4d 73:4f 74:51 75:53 76:55 77:57 78:59 79:5b
7a:5d 7b:0982 7c:0c8c 7d:0984 7e:0c90 7f: a0:04*28 a1:075c a2:0da4 a3:0da8 a4:0da2 a5:0daa
a6:0c8e a7:0a6e a8:0c10 a9:0c5c aa:2b*2b ab:0976 ac:0c8a ae:0c60 af:0c0c b0:0c53 b1:0c7e
b2:16*24 b3:18*24 b4:0c06 b5:612a*10 b6:0a72 b8:0c14 b9:14*24 ba:47*2b bb:0978
bc:14*33,0c98*20,1a*33 bd:14*33,0c98*20,16*33 be:18*33,0c98*20,1a*33 bf:0766 c0:2b*1c,0/8a00
c1:2b*1c,0/8800 c2:2b*1c,0/8e00 c3:2b*1c,0/9a00 c4:2b*1c,0/9600 c5:2b*1c,0/9200
c6:2b/7000*20,33*22 c7:2f*1c,0/a000 c8:33*1c,0/8a00 c9:33*1c,0/8800 ca:33*1c,0/8e00
cb:33*1c,0/9600 cc:3b*1c,0/8a00 cd:3b*1c,0/8800 ce:3b*1c,0/8e00 cf:3b*1c,0/9600
d0:31/7000*20 d1:45*1c,0/9a00 d2:47*1c,0/8a00 d3:47*1c,0/8800 d4:47*1c,0/8e00
d5:47*1c,0/9a00 d6:47*1c,0/9600 d7:0c82 d8:47*1c,0/9e00 d9:53*1c,0/8a00 da:53*1c,0/8800
db:53*1c,0/8e00 dc:53*1c,0/9600 dd:5b*1c,0/8800 de:5e28*20 df:4f/7000,4f*13 e0:2b,0/8a00
e1:2b,0/8800 e2:2b,0/8e00 e3:2b,0/9a00 e4:2b,0/9600 e5:2b,0/9200 e6:2b/7000,33*13
e7:2f,0/a000 e8:33,0/8a00 e9:33,0/8800 ea:33,0/8e00 eb:33,0/9600 ec:3b,0/8a00 ed:3b,0/8800
ee:3b,0/8e00 ef:3b,0/9600 f0:31/7000 f1:45,0/9a00 f2:47,0/8a00 f3:47,0/8800 f4:47,0/8e00
f5:47,0/9a00 f6:47,0/9600 f7:0c80 f8:47,0/9e00 f9:53,0/8a00 fa:53,0/8800 fb:53,0/8e00
fc:53,0/9600 fd:5b,0/8800 fe:5e28 ff:5b,0/9600 100:2b*1c,0/a400 101:2b,0/a400
102:2b*1c,0/8c00 103:2b,0/8c00 104:2b*1c,0/a200 105:2b,0/a200 106:2f*1c,0/8800 107:2f,0/8800
108:2f*1c,0/8e00 109:2f,0/8e00 10a:2f*1c,0/9c00 10b:2f,0/9c00 10c:2f*1c,0/9000 10d:2f,0/9000
10e:31*1c,0/9000 10f:31,0/9000 110:31*1c,0/b200 111:31,0/b200 112:33*1c,0/a400 113:33,0/a400
114:33*1c,0/8c00 115:33,0/8c00 116:33*1c,0/9c00 117:33,0/9c00 118:33*1c,0/a200 119:33,0/a200
11a:33*1c,0/9000 11b:33,0/9000 11c:37*1c,0/8e00 11d:37,0/8e00 11e:37*1c,0/8c00 11f:37,0/8c00
120:37*1c,0/9c00 121:37,0/9c00 122:37*1c,0/a000 123:37,0/a000 124:39*1c,0/8e00 125:39,0/8e00
126:39*1c,0/b200 127:39,0/b200 128:3b*1c,0/9a00 129:3b,0/9a00 12a:3b*1c,0/a400 12b:3b,0/a400
12c:3b*1c,0/8c00 12d:3b,0/8c00 12e:3b*1c,0/a200 12f:3b,0/a200 130:3b*1c,0/9c00 131:3c06
132:3b*22,3d*22 133:3b*13,3d*13 134:3d*1c,0/8e00 135:3d,0/8e00 136:3f*1c,0/a000
137:3f,0/a000 138:4c10 139:41*1c,0/8800 13a:41,0/8800 13b:41*1c,0/a000 13c:41,0/a000
13d:41*1c,0/9000 13e:41,0/9000 13f:41*1c,0/fb94 140:41,0/fb94 141:41*1c,0/b200 142:41,0/b200
143:45*1c,0/8800 144:45,0/8800 145:45*1c,0/a000 146:45,0/a000 147:45*1c,0/9000 148:45,0/9000
149:5e58*20,45*13 14a:4620*1e 14b:4620 14c:47*1c,0/a400 14d:47,0/a400 14e:47*1c,0/8c00
14f:47,0/8c00 150:47*1c,0/9800 151:47,0/9800 152:47/7000*20,33*22 153:47/7000,33*13
154:4d*1c,0/8800 155:4d,0/8800 156:4d*1c,0/a000 157:4d,0/a000 158:4d*1c,0/9000 159:4d,0/9000
15a:4f*1c,0/8800 15b:4f,0/8800 15c:4f*1c,0/8e00 15d:4f,0/8e00 15e:4f*1c,0/a000 15f:4f,0/a000
160:4f*1c,0/9000 161:4f,0/9000 162:51*1c,0/a000 163:51,0/a000 164:51*1c,0/9000 165:51,0/9000
166:5208*20 167:5208 168:53*1c,0/9a00 169:53,0/9a00 16a:53*1c,0/a400 16b:53,0/a400
16c:53*1c,0/8c00 16d:53,0/8c00 16e:53*1c,0/9200 16f:53,0/9200 170:53*1c,0/9800 171:53,0/9800
172:53*1c,0/a200 173:53,0/a200 174:57*20,0/8e00 175:57,0/8e00 176:5b*1c,0/8e00 177:5b,0/8e00
178:5b*1c,0/9600 179:5d*1c,0/8800 17a:5d,0/8800 17b:5d*1c,0/9c00 17c:5d,0/9c00
17d:5d*1c,0/9000 17e:5d,0/9000 17f:4f/7400 370:611a*20 371:611a 372:615c*20 373:615c
374:0c18 375:0c1a 376:6114*20 377:6114 37a:6120*10 37b:6146 37c:6144 37d:6148 37f:6122*20
385:0c10,0/8800 386:6106*26,0/8800 388:6110*26,0/8800 389:611c*1e,0/8800 38a:6120*26,0/8800
38c:6130*1e,0/8800 38e:614c*1b,0/8800 38f:6156*1b,0/8800 390:6120,0/9600,0/8800 391:6106*26
392:6108*1e 393:610a*18 394:610e*1b 395:6110*26 396:6118*1e 397:611c*1e 398:611e*1e
399:6120*26 39a:6124*20 39b:6126*1e 39c:612a*20 39d:612c*1e 39e:612e*1e 39f:6130*1e
3a0:6132*26 3a1:613c*20 3a3:6142*1e 3a4:614a*1e 3a5:614c*1b 3a6:614e*1e 3a7:6150*18
3a8:6152*1e 3a9:6156*1b 3aa:6120*26,0/9600 3ab:614c*1b,0/9600 3ac:6106,0/8800
3ad:6110,0/8800 3ae:611c,0/8800 3af:6120,0/8800 3b0:614c,0/9600,0/8800 3b1:6106 3b2:6108
3b3:610a 3b4:610e 3b5:6110 3b6:6118 3b7:611c 3b8:611e 3b9:6120 3ba:6124 3bb:6126 3bc:612a
3bd:612c 3be:612e 3bf:6130 3c0:6132 3c1:613c 3c2:6142*33 3c3:6142 3c4:614a 3c5:614c 3c6:614e
3c7:6150 3c8:6152 3c9:6156 3ca:6120,0/9600 3cb:614c,0/9600 3cc:6130,0/8800 3cd:614c,0/8800
3ce:6156,0/8800 3cf:6124*28,6106*10,6120*10 3d0:6108*10 3d1:611e*10 3d2:614c*26
3d3:614c*26,0/8800 3d4:614c*26,0/9600 3d5:614e*10 3d6:6132*10 3d7:6124*10,6106*10,6120*10
3d8:613a*20 3d9:613a 3da:6116*20 3db:6116 3dc:6112*1e 3dd:6112 3de:6138*20 3df:6138
3e0:615a*20 3e1:615a 3e2:61a0*20 3e3:61a0 3e4:61aa*20 3e5:61aa 3e6:61ac*20 3e7:61ac
3e8:61b2*20 3e9:61b2 3ea:61c0*20 3eb:61c0 3ec:61c6*20 3ed:61c6 3ee:61ce*20 3ef:61ce
3f0:6124*10 3f1:613c*10 3f2:6142*10 3f3:6122 3f4:611e*25 3f5:6110*10 3f6:0c761e 3f7:615e*20
3f8:615e 3f9:6142*25 3fa:6136*20 3fb:6136 3fc:6140 3fd:6146*20 3fe:6144*20 3ff:6148*20
400:6228*1b,0/8a00 401:6228*1b,0/9600 402:6220*20 403:6210*1b,0/8800 404:622a*2e 405:623a*20
406:624a*1b 407:624a*1b,0/9600 408:6250*20 409:626a*20 40a:6286*20 40b:62aa*20
40c:6254*1b,0/8800 40d:6246*1b,0/8a00 40e:62ac*1b,0/8c00 40f:62d8*20 410:6206*1b 411:620c*1b
412:620e*1b 413:6210*1b 414:621a*1b 415:6228*1b 416:622c*1b 417:6232*1b 418:6246*1b
419:624e*20 41a:6254*1b 41b:6262*1b 41c:6272*1e 41d:6278*1e 41e:628a*18 41f:628e*1b
420:6296*1e 421:629c*1b 422:62a2*1e 423:62ac*1b 424:62b4*1b 425:62b6*1b 426:62c0*1b
427:62c8*1b 428:62da*1b 429:62de*2e 42a:62e2*1b 42b:62e6*1b 42c:62e8*1e 42d:62ee*20
42e:62f0*1e 42f:62f4*20 430:6206 431:620c 432:620e 433:6210 434:621a 435:6228 436:622c
437:6232 438:6246 439:624e 43a:6254 43b:6262 43c:6272 43d:6278 43e:628a 43f:628e 440:6296
441:629c 442:62a2 443:62ac 444:62b4 445:62b6 446:62c0 447:62c8 448:62da 449:62de 44a:62e2
44b:62e6 44c:62e8 44d:62ee 44e:62f0 44f:62f4 450:6228,0/8a00 451:6228,0/9600 452:6220
453:6210,0/8800 454:622a 455:623a 456:624a 457:624a,0/9600 458:6250 459:626a 45a:6286
45b:62aa 45c:6254,0/8800 45d:6246,0/8a00 45e:62ac,0/8c00 45f:62d8 460:62be10*2e 461:62be10
462:62ec02*2e 463:62ec02 464:62f609*2e 465:62f609 466:62f610*2e 467:62f610 468:62f62c*20
469:62f62c 46a:62f61e*2e 46b:62f61e 46c:62f63a*2e 46d:62f63a 46e:62f641*20 46f:62f641
470:62f648*20 471:62f648 472:62f64f*2e 473:62f64f 474:62f656*20 475:62f656
476:62f656*20,0/b800 477:62f656,0/b800 478:62b209*20 479:62b209 47a:62be2c*20 47b:62be2c
47c:62be25*20 47d:62be25 47e:62be17*20 47f:62be17 480:6294*20 481:6294 482:0c5502
48a:6248*20 48b:6248 48c:62ea*20 48d:62ea 48e:6298*20 48f:6298 490:6210/7000*2e
491:6210/7000*20 492:6212*20 493:6212 494:6216*20 495:6216 496:6230*20 497:6230 498:6226*20
499:6226 49a:6256*20 49b:6256 49c:625e*20 49d:625e 49e:625c*20 49f:625c 4a0:625a*20 4a1:625a
4a2:627e*20 4a3:627e 4a4:6284*20 4a5:6284 4a6:6292*20 4a7:6292 4a8:62f8*20 4a9:62f8
4aa:62a0*20 4ab:62a0 4ac:62a6*20 4ad:62a6 4ae:62ae*20 4af:62ae 4b0:62b0*20 4b1:62b0
4b2:62ba*20 4b3:62ba 4b4:62c4*20 4b5:62c4 4b6:62cc*20 4b7:62cc 4b8:62d0*20 4b9:62d0
4ba:62bc*20 4bb:62bc 4bc:62d4*20 4bd:62d4 4be:62d6*20 4bf:62d6 4c0:62fc*20
4c1:622c*1b,0/8c00 4c2:622c,0/8c00 4c3:6258*20 4c4:6258 4c5:6266*20 4c6:6266 4c7:6280*20
4c8:6280 4c9:627c*20 4ca:627c 4cb:62ce*20 4cc:62ce 4cd:6274*20 4ce:6274 4cf:62fc
4d0:6206*1b,0/8c00 4d1:6206,0/8c00 4d2:6206*1b,0/9600 4d3:6206,0/9600 4d4:620a*20 4d5:620a
4d6:6228*1b,0/8c00 4d7:6228,0/8c00 4d8:6208*20 4d9:6208 4da:6208*20,0/9600 4db:6208,0/9600
4dc:622c*1b,0/9600 4dd:622c,0/9600 4de:6232*1b,0/9600 4df:6232,0/9600 4e0:623e*20 4e1:623e
4e2:6246*1b,0/a400 4e3:6246,0/a400 4e4:6246*1b,0/9600 4e5:6246,0/9600 4e6:628a*18,0/9600
4e7:628a,0/9600 4e8:628c*20 4e9:628c 4ea:628c*20,0/9600 4eb:628c,0/9600 4ec:62ee*20,0/9600
4ed:62ee,0/9600 4ee:62ac*1b,0/a400 4ef:62ac,0/a400 4f0:62ac*1b,0/9600 4f1:62ac,0/9600
4f2:62ac*1b,0/9800 4f3:62ac,0/9800 4f4:62c8*1b,0/9600 4f5:62c8,0/9600 4f6:6218*20 4f7:6218
4f8:62e6*1b,0/9600 4f9:62e6,0/9600 4fa:6214*20 4fb:6214 4fc:62b802*20 4fd:62b802
4fe:62b809*20 4ff:62b809 3000:04*10 3001:0722 3002:0918 3003:0abc 3004:0d666f 3005:0d82
3006:7d1e*03,7d4a*03 3008:0a3a 3009:0a3c 300a:0a3e 300b:0a40 300c:0a42 300d:0a44 300e:0a46
300f:0a48 3010:0a4a 3011:0a4c 3012:0d68 3013:0d6a02 3014:0a4e 3015:0a50 3016:0a52 3017:0a54
3018:0a56 3019:0a58 301a:0a5a 301b:0a5c 301c:052c 301d:0974/7a00 301e:0974/7c00
301f:0974/7e02 3020:0d6a09 3030:052e 3031:0d8a 3032:0d8a,0/ae00 3033:0d8c 3034:0d8c,0/ae00
3035:0d8e 3036:0d68*20 3037:0d6a10 3038:h5341*10 3039:h5344*10 303a:h5345*10 303b:0d84
303c:7d44*03,7d20*03 303d:0abe 303e:0d6a17 303f:0d6a1e ff01:075a*10 ff02:0974*20
ff03:0a92*20 ff04:0da6*20 ff05:0a94*20 ff06:0a8c*20 ff07:096e*20 ff08:097a*10 ff09:097c*10
ff0a:0a7c*20 ff0b:0c7a*10 ff0c:06*10 ff0d:050e*20 ff0e:08*10 ff0f:0a86*20 ff10:12*10
ff11:14*10 ff12:16*10 ff13:18*10 ff14:1a*10 ff15:1c*10 ff16:1e*10 ff17:20*10 ff18:22*10
ff19:24*10 ff1a:0736*10 ff1b:072a*10 ff1c:0c84*20 ff1d:0c86*10 ff1e:0c88*20 ff1f:0764*10
ff20:0a7a*20 ff21:2b*1f ff22:2d*1f ff23:2f*1f ff24:31*1f ff25:33*1f ff26:35*1f ff27:37*1f
ff28:39*1f ff29:3b*1f ff2a:3d*1f ff2b:3f*1f ff2c:41*1f ff2d:43*1f ff2e:45*1f ff2f:47*1f
ff30:49*1f ff31:4b*1f ff32:4d*1f ff33:4f*1f ff34:51*1f ff35:53*1f ff36:55*1f ff37:57*24
ff38:59*1f ff39:5b*1f ff3a:5d*1f ff3b:097e*20 ff3c:0a88*20 ff3d:0980*20 ff3e:0c0a*20
ff3f:050a*10 ff40:0c04*20 ff41:2b*10 ff42:2d*10 ff43:2f*10 ff44:31*10 ff45:33*10 ff46:35*10
ff47:37*10 ff48:39*10 ff49:3b*10 ff4a:3d*10 ff4b:3f*10 ff4c:41*10 ff4d:43*10 ff4e:45*10
ff4f:47*10 ff50:49*10 ff51:4b*10 ff52:4d*10 ff53:4f*10 ff54:51*10 ff55:53*10 ff56:55*10
ff57:57*10 ff58:59*10 ff59:5b*10 ff5a:5d*10 ff5b:0982*10 ff5c:0c8c*20 ff5d:0984*10
ff5e:0c90*20
"""

# CJK Unified Ideographs U+4E00–U+9FFF in localeCompare("en") order (Node / ICU 78.2):
# code point order, except that each run below (after its first ideograph, the anchor)
# sorts right after its anchor.  Generated: do not edit by hand.
_HAN_ORDER: Final = """
丌亐卄 专丗 严丽鿖 丧鿗 丸义 乌尹 九龴 侭鿇 倿倻 傩鿘 働鿙 僴僲
儞儫鿚 全氽 兴龹 兹养 册囘 冕最 冻鿑 凟鿛 剱剶剩 劲労 匫龨 半卌 卖龺
卽卿 原虒 厣厩 厫厯 叢壡 啹啙啫 喾喍 嗵鿽 嘧噑噓嘟嘠 噝噴 嚓嚺 囄囍
囋囎 囜龱 國圏 圡龶 垵城鿍 堔埪 塈鿾堽塃 壌龳 壗龼 夌変 夑夓 奍奔
奖奊 姗妍 娈姬 娴娽娬 媯嫏媐 嬢嬴 嬽嬹 孰孲 宫宧 寕寪 専将 尕龸 山乢
峅岍 嵝嵊 巂嶻 巐巎 巕巗 幏幈 幙幛 幹乡 应庘 廃廊 廌鿮廄 廭龐 彻鿈鿉
徍徔 徣徚 徴徲 愦慨 懔憻 戟戦 戯戱 戲戴 才龵 扖扏 扬扟 报扸 掽掲
搅搜 摊揅 撄撇搱摖 撺擆 擱擥 攐攒 攧鿜攥 敌啟 敪敭 斃贁 旆旊 晖勗
晩曽 暃暑 曍龧 曗曚 書曺 朢膤 杩极 桪鿄 榌榔榘榊 槡槩樮 樱橥橴 櫦櫫櫭
欅欌櫷 欝鿝 欢欤 止龰 殱鿞 氳鿫 氵氺 汤汷 泾泚 浕洍洖 涩涙 渗渚湴渃
溌滋滞鿌鿿溁 滪漓滌滚 潍漋漽 澝濐鿰澙 濓濖澀 瀔濳 灣灎 灳炇 焘焔 煀煮
煸煺煛 熙熦蒸 熵黙龦龽 燷鿪 爎爕爋 爳噕 爾丬 牿犁 猡猪 猹獁 獊獄 獕獋
玉王 玱鿱 珲琉 琓珷 琼琞 璌璎璓 璤璢 町甼 畩異 畺畱 疯疺 瘘瘟瘧 瘿癊
癡癣 皈畠 皵龾 盘盛 眬眿 眾睁 睑鿃 睭睡 矙矖 码泵 硁鿬 硛鿎 碜碰硾
碹磁 磙磜磤 祎视鿆 祯祦 祸禄視 禯鿅 禽萬 秾稆 税鿟 稳穊 穒穉 穯鿠
穰穳 竰竮 笾笄 简節 篓築 篯簑簕 籏籕籖 籨籪 籶娄 粑畨 粝粣 粵糀 糘鿯
糢糨 糰糲 糹纟 糿纠 紉纡红纣纤纥约级纨纩纪纫纶
紧纬纭纮纯纰纱纲纳纴纵纷纸纹纺纻纼纽纾 経线绀绁绂练组绅细织终绉绊绋绌绍绎经绐
絷绑绒结绔绕绖绗绘给绚绛络绝绞统絛 綛绠绡绢绣绤绥绦继绨
緕绩绪绫绬续绮绯绰绱绲绳维绵绶绷绸绹绺绻综绽绾绿缀缁緓
縇缂缃缄缅缆缇缈缉缊缋缌缍缎缏缐缑缒缓缔缕编缗缘 縨缙缚缛缜缝缞缟缠缡缢缣缤
繍缥缦缧缨缩缪缫繈 繥繧繱缬缭缮缯繋 繺缰缱缲缳缴 纒缵 缺缼 置署 羉鿡 羙羕
翶翼 联聠 聣鿢 聫鿣 聳聮 職鿤 胁朑 胬脉 腚幐朡 膣朥 臘臖 興舆 艱鿥
艺龷 苏茾芿 茕茒 药鿒茝茣荫 莽鿊荓 萨著龿莭 蒏鿓 薬薮龩薩 藓蘤 藵藮
蘔蘢蘒 蘷鿀鿦蘱 虔彪 蚪蚬 蛏蚈 蛴蛖 蜗蜫蝆 螀蟡蝹 蟵蠁蠎 蠤蠴 袮袰
褄裦 褲褴 襅襔 襕鿋 襴襽 見见 覌覙观 覎觃 覔规觅 覚觇览觉 覜觊 覡觋
覥觌觍 親觎 覯觏 観觐觑 觞觜 觴鵤 訁讠 計计订讣认讥
訚讦讧讨让讪讫讬训议讯记讱 訳讲讳讴讵讶讷许讹论讻讼讽设访诀
詠证诂诃评诅识诇诈诉诊诋诌词诎诏诐译诒
誊誠鿁诓诔试诖诗诘诙诚诛诜话诞诟诠诡询诣诤该详诧诨诩
誮诪诫诬语诮误诰诱诲诳说诵诶 諚諩请诸诹诺读诼诽课诿谀谁谂调谄谅谆谇谈谉谊
謃谋谌谍谎谏谐谑谒谓谔谕谖谗谘谙谚谛谜谝谞 謢谟谠谡谢谣谤谥谦谧 謾谨谩谪谫谬
譜龻谭谮谯谰谱谲譍 譲谳谴谵 讖谶 豋鿲 豵豷 貝贝 負贞负贠 貤贡财
貮责贤败账货质贩贪贫贬购贮贯 賁贰贱贲贳贴贵贶贷贸费贺贻
賎贼贽贾贿赀赁赂赃资赅赆 賘赇赈赉赊 賬赋赌赍赎赏赐赑赒赓赔赕 賵赖赗
賽赘赙赚赛 贅赜 贌赝赞赟赠 贏赡赢 贛赣 赵龪 跞践趼 踯踺踫 蹧蹮躀 躪躨
車车 軋轧 軍轨 軕轩轪轫 軣转轭轮软轰 軽龫轱轲轳轴轵轶轷轸轹轺轻軭
輌轼载轾轿辀辁辂较 輕辄辅辆 輬辇辈辉辊辋辌辍辎 輼辏辐辑辒输辔 轅辕辖辗
轌鿂辘 轔辙辚 辽巡 迟迬 遱遳 遼邆 邅邉 郑郓 酀酂 釒钅 釔钆钇
釢针钉钊钋钌 釼钍钎钏钐钑钒钓钔钕钖钗
鈬钘钙钚钛钜钝钞钟钠钡钢钣钤钥钦钧钨钩钪钫钬钭钮钯
鉴銏龯钰钱钲钳钴钵钶钷钸钹钺钻钼钽钾钿铀铁铂铃铄铅铆铇铈铉铊铋铌铍铎鿭
銱铏铐铑铒铓铔铕铖铗铘铙铚铛铜铝铞铟铠铡铢铣铤铥铦铧铨铩铪铫铬铭铮铯铰铱铲铳铴铵银铷
鋶铸铹铺铻铼铽链铿销锁锂锃锄锅锆锇锈锉锊锋锌锍锎锏锐锑锒锓锔锕鿏鉼
鍆鍈龬锖锗锘错锚锛锜锝锞锟锠锡锢锣锤锥锦锧锨锩锪锫锬锭键锯锰锱錨
鎇锲锳锴锵锶锷锸锹锺锻锼锽锾锿镀镁镂镃镄镅
鎿龲镆镇镈镉镊镋镌镍镎镏镐镑镒镓镔镕鿔鎩 鏲鏹镖镗镘镙镚镛镜镝镞镟镠
鐨镡镢镣镤镥镦镧镨镩镪镫鏴 鑁镬镭镮镯镰镱 鑔鑧镲 鑦镳镴 鑳镵镶 镸长 門门
閂闩 閅闪 閊闫闬闭问闯 閗闰闱闲闳间闵闶闷 閠闸闹 閪闺闻闼闽闾闿阀阁阂
閴阃阄阅阆 闂阇阈阉阊阋阌阍阎阏阐閷 闏阑阒阓阔阕 闘阖阗阘阙 闝阚 闦阛 险陚
階隐 隵鿧 靎鿨 韋韦 韌韧 韎韨 韕韩 韚韪韫 韟韬韛 音竟章 頁页 頄顶顷
頉顸项顺须 頓顼顽顾顿颀颁颂颃预 頚颅领颇颈 頬颉颊颋颌颍颎颏頤頥
頽颐频颒颓颔颕颖 顊颗頾 顕题颙颚颛颜额 類颞颟颠颡 顨颢颣 顫颤 顯颥 顰颦
顲颧 風风 颪飏 颱飐飑飒 颷飓 颺飔飖 飀飕飗 飄飘 飊飙飚 飛飞 飠饣
飤饤饥 飨饦饧 飲饨饩饪饫饬饭饮 飿饯饰饱饲饳饴飺 餏饵饶饷饸饹饺饻饼
餙餝饽饾饿馀馁馂 餩馃馄馅馆 餵餷馇馈馊馋 饂馉馌馍馎馏馐 饉馑馒 饓馓馔 馬马
馮驭 馵驮驯驰 駇驱驲驳驴 駠驵驶驷驸驹驺驻驼驽驾驿骀 駲骁骂骃骄骅骆骇骈骉
騃骊骋验骍骎骏駳 験骐骑骒骓骔骕骖 騨骗骘骙骚骛 騸骜骝骞骟 驇龭骠骡骢 驕骣
驟骤 驣骥 驧龮骦骧 髻鬇 鬘鬝 魚鱼 魞鱽 魢鱾 魹鱿鲀鲁鲂鲃鿕
鮘鮣鲄鲅鲆鲇鲈鲉鲊鲋鲌鲍鲎鲏鲐鿴 鮴鮺鲑鲒鲓鲔鲕鲖鲗鲘鲙鲚鲛鲜鲝鲞鲟
鯓鯽鲠鲡鲢鲣鲤鲥鲦鲧鲨鲩鲪鲫鲬鿵鿶 鯵鯻鲭鲮鲯鲰鲱鲲鲳鲴鲵鲶鲷鲸鲹鲺鲻
鰛鰠鲼鲽鲿鳀鳁鳂鳃鳄鳅鳆鳇鳈鳉鳊鳋鿷 鰰鿐鲾鳌鳍鳎鳏鳐鳑鳒
鱈鷠鿳鳓鳔鳕鳖鳗鳘鳙鳚鳛鿸鿹 鱛鳜鳝鳞鳟 鱫鳠鳡鳢鳣鱨 鱰鳤 鱹鿩 鳥鸟 鳰鸠鸡
鳶鸢鸣鸤 鴎鸥鸦鸧鸨鸩鴊 鴬鸪鸫鸬鸭鸮鸯鸰鸱鸲鸳鸴鸵鸶 鵉鸷鸸鸹鸺鸻鸼鸽鸾鸿
鵥鹀鹁鹂鹃鹄鹅鹆鹇鹈鿺 鶏鶑鹉鹊鹋鹌鹍鹎鹏鹐鹑鹒鹓鹔 鶫鹕鹖鹗鹙鹚鹛鹜
鷏鹘鹝鹞鹟鹠鹡鹢鹣鹤鷋 鷟鹥鹦鹧鹨 鷼鹩鹪鹫鹬鷹 鸊鹭鹮鹯鹰 鸒鹱鹲 鸚鹳鹴
鹹鹾 麫麸 麴麹 麵麺 黒墨 黿鼋 鼂鼌 鼉鼍 鼬鿻鿼 齊齐 齒齿 齔龀 齕龁
齘龂 齡齣龃龄龅龆 齩龇龈 齬龉龊 齷龋龌 龍龙 龕龚龛 龜龟
"""

_HAN_FIRST: Final = 0x4E00
_HAN_LAST: Final = 0x9FFF
_COMMON_SECONDARY: Final = 0x0500


class _Element(NamedTuple):
    primary: int  # ICU primary (32 bits); for an ideograph's: 1 << 32 | radical-stroke rank
    secondary: int
    tertiary: int


class _Weights(NamedTuple):
    """One character's key parts: primaries, secondaries, tertiaries (coded bytes) and
    whether its secondaries are all common (one per primary, nothing else)."""

    primary: bytes
    secondary: bytes
    tertiary: bytes
    plain: bool


@functools.cache
def _han_ranks() -> tuple[int, ...]:
    """Ideographs in collation order (decodes ``_HAN_ORDER``)."""
    follows: dict[int, list[int]] = {}
    moved: set[int] = set()
    for run in _HAN_ORDER.split():
        follows[ord(run[0])] = [ord(ch) for ch in run[1:]]
        moved.update(ord(ch) for ch in run[1:])
    order: list[int] = []
    for cp in range(_HAN_FIRST, _HAN_LAST + 1):
        if cp not in moved:
            order.append(cp)
            order.extend(follows.get(cp, ()))
    return tuple(order)


def _parse_table() -> Mapping[str, tuple[_Element, ...]]:
    rank = {cp: i for i, cp in enumerate(_han_ranks())}
    table: dict[str, tuple[_Element, ...]] = {}
    for entry in _TABLE.split():
        code, _, body = entry.partition(":")
        elements: list[_Element] = []
        for text in body.split(",") if body else ():
            text, _, tertiary = text.partition("*")
            text, _, secondary = text.partition("/")
            if text.startswith("h"):
                primary = 1 << 32 | rank[int(text[1:], 16)]
            else:
                primary = int(text.ljust(8, "0"), 16)
            elements.append(
                _Element(
                    primary,
                    int(secondary, 16) if secondary else _COMMON_SECONDARY,
                    int(tertiary or "05", 16),
                )
            )
        table[chr(int(code, 16))] = tuple(elements)
    return MappingProxyType(table)


_ELEMENTS: Final = _parse_table()
_ASCII_PRIMARIES: Final = tuple(
    sorted({e.primary for ch, elements in _ELEMENTS.items() if ch.isascii() for e in elements})
)
_ASCII_CODE: Final = MappingProxyType({p: 0x21 + i for i, p in enumerate(_ASCII_PRIMARIES)})


def _code(lead: int, k: int) -> bytes:
    return bytes((lead, 0x80 + k // 255, 1 + k % 255))


def _primary_codes(primaries: set[int]) -> dict[int, bytes]:
    """Order-preserving byte codes: an ASCII primary keeps one byte (0x21 + rank); any
    other primary gets three — the code of the ASCII primary below it (0x20 if none),
    then its index ``k`` in that gap as ``0x80 + k // 255, 1 + k % 255``.  The second
    byte exceeds every one-byte code and the separator 00, so a code never compares as a
    prefix of a different one, and concatenations compare as the primary sequences do.
    """
    codes = {p: bytes((code,)) for p, code in _ASCII_CODE.items()}
    gaps: dict[int, list[int]] = {}
    for p in sorted(primaries - codes.keys()):
        gaps.setdefault(0x20 + bisect.bisect_left(_ASCII_PRIMARIES, p), []).append(p)
    for lead, members in gaps.items():
        for k, p in enumerate(members):
            codes[p] = _code(lead, k)
    return codes


def _weights(elements: tuple[_Element, ...], codes: dict[int, bytes]) -> _Weights:
    primaries = [e.primary for e in elements if e.primary]
    secondaries = [e.secondary for e in elements if e.secondary]
    return _Weights(
        b"".join(codes[p] for p in primaries),
        b"".join(s.to_bytes(2, "big") for s in secondaries),
        bytes(e.tertiary for e in elements if e.tertiary),
        secondaries == [_COMMON_SECONDARY] * len(primaries),
    )


@functools.cache
def _table() -> Mapping[str, _Weights]:
    """Every character of the alphabet -> its key parts (built on first non-ASCII use).

    An ideograph's primary (``1 << 32 | rank``) exceeds every ICU primary of the table,
    so the ideographs fill the end of the last gap in rank order; their codes are
    computed rather than looked up.
    """
    ranks = _han_ranks()
    han = {1 << 32 | rank for rank in range(len(ranks))}
    primaries = {e.primary for es in _ELEMENTS.values() for e in es if e.primary} - han
    codes = _primary_codes(primaries)
    lead = 0x20 + len(_ASCII_PRIMARIES)  # the gap after the last ASCII primary
    first = sum(1 for p in primaries if p > _ASCII_PRIMARIES[-1])
    codes.update({1 << 32 | rank: _code(lead, first + rank) for rank in range(len(ranks))})
    table = {ch: _weights(es, codes) for ch, es in _ELEMENTS.items()}
    common, tertiary = _COMMON_SECONDARY.to_bytes(2, "big"), bytes((0x05,))
    for rank, cp in enumerate(ranks):
        table[chr(cp)] = _Weights(codes[1 << 32 | rank], common, tertiary, True)
    return MappingProxyType(table)


def _ascii_tables() -> tuple[bytes, bytes, bytes]:
    primary = bytearray(range(256))
    tertiary = bytearray(range(256))
    ignorable = bytearray()
    for ch, elements in _ELEMENTS.items():
        if not ch.isascii():
            continue
        if not elements:
            ignorable.append(ord(ch))
            continue
        (element,) = elements  # one element per ASCII character (checked by the tests)
        primary[ord(ch)] = _ASCII_CODE[element.primary]
        tertiary[ord(ch)] = element.tertiary
    return bytes(primary), bytes(tertiary), bytes(ignorable)


#: ``bytes.translate`` tables for ASCII: primary code, tertiary weight, and the
#: completely ignorable characters (deleted).
ASCII_PRIMARY, ASCII_TERTIARY, ASCII_IGNORABLE = _ascii_tables()


def collation_key(text: str) -> bytes:
    """Sort key whose byte order is ``localeCompare(other, "en")`` (ICU 78.2 root).

    Equal keys are strings that compare equal (they differ only in ignorable ASCII
    controls): a stable sort keeps their input order, as V8's does.  A character outside
    the reproduced alphabet raises :class:`NonPortableValue` naming it.
    """
    if text.isascii():
        raw = text.encode("ascii")
        return (
            raw.translate(ASCII_PRIMARY, ASCII_IGNORABLE)
            + b"\x00"
            + raw.translate(ASCII_TERTIARY, ASCII_IGNORABLE)
        )
    table = _table()
    try:
        weights = [table[ch] for ch in text]
    except KeyError:
        raise _refuse(text) from None
    primary = b"".join([w.primary for w in weights])
    tertiary = b"".join([w.tertiary for w in weights])
    if all(w.plain for w in weights):
        return primary + b"\x00" + tertiary
    secondary = b"".join([w.secondary for w in weights])
    return primary + b"\x00\xff" + secondary + b"\x00" + tertiary


def is_collation_portable(text: str) -> bool:
    """True if :func:`collation_key` reproduces ``localeCompare("en")`` for ``text``."""
    if text.isascii():
        return True
    table = _table()
    return all(ch in table for ch in text)


def _refuse(text: str) -> NonPortableValue:
    table = _table()
    ch = next(ch for ch in text if ch not in table)
    return NonPortableValue(
        f"ordering of text containing U+{ord(ch):04X} follows ICU collation data outside "
        'the reproduced alphabet; its localeCompare("en") order is not portable',
        details={"value": text[:64], "character": f"U+{ord(ch):04X}"},
    )

"""Writes the seed corpus of loads_fuzzer: one file per protocol-1 string.

    python tests/fuzz/cxx/make_seeds.py <out dir>

Seeds: every "dumps" text of tests/cpp/fixtures/specs.json (specs written by
torch for every node kind), a few hand-made edge cases (deep nesting, big
ints, escapes, NaN keys, missing members), and the libFuzzer dictionary of
the format's tokens is tests/fuzz/cxx/protocol1.dict.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "cpp", "fixtures", "specs.json")

LEAF = '{"type": null, "context": null, "children_spec": []}'
EXTRA = [
    "[1, " + LEAF + "]",
    "[1, "
    + '{"type": "builtins.list", "context": "null", "children_spec": [' * 40
    + LEAF
    + "]}" * 40
    + "]",
    '[1, {"type": "builtins.dict", "context": "[1e400, -0.0, 12345678901234567890123]", '
    '"children_spec": [' + ", ".join([LEAF] * 3) + "]}]",
    '[1, {"type": "builtins.dict", "context": "[\\"\\\\ud800\\", \\"\\\\u00e9\\"]", '
    '"children_spec": [' + ", ".join([LEAF] * 2) + "]}]",
    '[1, {"type": "builtins.dict", "context": "[NaN, Infinity]", "children_spec": ['
    + ", ".join([LEAF] * 2)
    + "]}]",
    '[1, {"type": "collections.deque", "context": "-1", "children_spec": []}]',
    '[1, {"type": "builtins.tuple", "children_spec": []}]',
    "[2, " + LEAF + "]",
    "[1, {}]",
    "",
]


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with open(FIXTURES) as f:
        texts = [case["dumps"] for case in json.load(f) if "dumps" in case]
    for text in texts + EXTRA:
        data = text.encode("utf-8", "surrogatepass")
        name = hashlib.sha1(data).hexdigest()[:16]
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"make_seeds: {len(texts) + len(EXTRA)} seeds in {out}")


if __name__ == "__main__":
    main(sys.argv[1])

"""Compare needle's JSON writer with Python's json.dumps (the oracle).

Runs the helper BUILD/tools/json_canon: it parses stdin with nd_json_parse and
writes nd_json_write output.  Every expectation here comes from Python's json
module, never from the code under test."""
import json
import os
import random
import subprocess

import pytest

BUILD = os.environ.get("NEEDLE_BUILD", "build")
HELPER = os.path.join(BUILD, "tools", "json_canon")


def canon(text: bytes, ascii_only=True):
    args = [HELPER] + ([] if ascii_only else ["--no-ascii"])
    return subprocess.run(args, input=text, capture_output=True)


def random_string(rng, n):
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.3:
            out.append(chr(rng.randrange(0x20, 0x7F)))
        elif kind < 0.45:
            out.append(chr(rng.randrange(0, 0x20)))
        elif kind < 0.5:
            out.append(rng.choice('"\\/\x7f'))
        elif kind < 0.7:
            out.append(chr(rng.randrange(0x80, 0x800)))
        elif kind < 0.85:
            cp = rng.randrange(0x800, 0x10000)
            if 0xD800 <= cp <= 0xDFFF:  # JSON text may not carry lone surrogates
                cp = 0xFFFD
            out.append(chr(cp))
        else:
            out.append(chr(rng.randrange(0x10000, 0x110000)))
    return "".join(out)


def random_value(rng, depth=0):
    k = rng.random()
    if depth > 3 or k < 0.35:
        return random_string(rng, rng.randrange(0, 12))
    if k < 0.45:
        return rng.choice([True, False, None])
    if k < 0.6:
        return rng.choice([0, -7, 12345678901234567890, 1.5, -0.25, 1e-7, 3.0])
    if k < 0.8:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    return {random_string(rng, rng.randrange(0, 6)): random_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))}


@pytest.fixture(scope="module", autouse=True)
def helper_built():
    if not os.path.exists(HELPER):
        pytest.fail(f"{HELPER} not built (make BUILD={BUILD} test builds tools/*.c)")


@pytest.mark.parametrize("ascii_only", [True, False])
def test_random_values_match_json_dumps(ascii_only):
    rng = random.Random(1234)
    for i in range(300):
        obj = random_value(rng)
        # feed a differently formatted (spaced, maybe raw-UTF-8) rendering
        src = json.dumps(obj, ensure_ascii=(i % 2 == 0), indent=(2 if i % 3 == 0 else None))
        expected = json.dumps(obj, separators=(",", ":"), ensure_ascii=ascii_only)
        r = canon(src.encode("utf-8"), ascii_only)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode("utf-8") == expected, src


def test_every_bmp_and_some_astral_code_points():
    chars = [chr(c) for c in range(0, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    chars += [chr(c) for c in range(0x10000, 0x110000, 977)] + [chr(0x10FFFF)]
    s = "".join(chars)
    for src in (json.dumps(s, ensure_ascii=False), json.dumps(s)):
        r = canon(src.encode("utf-8"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode("ascii") == json.dumps(s, separators=(",", ":"))


@pytest.mark.parametrize("text", [
    b"[1,]", b"{\"a\":1,}", b"01", b"NaN", b"[1] x", b"\"\\ud800\"", b"\"\xed\xa0\x80\"",
    b"\"\xc0\xaf\"", b"\"\xf4\x90\x80\x80\"", b"{\"a\":1,\"a\":2}", b"\"a\x01\"", b"", b"// x\n1",
])
def test_rejects(text):
    r = canon(text)
    assert r.returncode == 1
    assert b" at line " in r.stderr and b"(byte " in r.stderr

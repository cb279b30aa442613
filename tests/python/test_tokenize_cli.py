"""`needle tokenize` against the sentencepiece library on random texts built
from the hard parts: markers (whole and broken), whitespace runs, newlines,
control characters, accents, CJK, emoji, U+2581 itself."""
import json
import os
import random
import subprocess

import pytest

spm = pytest.importorskip("sentencepiece")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("NEEDLE_BUILD", "build")
EXE = os.path.join(ROOT, BUILD, "needle") if not os.path.isabs(BUILD) else os.path.join(BUILD, "needle")
MODEL = os.path.join(ROOT, "tests", "golden", "tok8k.model")
CACT = os.path.join(ROOT, "tests", "golden", "tiny_w4.cact")

ATOMS = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tools>", "</tools>", "<tool_call>",
         "</tool_call>", "<tool_result>", "</tool_result>", "<|im_", "</tool", "<", ">", " ", "  ", "   ",
         "\n", "\t", "\r\n", "\x01", "\x7f", "a", "the", "hello", "world", "name", '{"a":1}', "[]", "0.5",
         "\u00e9", "\u00fc", "\u65e5\u672c", "\U0001F600", "\U0001F389", "\u2581", "\u200b", "x", "_"]


def random_texts(n, seed=1234):
    r = random.Random(seed)
    return ["".join(r.choice(ATOMS) for _ in range(r.randint(0, 12))) for _ in range(n)]


@pytest.mark.skipif(not os.path.exists(EXE), reason="needle CLI not built")
@pytest.mark.parametrize("model", [MODEL, CACT])
def test_random_texts_match_sentencepiece(model):
    sp = spm.SentencePieceProcessor(model_file=MODEL)
    for text in random_texts(120):
        out = subprocess.run([EXE, "tokenize", "--model", model, "-"], input=text.encode("utf-8"),
                             capture_output=True, check=True)
        assert json.loads(out.stdout) == sp.encode(text), repr(text)


@pytest.mark.skipif(not os.path.exists(EXE), reason="needle CLI not built")
def test_decode_matches_sentencepiece_on_visible_ids():
    sp = spm.SentencePieceProcessor(model_file=MODEL)
    for text in random_texts(60, seed=99):
        ids = sp.encode(text)
        out = subprocess.run([EXE, "tokenize", "--model", MODEL, "--decode", json.dumps(ids)],
                             capture_output=True, check=True)
        assert out.stdout.decode("utf-8") == sp.decode(ids), repr(text)


@pytest.mark.skipif(not os.path.exists(EXE), reason="needle CLI not built")
def test_invalid_utf8_fails():
    out = subprocess.run([EXE, "tokenize", "--model", MODEL, "-"], input=b"ok\xff", capture_output=True)
    assert out.returncode == 1 and b"UTF-8" in out.stderr


ROWS = [{"query": "turn off the kitchen lights", "tools": [{"name": "set_lights", "description": "Lights",
         "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}}],
         "answers": [{"name": "set_lights", "arguments": {"room": "kitchen"}}]},
        {"query": "hi", "tools": [], "answers": [], "system": "date: 2026-12-03"},
        {"query": "what's next", "tools": [], "answers": [], "turns": [{"tool_result": {"ok": True}, "answers": []}]}]


@pytest.mark.skipif(not os.path.exists(EXE), reason="needle CLI not built")
def test_rows_counts_as_fine_tuning_renders(tmp_path):
    """--rows answers each row as it is read (the generator's coprocess), with the length the
    fine-tuning data path gives it (tools/render_rows), and a one-line error for a bad row."""
    render = os.path.join(ROOT, BUILD, "tools", "render_rows")
    assert os.path.exists(render), "tools/render_rows not built (make test builds it)"
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    want = [len(json.loads(l)["ids"]) for l in subprocess.run(
        [render, MODEL, "auto", str(path)], capture_output=True, text=True, check=True).stdout.splitlines()]
    p = subprocess.Popen([EXE, "tokenize", "--model", MODEL, "--rows"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    got = []
    for r in ROWS:  # one row in, one answer out, before the next row is written
        p.stdin.write(json.dumps(r) + "\n")
        p.stdin.flush()
        got.append(json.loads(p.stdout.readline())["tokens"])
    p.stdin.write('{"query": 5}\n')
    p.stdin.flush()
    err = json.loads(p.stdout.readline())["error"]
    p.stdin.close()
    assert p.wait() == 0
    assert got == want and len(set(got)) == 3
    assert "stdin:4" in err and "query" in err

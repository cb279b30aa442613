"""The 2.0.15 training layout (SPEC section 12) against the cactus-needle 2.0.15
package itself: for rows with non-ASCII text, system and reasoning present,
absent, blank and padded with (Unicode) whitespace, the ids and loss mask our
fine-tuning data path builds with --layout 2.0.15 (tools/render_rows, i.e.
src/train/data.c + src/text/chat.c) equal [BOS] + enc(prompt) + enc(target) +
[EOS] and the mask of the reference's own render_example / _encode, token for
token.  The reference runs in its own virtual environment (NEEDLE_N2015_VENV,
default /opt/venv-n2015; .ci/run installs it); without it the test is skipped,
and says so (a skip, never a pass)."""
import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("NEEDLE_BUILD", "build")
RENDER = os.path.join(ROOT, BUILD, "tools", "render_rows")
TOK = os.path.join(ROOT, "tests", "golden", "tok8k.model")
VENV = os.environ.get("NEEDLE_N2015_VENV", "/opt/venv-n2015")
PY = os.path.join(VENV, "bin", "python")
HELPER = os.path.join(os.path.dirname(__file__), "n2015_oracle.py")

WEATHER = {"name": "get_weather", "description": "Wetter für eine Stadt – heute 🌦",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "description": "Stadt, z. B. Zürich"},
               "unit": {"type": "string", "enum": ["°C", "°F"]}}, "required": ["city"]}}
LIGHTS = {"name": "set_lights", "description": "Turn lights on or off",
          "parameters": {"type": "object", "properties": {
              "room": {"type": "string"}, "on": {"type": "boolean"}}, "required": ["room", "on"]}}

ROWS = [
    # non-ASCII everywhere, system and reasoning present
    {"query": "Wie ist das Wetter in Zürich? 天気", "tools": [WEATHER, LIGHTS],
     "answers": [{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "°C"}}],
     "reasoning": "Der Nutzer fragt nach dem Wetter in Zürich.", "system": "date: 2026-03-14; locale: de-CH"},
    # no system, no reasoning: no system block, no think block
    {"query": "turn off the kitchen lights", "tools": [LIGHTS],
     "answers": [{"name": "set_lights", "arguments": {"room": "kitchen", "on": False}}]},
    # blank system and reasoning (whitespace, including U+00A0 and U+3000): stripped to nothing
    {"query": "lumières du salon", "tools": [LIGHTS],
     "answers": [{"name": "set_lights", "arguments": {"room": "salon", "on": True}}],
     "reasoning": " \n\t\u00a0", "system": "\u3000 \n"},
    # padded system and reasoning: stripped at both ends, inner whitespace kept
    {"query": "weather in Tōkyō", "tools": [WEATHER],
     "answers": [{"name": "get_weather", "arguments": {"city": "東京"}}],
     "reasoning": "\n  city  is\tTōkyō \u2003\n", "system": "\u00a0 user: Zoë;  locale: ja-JP \n"},
    # off-topic, function_calls spelling, null fields
    {"query": "tell me a joke 😀", "tools": [WEATHER, LIGHTS], "function_calls": [],
     "reasoning": None, "system": None},
    # tools and answers given as strings holding compact raw-UTF-8 JSON (as published datasets do)
    {"query": "Zürich?", "tools": json.dumps([WEATHER], separators=(",", ":"), ensure_ascii=False),
     "answers": json.dumps([{"name": "get_weather", "arguments": {"city": "Zürich"}}],
                           separators=(",", ":"), ensure_ascii=False),
     "reasoning": "é", "system": "é"},
]


def test_render_matches_cactus_needle_2_0_15(tmp_path):
    if not os.path.exists(PY):
        pytest.skip(f"SKIPPED, NOT PASSED: the cactus-needle 2.0.15 oracle venv {VENV} is missing "
                    "(python3 -m venv /opt/venv-n2015 && /opt/venv-n2015/bin/pip install cactus-needle==2.0.15 "
                    "sentencepiece jax flax; .ci/run does this)")
    assert os.path.exists(RENDER), "tools/render_rows not built (make test builds it)"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    env = dict(os.environ, NEEDLE_TELEMETRY="0", HF_HUB_OFFLINE="1")
    ref = subprocess.run([PY, HELPER, "render", TOK, str(rows)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert ref.returncode == 0, ref.stderr[-2000:]
    mine = subprocess.run([RENDER, TOK, "2.0.15", str(rows)], capture_output=True, text=True, check=True)
    ref_rows = [json.loads(x) for x in ref.stdout.splitlines()]
    my_rows = [json.loads(x) for x in mine.stdout.splitlines()]
    assert len(ref_rows) == len(ROWS) and len(my_rows) == len(ROWS)
    for i, (r, m) in enumerate(zip(ref_rows, my_rows)):
        assert "error" not in m, (i, m)
        assert m["ids"] == r["ids"], (i, r["prompt"], r["target"])
        assert m["mask"] == r["mask"], i
    # the cases really differ where the layouts differ: the 2.0.8 layout is not what the reference renders
    old = subprocess.run([RENDER, TOK, "2.0.8", str(rows)], capture_output=True, text=True, check=True)
    old_rows = [json.loads(x) for x in old.stdout.splitlines()]
    assert all(o["ids"] != r["ids"] for o, r in zip(old_rows, ref_rows))
    # the think block is there exactly when the stripped reasoning is non-empty
    assert [6 in r["ids"] for r in ref_rows] == [True, False, False, True, False, True]

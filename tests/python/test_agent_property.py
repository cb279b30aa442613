"""Property tests of `needle run` on the random-weight golden model.

Random weights are the hardest case for constrained decoding: only the grammar
keeps the output valid.  We generate hundreds of tool schemas and prompts, run
the CLI, and check every envelope with Python's own json module and every
call's arguments with the jsonschema package (an independent validator).

A random model may ramble inside a free string until the token budget runs
out; that turn must then be a well-formed failure (success false, error_code
NEEDLE_ELIMIT = -12, no calls), never invalid output.
"""
import json
import os
import random
import re
import subprocess

import pytest

jsonschema = pytest.importorskip("jsonschema")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("NEEDLE_BUILD", "build")
NEEDLE = os.path.join(ROOT, BUILD, "needle")
MODEL = os.path.join(ROOT, "tests", "golden", "tiny_w4.cact")
ENVELOPE_KEYS = {"type", "success", "error", "error_code", "function_calls", "reasoning", "confidence",
                 "prefill_tps", "decode_tps", "peak_ram_mb", "validation", "suppressed_calls"}
NEEDLE_ELIMIT = -12

WORDS = ["room", "city", "level", "name", "when", "count", "tags", "mode", "target", "note", "zone", "speed",
         "Größe", "日付", "value", "items"]
QUERIES = ["turn on the kitchen lights", "what's the weather in Zürich tomorrow?", "set a timer for 5 minutes",
           "play some jazz", "remind me to call mum at 6pm", "hello", "book a table for two at 7",
           "envoie un message à Paul", "音楽をかけて", "dim the hall lights to 30%"]


def need_cli():
    if not os.path.exists(NEEDLE):
        pytest.skip(f"{NEEDLE} not built")


def gen_schema(r, depth=0):
    kinds = ["string", "enum", "integer", "number", "boolean", "array", "object", "const", "anyof"]
    if depth >= 2:
        kinds = kinds[:5]
    k = r.choice(kinds)
    if k == "string":
        s = {"type": "string"}
        roll = r.random()
        if roll < 0.3:
            s["maxLength"] = r.randint(1, 8)
        elif roll < 0.45:
            s["pattern"] = r.choice(["^[a-z]{2,5}$", "^[0-9]{3}$", "^(yes|no)$", "^[A-Z][a-z]*$"])
        elif roll < 0.6:
            s["description"] = "an annotation"
            s["minLength"] = 1
            s["maxLength"] = 12
        return s
    if k == "enum":
        vals = r.sample(["red", "green", "blue", "Zürich", "on", "off", "日本", "a b"], r.randint(1, 4))
        return {"type": "string", "enum": vals}
    if k == "integer":
        lo = r.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + r.randint(0, 200)}
    if k == "number":
        return {"type": "number", "minimum": 0, "maximum": r.choice([1, 10, 1000])}
    if k == "boolean":
        return {"type": "boolean"}
    if k == "const":
        return {"const": r.choice(["fixed", 3, True])}
    if k == "anyof":
        return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string", "enum": ["none", "all"]}]}
    if k == "array":
        return {"type": "array", "items": gen_schema(r, depth + 1), "minItems": r.randint(0, 1),
                "maxItems": r.randint(1, 3)}
    return gen_object(r, depth + 1)


def gen_object(r, depth=0):
    n = r.randint(0 if depth else 1, 3)
    names = r.sample(WORDS, n)
    props = {nm: gen_schema(r, depth) for nm in names}
    req = [nm for nm in names if r.random() < 0.6]
    s = {"type": "object", "properties": props}
    if req:
        s["required"] = req
    return s


def gen_tools(r):
    tools = []
    for i in range(r.randint(1, 4)):
        tools.append({"name": f"tool_{i}_{r.choice(['set', 'get', 'play', 'send'])}",
                      "description": r.choice(["Does a thing", "Réglage für die Lampe", "天気を調べる", ""]),
                      "parameters": gen_object(r)})
    return tools


def run_cli(args, stdin=None, timeout=120):
    p = subprocess.run([NEEDLE, "run", "--model", MODEL, "--threads", "1"] + args, input=stdin,
                       capture_output=True, timeout=timeout, cwd=ROOT)
    return p


def check_envelope(env, tools):
    assert set(env) == ENVELOPE_KEYS, env
    assert env["type"] == ("call" if env["function_calls"] else "respond")
    assert isinstance(env["reasoning"], str)
    for k in ("prefill_tps", "decode_tps", "peak_ram_mb"):
        assert isinstance(env[k], (int, float)) and env[k] >= 0
    if not env["success"]:
        assert env["error_code"] == NEEDLE_ELIMIT, env
        assert isinstance(env["error"], str) and env["function_calls"] == []
        assert env["confidence"] is None
        return False
    assert env["error"] is None and env["error_code"] is None
    assert isinstance(env["confidence"], (int, float)) and 0 < env["confidence"] <= 1
    by_name = {t["name"]: t for t in tools}
    for call in env["function_calls"]:
        assert set(call) == {"name", "arguments"}
        assert call["name"] in by_name, call
        jsonschema.validate(call["arguments"], by_name[call["name"]]["parameters"])
    return True


def test_random_schemas_give_valid_envelopes(tmp_path):
    need_cli()
    r = random.Random(20250501)
    n_cases, successes, calls, refused = 120, 0, 0, 0
    for case in range(n_cases):
        tools = gen_tools(r)
        path = tmp_path / f"tools{case}.json"
        path.write_text(json.dumps(tools, ensure_ascii=False))
        args = ["--tools", str(path), "--max-new-tokens", "120", "--max-reasoning-tokens", str(r.randint(1, 6))]
        if case % 2:
            args += ["--temperature", "1.0", "--top-p", "0.95", "--seed", str(case)]
        queries = r.sample(QUERIES, 2)
        p = run_cli(args, stdin="\n".join(queries).encode() + b"\n")
        if p.returncode == 1 and not p.stdout and b"over the limit of" in p.stderr:
            # a tools block longer than the model's context is refused up front (context_budget.h)
            assert re.search(rb"tools: the tools block is \d+ tokens, \d+ over the limit of \d+ \(max_seq_len 512",
                             p.stderr), p.stderr
            refused += 1
            continue
        lines = p.stdout.decode("utf-8").splitlines()
        assert len(lines) == 2, p.stdout
        all_ok = True
        for line in lines:
            env = json.loads(line)
            if check_envelope(env, tools):
                successes += 1
                calls += len(env["function_calls"])
            else:
                all_ok = False
        # the exit status says whether any turn's envelope reported success:false
        assert p.returncode == (0 if all_ok else 1), p.stderr.decode()
    print(f"{successes}/{2 * (n_cases - refused)} turns succeeded, {calls} calls validated, "
          f"{refused} tool sets refused as longer than the context")
    # most random tool sets fit the context
    assert refused <= n_cases // 4, refused
    # bounded schemas finish; free strings may exhaust the budget, but not always
    assert successes >= (n_cases - refused) // 2, successes
    assert calls > 0


def test_multi_turn_stdin_and_error_lines(tmp_path):
    need_cli()
    tools = [{"name": "set_lights", "description": "Lights",
              "parameters": {"type": "object", "properties": {"room": {"enum": ["kitchen", "hall"]},
                                                              "on": {"type": "boolean"}},
                             "required": ["room", "on"]}}]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    turns = ["turn on the kitchen lights", '{"status": "ok"}', "{not json", "and the hall",
             '["done"]', "caf\udcc3"]
    data = "\n".join(turns).encode("utf-8", "surrogateescape") + b"\n"
    p = run_cli(["--tools", str(path), "--max-new-tokens", "300", "--window", "16"], stdin=data)
    assert p.returncode == 1, p.stderr.decode()  # every line answered; two of them failed
    lines = p.stdout.decode("utf-8").splitlines()
    assert len(lines) == len(turns)
    envs = [json.loads(x) for x in lines]
    for i in (0, 1, 3, 4):
        assert check_envelope(envs[i], tools)
    assert envs[2]["success"] is False and envs[2]["error_code"] == -5  # NEEDLE_EJSON
    assert envs[5]["success"] is False and envs[5]["error_code"] == -7  # NEEDLE_EUTF8


def test_cli_errors(tmp_path):
    need_cli()
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": "x", "parameters": {"type": "object", "properties": {"a": {"not": {}}}}}]')
    p = run_cli(["--tools", str(bad), "hi"])
    assert p.returncode == 1 and b"not" in p.stderr
    bad.write_text('[{"name": ')
    p = run_cli(["--tools", str(bad), "hi"])
    assert p.returncode == 1 and b"tools" in p.stderr
    p = subprocess.run([NEEDLE, "run", "--model", str(tmp_path / "missing.cact"), "hi"], capture_output=True)
    assert p.returncode == 1 and b"missing.cact" in p.stderr
    p = run_cli(["--max-new-tokens", "zero", "hi"])
    assert p.returncode == 2

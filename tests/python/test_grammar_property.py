"""Property test of the constrained-decoding grammar against Python's jsonschema.

Hundreds of random tool declarations are generated; for each, the C sampler
(BUILD/tools/grammar_sample) prints random complete outputs, choosing uniformly
among the bytes (or tokens) the grammar allows.  Every output must:
  - parse as JSON and be compact (no whitespace outside strings),
  - be a list of {"name","arguments"} calls (in that key order) naming declared tools,
  - have arguments valid under that tool's schema (jsonschema, with formats checked),
  - emit object keys in the schema's declaration order.
The sampler also reports a dead end (a state with nothing allowed that is not
complete), which the automaton promises never to reach.  A second part checks the
mask cost with the real 8192-token vocabulary (tests/golden/tok8k.model).
"""
import json
import os
import random
import re
import subprocess
import tempfile

import jsonschema
import pytest

BUILD = os.environ.get("NEEDLE_BUILD", "build")
SAMPLER = os.path.join(BUILD, "tools", "grammar_sample")
STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)

pytestmark = pytest.mark.skipif(not os.path.exists(SAMPLER), reason="grammar_sample not built")

WORDS = ["alpha", "beta", "caf\u00e9", "\u65e5\u672c", "x y", "quo\"te", "back\\slash", "", "emoji\U0001F600", "tab\t"]


def rand_pattern(r):
    atoms = ["[a-z]", "[A-Z0-9]", "\\d", "\\w", "x", "ab", "[^\"\\\\]", "\\.", "-", "[\u00e0-\u00ff]"]

    def piece(depth):
        if depth < 2 and r.random() < 0.25:
            return "(" + "|".join(piece(depth + 1) for _ in range(r.randint(1, 3))) + ")"
        a = r.choice(atoms)
        q = r.choice(["", "", "?", "*", "+", "{2}", "{1,3}", "{0,2}"])
        return a + q

    body = "".join(piece(0) for _ in range(r.randint(1, 4)))
    return r.choice(["^", ""]) + body + r.choice(["$", ""])


def rand_schema(r, depth, defs):
    kinds = ["string", "integer", "number", "boolean", "enum", "null_union"]
    if depth < 3:
        kinds += ["object", "array", "anyof", "ref", "any"]
    k = r.choice(kinds)
    if k == "string":
        s = {"type": "string"}
        c = r.random()
        if c < 0.3:
            s["pattern"] = rand_pattern(r)
        elif c < 0.45:
            s["format"] = r.choice(["date", "time", "date-time", "email", "uuid"])
        if r.random() < 0.4:
            lo = r.randint(0, 4)
            s["minLength"] = lo
            if r.random() < 0.7:
                s["maxLength"] = lo + r.randint(0, 8)
        if "pattern" in s and s.get("maxLength", 99) < 4:
            s.pop("maxLength")  # keep most patterns satisfiable
        return s
    if k == "integer":
        s = {"type": "integer"}
        if r.random() < 0.5:
            s["minimum"] = r.randint(-50, 50)
        if r.random() < 0.5:
            s["maximum"] = s.get("minimum", -50) + r.randint(0, 1000)
        if r.random() < 0.2:
            s["exclusiveMinimum"] = s.pop("minimum", 3)
            s["maximum"] = max(s.get("maximum", 0), s["exclusiveMinimum"] + 5)
        if r.random() < 0.25:
            s["multipleOf"] = r.choice([2, 3, 5, 7, 10])
        return s
    if k == "number":
        s = {"type": "number"}
        if r.random() < 0.5:
            s["minimum"] = r.choice([0, -1.5, 0.25, 10])
        if r.random() < 0.5:
            s["maximum"] = s.get("minimum", 0) + r.choice([0.5, 1, 100, 12.75])
        if r.random() < 0.2:
            s["exclusiveMaximum"] = s.pop("maximum", 3.5)
        return s
    if k == "boolean":
        return {"type": "boolean"}
    if k == "enum":
        vals = r.sample(WORDS, 3) + r.sample([1, 2.5, -3, True, None, [1, "a"], {"k": "v"}], 2)
        r.shuffle(vals)
        if r.random() < 0.3:
            return {"const": vals[0]}
        return {"enum": vals[: r.randint(1, 5)]}
    if k == "null_union":
        return {"type": [r.choice(["string", "integer", "boolean"]), "null"]}
    if k == "any":
        return r.choice([{}, {"description": "anything"}])
    if k == "object":
        return rand_object(r, depth + 1, defs)
    if k == "array":
        s = {"type": "array", "items": rand_schema(r, depth + 1, defs)}
        if r.random() < 0.5:
            s["minItems"] = r.randint(0, 2)
        if r.random() < 0.5:
            s["maxItems"] = s.get("minItems", 0) + r.randint(0, 3)
        if r.random() < 0.15:
            s["prefixItems"] = [rand_schema(r, depth + 1, defs)]
        return s
    if k == "anyof":
        key = r.choice(["anyOf", "oneOf"]) if False else "anyOf"
        return {key: [rand_schema(r, depth + 1, defs) for _ in range(r.randint(2, 3))]}
    if k == "ref":
        name = "D%d" % len(defs)
        defs[name] = rand_object(r, depth + 1, defs)
        return {"$ref": "#/$defs/" + name}
    raise AssertionError(k)


def rand_object(r, depth, defs):
    names = r.sample(["a", "b", "city", "when", "n", "caf\u00e9", "x_y", "long_key_name"], r.randint(0, 4))
    props = {n: rand_schema(r, depth, defs) for n in names}
    s = {"type": "object", "properties": props}
    req = [n for n in names if r.random() < 0.5]
    if req:
        s["required"] = req
    return s


def make_tools(r):
    tools = []
    for i in range(r.randint(1, 4)):
        defs = {}
        params = rand_object(r, 0, defs)
        if defs:
            params["$defs"] = defs
        tools.append({"name": r.choice(["get", "set", "find", "do"]) + "_%d" % i, "description": "t", "parameters": params})
    return tools


def no_ws_outside_strings(text):
    return not re.search(r"\s", STRING_RE.sub('""', text))


def keys_in_order(value, schema, defs_root):
    """Object keys appear in the schema's declaration order (where a schema with properties applies)."""
    if isinstance(schema, dict) and "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        schema = defs_root.get("$defs", {}).get(name, {})
    if isinstance(value, dict) and isinstance(schema, dict) and "properties" in schema:
        order = list(schema["properties"])
        idx = [order.index(k) for k in value if k in order]
        if idx != sorted(idx):
            return False
        return all(keys_in_order(value[k], schema["properties"][k], defs_root) for k in value if k in order)
    return True


def run_sampler(path, seed, n, extra=()):
    p = subprocess.run([SAMPLER, path, str(seed), str(n), *extra], capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode()


def check_outputs(tools, lines):
    by_name = {t["name"]: t for t in tools}
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for line in lines:
        assert no_ws_outside_strings(line), line
        calls = json.loads(line)
        assert isinstance(calls, list), line
        for call in calls:
            assert list(call) == ["name", "arguments"], line
            tool = by_name[call["name"]]
            params = tool["parameters"]
            jsonschema.Draft202012Validator(params, format_checker=checker).validate(call["arguments"])
            assert keys_in_order(call["arguments"], params, params), line
            # closed objects: no undeclared keys at the top level
            assert set(call["arguments"]) <= set(params["properties"]), line


@pytest.mark.parametrize("mode", ["bytes", "tokens"])
def test_random_schemas(mode):
    r = random.Random(1234 if mode == "bytes" else 777)
    n_schemas = 150 if mode == "bytes" else 80
    checked = 0
    with tempfile.TemporaryDirectory() as d:
        for i in range(n_schemas):
            tools = make_tools(r)
            path = os.path.join(d, "tools%d.json" % i)
            with open(path, "w") as f:
                json.dump(tools, f)
            extra = ["--tokens", "synthetic"] if mode == "tokens" else []
            rc, out, err = run_sampler(path, i, 6, extra)
            if out.startswith("ERROR"):
                # only unsatisfiable random schemas may be refused (e.g. a pattern
                # that cannot meet its length bounds); nothing else
                assert "no value satisfies" in out or "NEEDLE_ESCHEMA" in out, out
                assert "unsupported" not in out, out
                continue
            assert rc == 0, (tools, out, err)
            lines = out.split("\n")[:-1]
            assert len(lines) == 6
            try:
                check_outputs(tools, lines)
            except Exception as e:  # pragma: no cover - show the failing case
                raise AssertionError("%s\n%s\n%s" % (json.dumps(tools), out, e))
            checked += 1
    assert checked > n_schemas * 0.8


def test_schema_errors_name_the_path():
    with tempfile.TemporaryDirectory() as d:
        cases = [
            ({"type": "object", "properties": {"when": {"not": {"type": "string"}}}}, 'tools[0].parameters.properties.when: unsupported keyword "not"'),
            ({"type": "object", "properties": {"p": {"type": "string", "pattern": "(a)\\1"}}}, "tools[0].parameters.properties.p.pattern"),
            ({"type": "object", "properties": {"t": {"anyOf": [{"type": "array", "uniqueItems": True}, {"type": "null"}]}}},
             "uniqueItems"),
            ({"type": "object", "properties": {"q": {"type": "string", "pattern": "(?=a)b"}}}, "lookaround"),
        ]
        for params, want in cases:
            path = os.path.join(d, "t.json")
            with open(path, "w") as f:
                json.dump([{"name": "f", "parameters": params}], f)
            rc, out, err = run_sampler(path, 1, 1)
            assert rc == 3 and "NEEDLE_ESCHEMA" in out and want in out, out


def spm_vocab_tsv(path):
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file="tests/golden/tok8k.model")
    lines = []
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i) or i < 14:
            continue
        piece = sp.id_to_piece(i)
        if sp.is_byte(i):
            b = bytes([int(piece[3:5], 16)])
        else:
            b = piece.replace("\u2581", " ").encode("utf-8")
        lines.append("%d\t%s" % (i, b.hex()))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return sp.get_piece_size()


def test_real_vocabulary_masks_and_cost():
    tools = [
        {"name": "get_weather", "description": "Weather for a city", "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "City"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["location"]}},
        {"name": "send_message", "parameters": {"type": "object", "properties": {
            "recipient": {"type": "string", "maxLength": 40},
            "body": {"type": "string"},
            "when": {"type": "string", "format": "date-time"},
            "urgent": {"type": "boolean"}}, "required": ["recipient", "body"]}},
        {"name": "create_event", "parameters": {"type": "object", "properties": {
            "title": {"type": "string"},
            "date": {"type": "string", "format": "date"},
            "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 5},
            "duration_minutes": {"type": "number", "minimum": 0, "maximum": 1440}}, "required": ["title", "date"]}},
    ]
    with tempfile.TemporaryDirectory() as d:
        vpath = os.path.join(d, "vocab.tsv")
        spm_vocab_tsv(vpath)
        tpath = os.path.join(d, "tools.json")
        with open(tpath, "w") as f:
            json.dump(tools, f)
        rc, out, err = run_sampler(tpath, 5, 20, ["--tokens", vpath, "--bench", "--budget", "120"])
        assert rc == 0, err
        check_outputs(tools, out.split("\n")[:-1])
        m = re.search(r"uncached_avg_us=([0-9.]+)", err)
        assert m, err
        print("\nreal-vocab mask cost:", err.strip())
        # a decode step is ~1-2 ms; the mask must stay well below that on average
        assert float(m.group(1)) < 2000, err

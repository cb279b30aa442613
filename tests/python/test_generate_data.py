"""Tests of tools/generate_data.py (`needle generate-data`): data for any tool set.

The generator runs as a program, as users run it. Checks re-derive what a
row's answers must be from the row's own text with independent parsers
(clock times, dates relative to the row's `date:` fact, numbers in digits or
words, unit symbols), so a generator bug shows up as a failure instead of being
compared with the generator's own output.
"""
import datetime
import http.server
import json
import os
import re
import subprocess
import sys
import threading

import pytest

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("faker")
num2words = pytest.importorskip("num2words").num2words
get_lemma = pytest.importorskip("lemminflect").getLemma

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN = os.path.join(ROOT, "tools", "generate_data.py")
NEEDLE = os.path.join(ROOT, os.environ.get("NEEDLE_BUILD", "build"), "needle")
SPLITS = ("train", "val", "test")
WEIGHTS = {"positive": 0.34, "parallel": 0.12, "missing": 0.11, "irrelevant": 0.15, "negation": 0.10,
           "invalid": 0.09, "multi_turn": 0.09}
NO_CALL = {"missing", "irrelevant", "negation", "invalid"}
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"]
# A tool set of other shapes than the demo tools: patterns, formats, arrays, ranges, no enum sibling units.
MIXED_TOOLS = [
    {"name": "book_table", "description": "Book a table at a restaurant",
     "parameters": {"type": "object", "properties": {
         "restaurant": {"type": "string", "description": "restaurant name"},
         "party_size": {"type": "integer", "minimum": 1, "maximum": 12},
         "date": {"type": "string", "format": "date"},
         "time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
         "contact_email": {"type": "string", "format": "email"}},
         "required": ["restaurant", "party_size", "date"]}},
    {"name": "create_ticket", "description": "Open a support ticket",
     "parameters": {"type": "object", "properties": {
         "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$", "description": "product code"},
         "priority": {"type": "string", "enum": ["low", "medium", "high"]},
         "tags": {"type": "array", "items": {"type": "string"}},
         "urgent": {"type": "boolean"}},
         "required": ["code", "priority"]}},
    {"name": "start_timer", "description": "Start a countdown timer",
     "parameters": {"type": "object", "properties": {
         "duration_minutes": {"type": "integer", "minimum": 1, "maximum": 180},
         "label": {"type": "string"}},
         "required": ["duration_minutes"]}},
]


def run_gen(out, tools, *args, env=None):
    cmd = [sys.executable, GEN, "--tools", str(tools), "--out", str(out)] + [str(a) for a in args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    return res


def read_rows(out):
    return {s: [json.loads(l) for l in open(os.path.join(out, s + ".jsonl"), encoding="utf-8")] for s in SPLITS}


@pytest.fixture(scope="module")
def mixed_tools(tmp_path_factory):
    p = tmp_path_factory.mktemp("tools") / "mixed.json"
    p.write_text(json.dumps(MIXED_TOOLS))
    return p


@pytest.fixture(scope="module", params=["demo", "mixed"])
def generated(request, tmp_path_factory, mixed_tools):
    tools = os.path.join(ROOT, "models", "tools.json") if request.param == "demo" else mixed_tools
    out = tmp_path_factory.mktemp("gen_" + request.param)
    run_gen(out, tools, "--examples", 700, "--seed", 11)
    with open(tools, encoding="utf-8") as f:
        schemas = {t["name"]: t["parameters"] for t in json.load(f)}
    return request.param, out, read_rows(out), schemas


def all_rows(generated):
    for s in SPLITS:
        yield from generated[2][s]


def date_fact(row):
    m = re.search(r"date: (\d{4}-\d{2}-\d{2})", row.get("system", ""))
    return datetime.date.fromisoformat(m.group(1)) if m else None


# ---- independent readers of what a request says -------------------------------------------------
WORD_NUM = {num2words(i): i for i in range(0, 60)}
WORD_NUM.update({w.replace("-", " "): i for w, i in list(WORD_NUM.items())})


def times_said(q):
    """Every HH:MM a listener could read from q."""
    q = q.lower()
    out = set()

    def add(h, m, part):
        if part in ("pm", "p.m.", "in the afternoon", "in the evening") and h < 12:
            h += 12
        if part in ("am", "a.m.", "in the morning") and h == 12:
            h = 0
        if part == "at night":
            h = 0 if h == 12 else (h + 12 if 6 <= h < 12 else h)
        out.add("%02d:%02d" % (h, m))
    part_rx = r"\s*(am|pm|a\.m\.|p\.m\.|in the morning|in the afternoon|in the evening|at night)?"
    for m in re.finditer(r"\b(\d{1,2})[:.](\d{2})" + part_rx, q):
        add(int(m.group(1)), int(m.group(2)), m.group(3))
    for m in re.finditer(r"\b(\d{1,2})\s*(?:o'clock)?\s*(am|pm|in the morning|in the afternoon|in the evening|at night)", q):
        add(int(m.group(1)), 0, m.group(2))
    words = "|".join(sorted(WORD_NUM, key=len, reverse=True))
    for m in re.finditer(r"\b(half past|quarter past|a quarter past|quarter to|a quarter to) (%s|\d{1,2})" % words + part_rx, q):
        h = WORD_NUM.get(m.group(2), None) if not m.group(2).isdigit() else int(m.group(2))
        kind = m.group(1).replace("a quarter", "quarter")
        if kind == "quarter to":
            add((h - 1) % 12 or 12, 45, m.group(3) if h != 12 else m.group(3))
            if h == 12:
                add(11, 45, m.group(3))
        else:
            add(h, 30 if kind == "half past" else 15, m.group(3))
    for m in re.finditer(r"(?=\b(%s)[ ]*(?:o'clock[ ]*)?(%s)?" % (words, words) + part_rx + ")", q):  # overlapping
        h = WORD_NUM[m.group(1)]
        mi = WORD_NUM.get(m.group(2) or "", 0)
        if 1 <= h <= 12:
            add(h, mi, m.group(3))
    if "quarter to noon" in q:
        out.add("11:45")
    if "quarter to midnight" in q:
        out.add("23:45")
    if "noon" in q or "midday" in q:
        out.add("12:00")
    if "midnight" in q:
        out.add("00:00")
    return out


def dates_said(q, today):
    """Every ISO date a listener could read from q (relative ones need today)."""
    ql = q.lower()
    out = set(re.findall(r"\d{4}-\d{2}-\d{2}", q))
    for i, mon in enumerate(MONTHS):
        for m in re.finditer(r"(?:(\d{1,2})(?:st|nd|rd|th)?(?: of)? %s|%s (\d{1,2})(?:st|nd|rd|th)?)(?:,? (\d{4}))?" %
                             (mon, mon[:3] + "(?:" + mon[3:] + ")?"), ql):
            day = int(m.group(1) or m.group(2))
            years = [int(m.group(3))] if m.group(3) else ([today.year, today.year + 1] if today else [])
            for y in years:
                try:
                    d = datetime.date(y, i + 1, day)
                except ValueError:
                    continue
                if m.group(3) or d >= today:
                    out.add(d.isoformat())
    if today:
        rel = {"today": 0, "tonight": 0, "tomorrow": 1, "the day after tomorrow": 2, "in two days": 2,
               "a week from today": 7, "in a week": 7, "in two weeks": 14}
        for k, v in rel.items():
            if k in ql:
                out.add((today + datetime.timedelta(days=v)).isoformat())
        for m in re.finditer(r"in (\d+) days", ql):
            out.add((today + datetime.timedelta(days=int(m.group(1)))).isoformat())
        for i, wd in enumerate(WEEKDAYS):
            if wd in ql:
                ahead = (i - today.weekday()) % 7 or 7
                out.add((today + datetime.timedelta(days=ahead)).isoformat())
        for m in re.finditer(r"the (\d{1,2})(?:st|nd|rd|th)\b", ql):
            try:
                out.add(today.replace(day=int(m.group(1))).isoformat())
            except ValueError:
                pass
    return out


NUMBER_WORDS = [(n, num2words(n)) for n in range(0, 1000)]
NUMBER_WORDS = [(n, w, w.replace("-", " ")) for n, w in NUMBER_WORDS]


def numbers_said(q):
    ql = q.lower()
    out = {float(x) for x in re.findall(r"(?<![\d:])\d+(?:\.\d+)?", ql)}
    for n, w, w2 in NUMBER_WORDS:
        if (w in ql or w2 in ql) and (re.search(r"\b%s\b" % re.escape(w), ql) or re.search(r"\b%s\b" % re.escape(w2), ql)):
            out.add(float(n))
    for m in re.finditer(r"(\w[\w -]*?) point five", ql):
        for n in range(0, 100):
            if m.group(1).endswith(num2words(n)) or m.group(1).endswith(num2words(n).replace("-", " ")):
                out.add(n + 0.5)
    conv = {"half an hour": 30, "a quarter of an hour": 15, "an hour": 60, "one hour": 60, "an hour and a half": 90,
            "three quarters of an hour": 45, "two hours": 120, "three hours": 180, "a day": 24, "half a minute": 30,
            "a minute": 60, "one minute": 60, "a minute and a half": 90, "two minutes": 120, "three minutes": 180,
            "five minutes": 300, "a litre": 1000, "one liter": 1000, "1 l": 1000, "half a litre": 500, "0.5 l": 500,
            "1.5 litres": 1500, "one and a half liters": 1500, "a quarter litre": 250, "two litres": 2000,
            "2 liters": 2000, "0.75 litres": 750}
    for k, v in conv.items():
        if k in ql:
            out.add(float(v))
    for m in re.finditer(r"(\d+) min", ql):  # "5 minutes" for a parameter in seconds
        out.add(float(int(m.group(1)) * 60))
    return out


# ---- the tests -------------------------------------------------------------------------------------------------
def test_deterministic_per_seed(tmp_path, mixed_tools):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    run_gen(a, mixed_tools, "--examples", 120, "--seed", 3)
    run_gen(b, mixed_tools, "--examples", 120, "--seed", 3)
    run_gen(c, mixed_tools, "--examples", 120, "--seed", 4)
    for s in SPLITS:
        assert (a / (s + ".jsonl")).read_bytes() == (b / (s + ".jsonl")).read_bytes()
    assert (a / "train.jsonl").read_bytes() != (c / "train.jsonl").read_bytes()


def test_deterministic_across_processes(tmp_path):
    """Two processes under different string-hash seeds write the same rows (Faker orders some of its
    value lists by hash; 1,500 wearable rows drew an it_IT city that differed between processes)."""
    tools = os.path.join(ROOT, "examples", "wearable", "tools.json")
    a, b = tmp_path / "a", tmp_path / "b"
    run_gen(a, tools, "--examples", 1500, "--seed", 1, env=dict(os.environ, PYTHONHASHSEED="1"))
    run_gen(b, tools, "--examples", 1500, "--seed", 1, env=dict(os.environ, PYTHONHASHSEED="2"))
    for s in SPLITS:
        assert (a / (s + ".jsonl")).read_bytes() == (b / (s + ".jsonl")).read_bytes(), s


def test_answers_validate_against_the_schemas(generated):
    _, _, rows, schemas = generated
    fc = jsonschema.FormatChecker(formats=["date", "email"])
    n = 0
    for row in all_rows(generated):
        for turn_answers in [row["answers"]] + [t["answers"] for t in row.get("turns", [])]:
            for call in turn_answers:
                assert call["name"] in schemas, row
                jsonschema.validate(call["arguments"], schemas[call["name"]], format_checker=fc)
                n += 1
    assert n > 300


def test_rows_are_in_the_fine_tuning_format(generated):
    _, _, rows, schemas = generated
    for row in all_rows(generated):
        assert isinstance(row["query"], str) and row["query"].strip()
        assert isinstance(row["tools"], list) and {t["name"] for t in row["tools"]} == set(schemas)
        assert isinstance(row["answers"], list)
        assert "system" not in row or isinstance(row["system"], str)


def test_categories_in_their_proportions(generated):
    name, _, rows, _ = generated
    for s in SPLITS:
        n = len(rows[s])
        assert n == {"train": 560, "val": 70, "test": 70}[s]
        counts = {c: sum(1 for r in rows[s] if r["category"] == c) for c in WEIGHTS}
        for c, w in WEIGHTS.items():
            assert abs(counts[c] / n - w) <= (0.02 if s == "train" else 0.05), (name, s, c, counts)


def test_no_call_categories_have_empty_answers_and_the_others_do_not(generated):
    for row in all_rows(generated):
        if row["category"] in NO_CALL:
            assert row["answers"] == [], row
        else:
            assert row["answers"], row
        if row["category"] == "parallel":
            assert len(row["answers"]) >= 2
        if row["category"] == "negation":
            assert re.search(r"\b(don'?t|do not|no need|never mind|not|shouldn'?t|didn'?t|forget it|do NOT)\b",
                             row["query"], re.I), row["query"]


def test_multi_turn_rows_end_without_repeating_the_call(generated):
    n = 0
    for row in all_rows(generated):
        if row["category"] != "multi_turn":
            continue
        n += 1
        turns = row["turns"]
        assert turns and "tool_result" in turns[0]
        last_calls = row["answers"]
        for t in turns:
            if "tool_result" in t:
                assert t["answers"] == [], row  # the final answer after a result is not a repeat
                assert t["reasoning"]
            else:
                assert t["user"] and t["answers"] and t["answers"] != last_calls
                last_calls = t["answers"]
    assert n >= 20


def test_follow_up_rate_sets_how_many_results_are_followed_by_a_request(tmp_path, mixed_tools):
    """--follow-up-rate 0 gives no request after a tool result, 1 one in every multi-turn row that fits;
    tool results come in the shapes agents send (an object, or a list of one result per call, as
    needle.Needle.run sends them), and the row still validates in `needle finetune`'s format."""
    weights = json.dumps({"multi_turn": 1.0, "positive": 0.1})
    counts = {}
    for rate in (0, 1):
        out = tmp_path / ("r%d" % rate)
        run_gen(out, mixed_tools, "--examples", 200, "--seed", 5, "--weights", weights, "--max-tokens", 0,
                "--follow-up-rate", rate)
        multi = [r for rows in read_rows(out).values() for r in rows if r["category"] == "multi_turn"]
        assert len(multi) >= 100
        counts[rate] = sum(any("user" in t for t in r["turns"]) for r in multi) / len(multi)
        shapes = {type(t["tool_result"]).__name__ for r in multi for t in r["turns"] if "tool_result" in t}
        assert shapes == {"dict", "list"}
    assert counts[0] == 0 and counts[1] > 0.6, counts
    res = subprocess.run([sys.executable, GEN, "--tools", str(mixed_tools), "--out", str(tmp_path / "bad"),
                          "--follow-up-rate", "1.5"], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "--follow-up-rate" in res.stderr


def states_said(q, pschema):
    """Numbers a request says by a state its parameter's description names: with "(0 closed, 100
    fully open)", "close the blinds" says 0, "open them all the way" / "fully open" 100, and
    "halfway" the middle."""
    desc = (pschema or {}).get("description", "")
    pairs = re.findall(r"(\d+) ([a-z]+(?: [a-z]+)?)(?=[,)])", desc)
    ql, out = q.lower(), set()
    for n, state in pairs:
        last = state.split()[-1]
        stem = last[:-2] if last.endswith("ed") else last[:-1] if last.endswith("e") else last
        if re.search(r"\b%s" % stem, ql) and (not state.startswith("fully ") or
                                              re.search(r"fully|all the way|completely", ql)):
            out.add(float(n))
    if len(pairs) == 2 and re.search(r"\bhalf ?way\b", ql):
        out.add((float(pairs[0][0]) + float(pairs[1][0])) / 2)
    return out


def value_is_said(v, q, today, pschema):
    """True when the request says v verbatim or in a spelling that converts to it."""
    if isinstance(v, bool):
        return True
    if isinstance(v, (int, float)):
        return float(v) in numbers_said(q) or float(v) in states_said(q, pschema)
    if isinstance(v, list):
        days = [d.lower() for d in v if isinstance(d, str) and d.lower() in WEEKDAYS]
        if days and len(days) == len(v):
            ql = q.lower()
            return all(d in ql for d in days) or (days == WEEKDAYS[:5] and re.search(r"weekday|monday to friday", ql)) \
                or (days == WEEKDAYS[5:] and "weekend" in ql)
        items = pschema.get("items", {}) if pschema else {}
        return all(value_is_said(x, q, today, items) for x in v)
    if isinstance(v, dict):
        props = (pschema or {}).get("properties", {})
        return all(value_is_said(x, q, today, props.get(k)) for k, x in v.items())
    ql = q.lower()
    if v.lower() in ql or v.lower().replace("_", " ") in ql:
        return True
    if re.fullmatch(r"[a-z]+ing", v):  # an activity said as its verb: "start a run" for "running"
        verb = get_lemma(v, upos="VERB")[0]
        if verb != v and re.search(r"\b%s\b" % re.escape(verb), ql):
            return True
    if re.fullmatch(r"\d{2}:\d{2}", v):
        return v in times_said(q)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        return v in dates_said(q, today)
    unit_words = {"fahrenheit": r"\d\s*°?F\b|degrees F\b|fahrenheit", "celsius": r"\d\s*[°º]?C\b|degrees C\b|celsius",
                  "USD": r"\$|dollars|USD", "EUR": r"€|euros|EUR", "GBP": r"£|pounds|GBP", "JPY": r"¥|yen|JPY",
                  "CAD": r"CA\$|Canadian|CAD", "INR": r"₹|rupees|INR", "MXN": r"pesos|MXN", "CHF": r"CHF|francs",
                  "AUD": r"A\$|AUD|Australian", "CNY": r"yuan|CNY", "KRW": r"won|₩"}
    if v in unit_words:
        return bool(re.search(unit_words[v], q))
    return False


def test_positive_values_are_said_in_the_request(generated):
    """Every argument of a call row is copied from (or converts from) its request."""
    name, _, rows, schemas = generated
    checked = 0
    for row in all_rows(generated):
        if row["category"] in NO_CALL:
            continue
        today = date_fact(row)
        for call in row["answers"]:
            props = schemas[call["name"]].get("properties", {})
            for k, v in call["arguments"].items():
                assert value_is_said(v, row["query"], today, props.get(k)), (name, row["query"], k, v, row.get("system"))
                checked += 1
    assert checked > 300


def test_relative_dates_come_with_a_date_fact(generated):
    for row in all_rows(generated):
        for call in row["answers"]:
            for v in call["arguments"].values():
                if isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) and v not in row["query"]:
                    if not re.search(r"\d{4}", row["query"]):
                        assert date_fact(row), row


def test_invalid_rows_say_a_value_the_schema_rejects():
    """Demo tools: the request names an out-of-range number, a non-enum word, or an impossible time/date."""
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        run_gen(out, os.path.join(ROOT, "models", "tools.json"), "--examples", 400, "--seed", 5)
        rows = [r for rs in read_rows(out).values() for r in rs if r["category"] == "invalid"]
    assert len(rows) >= 30
    enums = {"white", "warm white", "red", "orange", "yellow", "green", "blue", "purple", "pink", "cyan", "celsius",
             "fahrenheit", "heat", "cool", "auto", "off"}
    for r in rows:
        q = r["query"].lower()
        bad_time = any(int(h) > 23 or int(m) > 59 for h, m in re.findall(r"\b(\d{1,2}):(\d{2})\b", q))
        bad_date = any(True for _ in re.finditer(
            r"(february (29|3\d)|april 3[1-9]|june 3[1-9]|september 3[1-9]|november 3[1-9]|march 3[2-9]|january 0)\b", q))
        bad_num = any(float(x) > 100 for x in re.findall(r"(?<![\d:])\d+(?:\.\d+)?(?=\s*(?:%|percent))", q)) or \
            "minus" in q or re.search(r"\b(0|zero) ?(%|percent)", q) or any(
                n > 100 and w in q for n, w, _ in NUMBER_WORDS)
        words = set(re.findall(r"[a-z]+(?: white)?", q))
        family = {"magenta", "teal", "turquoise", "lavender", "amber", "gold", "violet", "indigo", "crimson", "lime",
                  "navy", "maroon", "beige", "coral", "mint", "peach", "black", "grey", "brown", "salmon", "cool white",
                  "kelvin", "rankine", "eco", "dry", "fan", "boost", "turbo", "sleep", "away", "vacation", "silent"}
        bad_word = bool((words & family) - enums)
        assert bad_time or bad_date or bad_num or bad_word, r["query"]


def free_string_values(rows, schemas):
    """String arguments that come from open pools (no enum, format or pattern)."""
    out = set()
    for r in rows:
        for c in r["answers"]:
            props = schemas[c["name"]].get("properties", {})
            for k, v in c["arguments"].items():
                p = props.get(k, {})
                if isinstance(v, str) and not ({"enum", "format", "pattern"} & set(p)):
                    out.add(v.lower())
    return out


def test_splits_are_disjoint(generated):
    name, _, rows, schemas = generated
    queries = {s: {r["query"].strip().lower() for r in rows[s]} for s in SPLITS}
    assert not queries["train"] & queries["test"]
    assert not queries["train"] & queries["val"]
    assert not queries["val"] & queries["test"]
    train, test = free_string_values(rows["train"], schemas), free_string_values(rows["test"], schemas)
    assert test
    # Open-pool values are hashed into one split; a few can leak only when a pool ran dry.
    assert len(train & test) <= max(1, len(test) // 20), (name, sorted(train & test)[:10])


def test_open_pools_many_distinct_values(generated):
    name, _, rows, schemas = generated
    vals = free_string_values(rows["train"], schemas)
    assert len(vals) > 150, (name, len(vals))


def test_bad_tools_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"description": "no name"}]')
    res = subprocess.run([sys.executable, GEN, "--tools", str(bad), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and str(bad) in res.stderr and "name" in res.stderr
    res = subprocess.run([sys.executable, GEN, "--tools", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "missing.json" in res.stderr and "cannot read" in res.stderr


class StandIn(http.server.BaseHTTPRequestHandler):
    """A local OpenAI-compatible chat endpoint: answers with the request prefixed
    by "Would you kindly" (keeping every value), and records what it was sent."""
    seen = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StandIn.seen.append((self.path, self.headers.get("Authorization"), body))
        prompt = body["messages"][-1]["content"]
        query = prompt.split("Request: ", 1)[1]
        reply = {"choices": [{"message": {"role": "assistant", "content": "Would you kindly " + query}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def test_endpoint_paraphrases_through_a_local_stand_in(tmp_path, mixed_tools):
    server = http.server.HTTPServer(("127.0.0.1", 0), StandIn)
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    try:
        env = dict(os.environ, TEST_KEY="sk-local-test")
        out = tmp_path / "p"
        res = run_gen(out, mixed_tools, "--examples", 100, "--seed", 2, "--endpoint",
                      "http://127.0.0.1:%d/v1" % server.server_port, "--model", "stand-in", "--api-key-env", "TEST_KEY",
                      "--paraphrase-rate", "1.0", env=env)
    finally:
        server.shutdown()
    assert StandIn.seen, res.stderr
    path, auth, body = StandIn.seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-local-test" and body["model"] == "stand-in"
    rows = [r for rs in read_rows(out).values() for r in rs]
    para = [r for r in rows if r.get("paraphrased")]
    assert para and all(r["query"].startswith("Would you kindly ") for r in para)
    assert all(r["category"] not in ("missing", "invalid") for r in para)
    stats = json.load(open(out / "stats.json"))
    assert stats["paraphrase"]["kept"] == len(para) and stats["paraphrase"]["asked"] == len(StandIn.seen)
    with open(mixed_tools) as f:
        schemas = {t["name"]: t["parameters"] for t in json.load(f)}
    for r in para:
        for c in r["answers"]:
            jsonschema.validate(c["arguments"], schemas[c["name"]])
            for v in c["arguments"].values():
                if isinstance(v, str):
                    assert v in r["query"]


def test_endpoint_down_keeps_the_original_requests(tmp_path, mixed_tools):
    res = run_gen(tmp_path / "d", mixed_tools, "--examples", 30, "--seed", 2, "--endpoint", "http://127.0.0.1:9/v1",
                  "--model", "x", "--paraphrase-rate", "1.0")
    assert "the original request is kept" in res.stderr
    stats = json.load(open(tmp_path / "d" / "stats.json"))
    assert stats["paraphrase"]["kept"] == 0 and stats["paraphrase"]["failed"] > 0


@pytest.mark.skipif(not os.path.exists(NEEDLE), reason="build/needle not built")
def test_needle_generate_data_command(tmp_path):
    res = subprocess.run([NEEDLE, "generate-data", "--tools", os.path.join(ROOT, "models", "tools.json"),
                          "--examples", "40", "--seed", "1", "--out", str(tmp_path / "g")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert len(read_rows(tmp_path / "g")["train"]) == 32
    env = dict(os.environ, NEEDLE_DATAGEN=str(tmp_path / "nope.py"))
    res = subprocess.run([NEEDLE, "generate-data", "--tools", "x.json", "--out", str(tmp_path / "h")],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 1 and "nope.py not found" in res.stderr


ODD_TOOLS = [
    {"name": "ping", "description": "Check that the hub is online"},
    {"name": "set_scene", "description": "Activate a lighting scene",
     "parameters": {"type": "object", "properties": {
         "scene": {"type": "integer", "enum": [1, 2, 3, 4]},
         "fade": {"anyOf": [{"type": "number", "minimum": 0, "maximum": 10}, {"type": "null"}]},
         "target": {"type": "object", "properties": {"room": {"type": "string"}, "level": {"type": "integer",
                    "minimum": 1, "maximum": 5}}, "required": ["room"]}},
         "required": ["scene", "target"]}},
    {"name": "add_items", "description": "Add items to the shopping list",
     "parameters": {"type": "object", "properties": {
         "items": {"type": "array", "items": {"type": "string"}, "minItems": 1},
         "store": {"type": ["string", "null"]}, "quantity": {"type": "number"}},
         "required": ["items"]}},
]


def test_odd_schemas_still_give_valid_rows(tmp_path):
    """No parameters, integer enums, anyOf, nested objects, type lists, unbounded numbers."""
    tools = tmp_path / "odd.json"
    tools.write_text(json.dumps({"tools": [{"type": "function", "function": t} for t in ODD_TOOLS]}))
    run_gen(tmp_path / "o", tools, "--examples", 150, "--seed", 9)
    rows = [r for rs in read_rows(tmp_path / "o").values() for r in rs]
    schemas = {t["name"]: t.get("parameters", {"type": "object", "properties": {}}) for t in ODD_TOOLS}
    called = set()
    for r in rows:
        for c in r["answers"]:
            jsonschema.validate(c["arguments"], schemas[c["name"]])
            called.add(c["name"])
    assert called == {"ping", "set_scene", "add_items"}


# Formats, string lengths, identifiers and money, each a value kind of its own: every drafted row fits
# the schemas (none redrawn for a refused value) and every tool is called.
FORMAT_TOOLS = [
    {"name": "track_parcel", "description": "Track a parcel by its tracking number",
     "parameters": {"type": "object", "properties": {
         "tracking_number": {"type": "string", "minLength": 8, "maxLength": 22}},
         "required": ["tracking_number"]}},
    {"name": "refund", "description": "Refund an order",
     "parameters": {"type": "object", "properties": {
         "order_id": {"type": "string"},
         "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 5000, "multipleOf": 0.01}},
         "required": ["order_id", "amount"]}},
    {"name": "schedule_backup", "description": "Back up a server at a time",
     "parameters": {"type": "object", "properties": {
         "host": {"type": "string", "format": "hostname"}, "ip": {"type": "string", "format": "ipv4"},
         "at": {"type": "string", "format": "time"}, "starts": {"type": "string", "format": "date-time"},
         "webhook": {"type": "string", "format": "uri"}, "job": {"type": "string", "format": "uuid"},
         "days": {"type": "array", "uniqueItems": True,
                  "items": {"type": "string", "enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}}},
         "required": ["host", "at"]}},
]
RFC3339_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
FORMAT_RE = {"hostname": r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*",
             "ipv4": r"((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
             "time": RFC3339_TIME, "date-time": r"[0-9]{4}-[0-9]{2}-[0-9]{2}T" + RFC3339_TIME,
             "uri": r"[A-Za-z][A-Za-z0-9+.-]*:[^\s]+", "uuid": r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"}


def test_formats_lengths_identifiers_and_money(tmp_path):
    tools = tmp_path / "formats.json"
    tools.write_text(json.dumps(FORMAT_TOOLS))
    res = run_gen(tmp_path / "f", tools, "--examples", 300, "--seed", 4)
    assert "refuse" not in res.stderr, res.stderr
    stats = json.load(open(tmp_path / "f" / "stats.json"))
    assert stats["redrawn_schema_refused"] == 0
    schemas = {t["name"]: t["parameters"] for t in FORMAT_TOOLS}
    # jsonschema tests multipleOf in binary floating point (2216.99 / 0.01 is not a whole number
    # there), so money's two decimals are checked below in decimal instead
    plain = json.loads(json.dumps(schemas))
    del plain["refund"]["properties"]["amount"]["multipleOf"]
    called = set()
    for r in [r for rs in read_rows(tmp_path / "f").values() for r in rs]:
        for c in r["answers"]:
            jsonschema.validate(c["arguments"], plain[c["name"]])
            called.add(c["name"])
            for k, v in c["arguments"].items():
                fmt = schemas[c["name"]]["properties"][k].get("format")
                if fmt is None:
                    continue
                if fmt:
                    assert re.fullmatch(FORMAT_RE[fmt], v), (k, v)
            if c["name"] == "refund":
                amount = repr(c["arguments"]["amount"])
                assert "e" not in amount and len(amount.partition(".")[2]) <= 2, amount
                assert c["arguments"]["order_id"] in r["query"] or r.get("turns")  # an id is said as written
    assert called == set(schemas)


# A tool whose rows run long (two 8-digit accounts, an amount, a currency and a memo) after a long
# tools block: redrawing its too-long drafts as any tool used to leave it 1 positive row of 68.
LONG_ROW_TOOLS = [
    {"name": "searchDocs", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}, "n": {"type": "integer", "minimum": 1, "exclusiveMaximum": 50},
        "langs": {"type": "array", "minItems": 2, "items": {"type": "string", "enum": ["en", "fr", "de", "es"]}}},
        "required": ["q"]}},
    {"name": "setFanSpeed", "description": "Set the ceiling fan speed", "parameters": {"type": "object", "properties": {
        "speed": {"type": "string", "enum": ["1", "2", "3", "off"]}, "reverse": {"type": "boolean"}},
        "required": ["speed", "reverse"]}},
    {"name": "transfer_funds", "description": "Transfer money between two accounts", "parameters": {
        "type": "object", "properties": {
            "from_account": {"type": "string", "pattern": "^[0-9]{8}$"},
            "to_account": {"type": "string", "pattern": "^[0-9]{8}$"},
            "amount": {"type": "number", "minimum": 0.01, "maximum": 10000, "multipleOf": 0.01},
            "currency": {"type": "string", "enum": ["USD", "EUR", "GBP"]},
            "memo": {"type": "string", "maxLength": 20}},
        "required": ["from_account", "to_account", "amount"]}},
    {"name": "add_task", "description": "Add a task to a project board", "parameters": {"type": "object", "properties": {
        "task": {"type": "object", "properties": {
            "title": {"type": "string", "minLength": 3}, "due": {"type": "string", "format": "date"},
            "assignee": {"type": "string", "format": "email"}}, "required": ["title"]},
        "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3}},
        "required": ["task"]}},
]


def test_every_tool_keeps_its_positive_rows(tmp_path):
    tools = tmp_path / "long.json"
    tools.write_text(json.dumps(LONG_ROW_TOOLS))
    run_gen(tmp_path / "l", tools, "--examples", 200, "--seed", 5)
    rows = [r for rs in read_rows(tmp_path / "l").values() for r in rs if r["category"] == "positive"]
    per_tool = {t["name"]: 0 for t in LONG_ROW_TOOLS}
    for r in rows:
        per_tool[r["answers"][0]["name"]] += 1
    # a fair share is a quarter each; every tool keeps at least half of it
    assert min(per_tool.values()) >= len(rows) / len(per_tool) / 2, per_tool


@pytest.mark.parametrize("example", ["home", "media", "records", "wearable", "car"])
def test_example_tool_sets(tmp_path, example):
    """The examples/ tool sets: valid answers, values said, no-call rows empty."""
    tools = os.path.join(ROOT, "examples", example, "tools.json")
    run_gen(tmp_path, tools, "--examples", 200, "--seed", 17)
    rows = read_rows(tmp_path)
    with open(tools, encoding="utf-8") as f:
        schemas = {t["name"]: t["parameters"] for t in json.load(f)}
    g = (example, tmp_path, rows, schemas)
    fc = jsonschema.FormatChecker(formats=["date", "email"])
    for row in all_rows(g):
        for call in row["answers"]:
            jsonschema.validate(call["arguments"], schemas[call["name"]], format_checker=fc)
    test_no_call_categories_have_empty_answers_and_the_others_do_not(g)
    for row in all_rows(g):
        if row["category"] not in NO_CALL:
            today = date_fact(row)
            for call in row["answers"]:
                props = schemas[call["name"]].get("properties", {})
                for k, v in call["arguments"].items():
                    assert value_is_said(v, row["query"], today, props.get(k)), (example, row["query"], k, v)


def test_some_requests_say_only_the_values(tmp_path):
    """People say "start a run" and "steps today?", not "start tracking a workout activity running":
    some requests for a tool whose enum values are its own carry neither the tool's name words nor
    its parameters' names, and -ing activities are sometimes said as their verb."""
    tools = os.path.join(ROOT, "examples", "wearable", "tools.json")
    # 1,000 rows, all splits: a verb for the activity is drawn for about one running/swimming row in ten
    run_gen(tmp_path, tools, "--examples", 1000, "--seed", 5)
    rows = [r for rs in read_rows(tmp_path).values() for r in rs if r["category"] == "positive"]
    for name, words in (("start_workout", ("workout", "activity")), ("get_metric", ("metric", "period"))):
        mine = [r["query"].lower() for r in rows if [c["name"] for c in r["answers"]] == [name]]
        bare = [q for q in mine if not any(w in q for w in words)]
        assert len(mine) >= 20 and 0.1 <= len(bare) / len(mine) <= 0.6, (name, len(bare), len(mine))
    said_as_verb = [r for r in rows for c in r["answers"] if c["arguments"].get("activity") in ("running", "swimming")
                    and re.search(r"\b(run|swim)\b", r["query"].lower())]
    assert said_as_verb


def test_requests_typed_bare_and_messages_short_and_open(tmp_path):
    """People type "text Maya hello there": with a filler on nearly every request and every message
    text 18-45 characters long, no messaging request under 40 characters had a call. And with the
    texts drawn from ~45 templates the model learnt the templates: it called send_message for "meet me
    at X at 5pm" and refused "dinner is ready". Now about a quarter of the requests carry no filler,
    short texts ("call me", "ok") are drawn too, and most texts are put together from parts, so they
    use many more words."""
    tools = os.path.join(ROOT, "models", "tools.json")
    run_gen(tmp_path, tools, "--examples", 1200, "--seed", 9)
    rows = [r for rs in read_rows(tmp_path).values() for r in rs]
    filler = re.compile(r"^(please|can you|could you|would you|hey|ok|okay|um|uh|hi|yo|so|oh|hmm|right|alright|"
                        r"kindly|yes|pls|quick one|quick question|go ahead|go on|i need|i'd like|i want|when you get|"
                        r"is it possible|i was wondering|help me|let's|time to|don't forget|make sure|it'd be|"
                        r"would it be|just|i'd love|you can|can i get|do me a|i think)\b", re.I)
    ending = re.compile(r"(please|thanks|thank you|pls|cheers|for me|asap|now|thx|ty|would you\?|if you can|"
                        r"real quick|don't forget|if you don't mind|when you can|[!.?])$", re.I)
    singles = [r for r in rows if r["category"] == "positive" and len(r["answers"]) == 1 and "turns" not in r]
    bare = [r for r in singles if not filler.match(r["query"]) and not ending.search(r["query"].rstrip())]
    assert 0.15 <= len(bare) / len(singles) <= 0.6, (len(bare), len(singles))
    texts = [c["arguments"]["text"] for r in singles for c in r["answers"] if c["name"] == "send_message"]
    assert len(texts) >= 40 and sum(len(t) <= 15 for t in texts) >= 0.1 * len(texts), texts
    # the first 100 texts of all rows use 169-171 lower-case words (names aside) with seeds 9 and 4;
    # drawn from the templates alone they used 126-146
    first_texts = [c["arguments"]["text"] for r in rows for c in r["answers"] if c["name"] == "send_message"][:100]
    words = {w for t in first_texts for w in re.findall(r"\b[a-z']+\b", t)}
    assert len(first_texts) == 100 and len(words) >= 155, (len(words), len(first_texts))


def row_lengths(rows):
    p = subprocess.run([NEEDLE, "tokenize", "--model", os.path.join(ROOT, "models", "needle-default.cact"), "--rows"],
                       input="".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), capture_output=True,
                       text=True, check=True)
    return [json.loads(l)["tokens"] for l in p.stdout.splitlines()]


@pytest.mark.skipif(not os.path.exists(NEEDLE), reason="needle CLI not built")
def test_rows_fit_the_context(tmp_path):
    """The car tools block is ~435 tokens: without a limit many rows are longer than the bundled
    model's 512 (and fine-tuning would skip them, most of all the two-call rows); by default none is,
    the categories are still there, and stats.json says what was drawn again."""
    tools = os.path.join(ROOT, "examples", "car", "tools.json")
    run_gen(tmp_path / "free", tools, "--examples", 200, "--seed", 2, "--max-tokens", 0)
    free = [r for rs in read_rows(tmp_path / "free").values() for r in rs]
    assert sum(n > 512 for n in row_lengths(free)) >= 40
    run_gen(tmp_path / "fit", tools, "--examples", 200, "--seed", 2)
    fit = [r for rs in read_rows(tmp_path / "fit").values() for r in rs]
    assert len(fit) == 200 and max(row_lengths(fit)) <= 512
    cats = {r["category"] for r in fit}
    assert {"positive", "parallel", "missing", "irrelevant", "negation", "invalid"} <= cats, cats
    stats = json.load(open(tmp_path / "fit" / "stats.json"))
    assert stats["max_tokens"] == 512 and stats["redrawn_too_long"] > 0


def test_requests_use_the_words_of_the_descriptions(tmp_path):
    """The tools file's own words make the requests: a description's verb ("Tune the radio",
    "Phone someone"), the states a parameter's description names ("0 closed, 100 fully open" ->
    "close the front left window", "halfway"), a person right after a calling verb ("phone Ana"),
    one-decimal values for a range with a fractional bound (87.5-108 MHz). And none of the old
    slips: "the tune radio", "navigate the to", "25 percent percent", "for ferries" for avoid."""
    tools = os.path.join(ROOT, "examples", "car", "tools.json")
    run_gen(tmp_path, tools, "--examples", 600, "--seed", 3)
    rows = [r for rs in read_rows(tmp_path).values() for r in rs]
    calls = [(r["query"].lower(), c) for r in rows if r["category"] in ("positive", "parallel") for c in r["answers"]]
    radio = [q for q, c in calls if c["name"] == "tune_radio"]
    assert radio and sum("tune the radio" in q for q in radio) >= len(radio) // 4, radio[:5]
    closed = [q for q, c in calls if c["name"] == "open_window" and c["arguments"]["percent"] == 0]
    assert sum(bool(re.search(r"\bclose\b", q)) for q in closed) >= 3, closed
    assert any("halfway" in q or "half way" in q for q, c in calls if c["arguments"].get("percent") == 50)
    assert any(re.search(r"\b(call|phone|ring) %s" % re.escape(c["arguments"]["name"].lower()), q)
               for q, c in calls if c["name"] == "call_contact")
    assert any(not float(c["arguments"]["frequency"]).is_integer() for q, c in calls if c["name"] == "tune_radio")
    for r in rows:
        q = r["query"].lower()
        assert not re.search(r"the tune radio|navigate the to|percent percent|for (ferries|tolls|highways)", q), q


@pytest.mark.parametrize("suite,tools,minimum", [
    ("examples/home/acceptance.jsonl", "examples/home/tools.json", 30),
    ("examples/media/acceptance.jsonl", "examples/media/tools.json", 30),
    ("examples/records/acceptance.jsonl", "examples/records/tools.json", 30),
    ("examples/wearable/acceptance.jsonl", "examples/wearable/tools.json", 30),
    ("examples/car/acceptance.jsonl", "examples/car/tools.json", 30),
    ("evals/demo_handwritten.jsonl", "models/tools.json", 150),
    ("evals/demo_handwritten_2.jsonl", "models/tools.json", 80),
    ("evals/demo_handwritten_3.jsonl", "models/tools.json", 80),
    ("evals/demo_handwritten_4.jsonl", "models/tools.json", 80)])
def test_hand_written_suites_are_well_formed(suite, tools, minimum):
    """The hand-written suites: enough rows, all six categories, answers valid for their tools."""
    with open(os.path.join(ROOT, tools), encoding="utf-8") as f:
        schemas = {t["name"]: t["parameters"] for t in json.load(f)}
    with open(os.path.join(ROOT, suite), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert len(rows) >= minimum
    assert {r["category"] for r in rows} == {"positive", "parallel", "missing", "irrelevant", "negation", "invalid"}
    fc = jsonschema.FormatChecker(formats=["date", "email"])
    for r in rows:
        assert (r["answers"] == []) == (r["category"] in NO_CALL), r
        for c in r["answers"]:
            jsonschema.validate(c["arguments"], schemas[c["name"]], format_checker=fc)
    assert len({r["query"] for r in rows}) == len(rows)

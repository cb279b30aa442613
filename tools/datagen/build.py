"""build.py - rows for every behaviour category, split into train/val/test.

Row format (the fine-tuning format `needle finetune` and `needle eval` read):
    {"query", "tools", "answers", "system"?, "category", "turns"?}
`answers` is the list of calls ({"name", "arguments"}); [] means no call.
Multi-turn rows add "turns": the later segments of the conversation, each
{"tool_result": JSON, "answers": [...], "reasoning": "..."} or
{"user": "...", "answers": [...]}, in order (the trainer reads the first turn;
the rest is the contract for what follows a tool result: no repeated call).
"""
import datetime
import json
import random

from datagen import offtopic, phrasing
from datagen.phrasing import ToolPhrasing, command, dress, negate, join_commands
from datagen.values import Values, WEEKDAYS

CATEGORIES = ["positive", "parallel", "missing", "irrelevant", "negation", "invalid", "multi_turn"]
DEFAULT_WEIGHTS = {"positive": 0.34, "parallel": 0.12, "missing": 0.11, "irrelevant": 0.15, "negation": 0.10,
                   "invalid": 0.09, "multi_turn": 0.09}
NO_CALL = {"missing", "irrelevant", "negation", "invalid"}
RESULT_OK = ["Done.", "All set.", "Done: {what}.", "Okay, {what}.", "That's taken care of.", "{what}: done."]
OTHER_FACTS = [["locale: en-US", "locale: en-GB", "locale: de-DE", "locale: fr-FR", "locale: es-MX", "locale: ja-JP"],
               ["device: phone", "device: smart speaker", "device: watch", "device: car", "device: tablet"],
               ["battery: 82%", "battery: 15%", "battery: 47%"], ["network: wifi", "network: cellular", "network: offline"],
               ["timezone: Europe/Berlin", "timezone: America/New_York", "timezone: Asia/Tokyo", "timezone: UTC"]]
RESULT_ERR = ["device unreachable", "permission denied", "service unavailable", "not found", "timed out"]


class GenError(Exception):
    pass


class Generator:
    def __init__(self, declared, tools, seed, system=None, weights=None, follow_up_rate=0.35):
        self.declared, self.tools, self.seed, self.system = declared, tools, seed, system
        self.pinned = None  # the tool a positive row's next draft must call (make_row)
        self.follow_up_rate = follow_up_rate  # multi-turn rows whose tool result is followed by a new request
        self.phr = {t.name: ToolPhrasing(t) for t in tools}
        self.foreign = offtopic.foreign_tools(tools)
        self.foreign_phr = {t.name: ToolPhrasing(t) for t in self.foreign}
        phrasing.distinct_values(list(self.phr.values()))
        phrasing.distinct_values(list(self.foreign_phr.values()))
        self.other_templates = offtopic.other_domain_templates(tools)
        w = dict(weights or DEFAULT_WEIGHTS)
        # Categories this tool set cannot have give their share to positive rows.
        if not any(self.missable(t) for t in tools):
            w["positive"] += w.pop("missing")
        if not any(self.invalidable(t) for t in tools):
            w["positive"] += w.pop("invalid")
        self.weights = w

    # -- which tools allow which categories -----------------------------------
    def missable(self, tool):
        ph = self.phr.get(tool.name) or self.foreign_phr.get(tool.name)
        return [p for p in tool.params if p.required and p is not ph.onoff and p.kind not in ("bool", "object")]

    def invalidable(self, tool):
        out = []
        for p in tool.params:
            if p.kind in ("enum",) and all(isinstance(e, str) for e in p.enum):
                out.append(p)
            elif p.type in ("integer", "number") and (p.minimum is not None or p.maximum is not None):
                out.append(p)
            elif p.kind in ("time", "date") and p.type == "string":
                out.append(p)
        return out

    # -- one call -------------------------------------------------------------
    def sample_call(self, tool, values, rng, must=(), drop=(), invalid=None):
        """(arguments, [(param, slot)]) for one call: every required parameter
        (unless dropped), some optional ones; None when a value cannot be said."""
        chosen, args = [], {}
        optional_rate = rng.choice([0.2, 0.4, 0.6])
        implied = set()
        ph = self.phr.get(tool.name) or self.foreign_phr.get(tool.name)
        preset = {}
        if ph.onoff is not None and ph.onoff is not invalid and ph.onoff.name not in drop:
            preset[ph.onoff.name] = values.sample(ph.onoff, tool)
            if preset[ph.onoff.name].value is False:
                optional_rate = 0.0  # "turn off the lights" rarely comes with a brightness
        for p in tool.params:
            if p.name in drop or p.name in implied:
                continue
            if not (p.required or p.name in must or p is invalid or rng.random() < optional_rate):
                continue
            if p is invalid:
                s = values.invalid(p, tool)
            elif p.name in preset:
                s = preset[p.name]
            else:
                s = values.sample(p, tool)
                if s is not None and invalid is not None and invalid.name in s.extra:
                    s = values.plain_number(p)  # the invalid value must be the one said
            if s is None:
                if p.required and p.name not in drop:
                    return None
                continue
            if any(k in args or k in drop for k in s.extra):
                s = values.plain_number(p)  # the unit was already said (or must stay unsaid): a plain number
            chosen.append((p, s))
            args[p.name] = s.value
            for k, v in s.extra.items():
                args[k] = v
                implied.add(k)
        if invalid is not None and not any(p is invalid for p, _ in chosen):
            return None
        ordered = {p.name: args[p.name] for p in tool.params if p.name in args}
        return ordered, chosen

    def say(self, tool, rng, values, phr=None, question_ok=True, **kw):
        got = None
        for _ in range(6):
            got = self.sample_call(tool, values, rng, **kw)
            if got:
                break
        if not got:
            return None
        args, chosen = got
        text, protected, light = command((phr or self.phr)[tool.name], chosen, rng, question_ok)
        self.last_light = light
        needs_date = any(s.needs_date for _, s in chosen)
        return {"name": tool.name, "arguments": args}, text, protected, needs_date

    # -- rows -------------------------------------------------------------------
    def row(self, category, split, rng):
        today = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randrange(0, 1500))
        has_date = rng.random() < 0.6
        values = Values(rng, split, today if has_date else None)
        built = getattr(self, "row_" + category)(rng, values)
        if built is None:
            return None
        query, answers, needs_date, extra = built
        if needs_date and not has_date:
            return None
        row = {"query": query, "tools": self.tools_for_row(rng), "answers": answers}
        facts = ["date: %s" % today.isoformat() + (" (%s)" % WEEKDAYS[today.weekday()] if rng.random() < 0.4 else "")] \
            if has_date else []
        # Other facts, drawn the same way for every category, so that a system text says nothing
        # about whether to call (a model trained on date-only systems learned to refuse under one).
        if rng.random() < 0.3:
            extra_facts = [rng.choice(f) for f in rng.sample(OTHER_FACTS, rng.randint(1, 2))]
            facts = facts + extra_facts if rng.random() < 0.7 else extra_facts + facts
        system = self.system or ""
        if facts:
            system = (system + "\n" if system else "") + "; ".join(facts)
        if system:
            row["system"] = system
        row["category"] = category
        row.update(extra)
        return row

    def tools_for_row(self, rng):
        if len(self.declared) > 1 and rng.random() < 0.25:
            t = list(self.declared)
            rng.shuffle(t)
            return t
        return self.declared

    def row_positive(self, rng, values):
        tool = self.pinned if self.pinned is not None else rng.choice(self.tools)
        got = self.say(tool, rng, values)
        if not got:
            return None
        call, text, protected, nd = got
        return dress(text, rng, protected, light=self.last_light), [call], nd, {}

    def row_parallel(self, rng, values):
        n = 2 if rng.random() < 0.8 else 3
        if rng.random() < 0.3:
            shared = self.shared_clause_parallel(rng, values)
            if shared:
                return shared
        calls, texts, prot, nd = [], [], [], False
        for _ in range(n):
            tool = rng.choice(self.tools)
            got = self.say(tool, rng, values)
            if not got:
                return None
            call, text, protected, d = got
            if call in calls:
                return None
            calls.append(call)
            texts.append(text)
            prot += protected
            nd = nd or d
        return dress(join_commands(texts, rng), rng, prot, indirect=False), calls, nd, {}

    def shared_clause_parallel(self, rng, values):
        """"turn off the lights in the kitchen and the hallway": one clause, two calls."""
        cands = [(t, p) for t in self.tools for p in t.params if p.kind in ("room", "place", "person")]
        if not cands:
            return None
        tool, p = rng.choice(cands)
        got = self.sample_call(tool, values, rng, must=(p.name,))
        if not got:
            return None
        args, chosen = got
        other = values.sample(p, tool)
        s0 = next(s for q, s in chosen if q is p)
        if other is None or other.value == s0.value:
            return None
        joiner = rng.choice([" and ", " and ", " & ", " and also "])
        art = "the " if p.kind == "room" and rng.random() < 0.5 else ""
        first_text = s0.text
        s0.text = first_text + joiner + art + other.text
        text, protected, _ = command(self.phr[tool.name], chosen, rng)
        protected += [first_text, other.text]
        a2 = dict(args)
        a2[p.name] = other.value
        calls = [{"name": tool.name, "arguments": args}, {"name": tool.name, "arguments": a2}]
        return dress(text, rng, protected, indirect=False), calls, any(s.needs_date for _, s in chosen), {}

    def row_missing(self, rng, values):
        cands = [(t, p) for t in self.tools for p in self.missable(t)]
        if not cands:
            return None
        tool, p = rng.choice(cands)
        drop = {p.name}
        if rng.random() < 0.3:
            drop |= {q.name for q in tool.params if q.required}
        got = self.say(tool, rng, values, drop=drop)
        if not got:
            return None
        _, text, protected, nd = got
        if rng.random() < 0.2:
            text = text.rstrip() + rng.choice(["?", " now", ""])
        return dress(text, rng, protected, light=self.last_light), [], nd, {}

    def row_invalid(self, rng, values):
        cands = [(t, p) for t in self.tools for p in self.invalidable(t)]
        if not cands:
            return None
        tool, p = rng.choice(cands)
        got = self.say(tool, rng, values, must=(p.name,), invalid=p)
        if not got:
            return None
        _, text, protected, nd = got
        return dress(text, rng, protected, light=self.last_light), [], nd, {}

    def row_negation(self, rng, values):
        tool = rng.choice(self.tools)
        got = self.say(tool, rng, values, question_ok=False)
        if not got:
            return None
        _, text, protected, nd = got
        if self.last_light:  # "In the kitchen, turn ..." or "what's ..." cannot follow "don't"
            return None
        q = negate(text, rng)
        # no typos here: a misspelt "don't" would leave a request that reads as a command
        return dress(q, rng, protected, indirect=False, light=True, typos=False), [], nd, {}

    def row_irrelevant(self, rng, values):
        r = rng.random()
        if r < 0.45 and self.foreign:
            tool = rng.choice(self.foreign)
            got = self.say(tool, rng, values, phr=self.foreign_phr)
            if not got:
                return None
            _, text, protected, nd = got
            return dress(text, rng, protected, light=self.last_light), [], nd, {}
        if r < 0.8 and self.other_templates:
            q = offtopic.fill_other(rng.choice(self.other_templates), values, rng)
            return dress(q, rng, [], indirect=False), [], False, {}
        q = rng.choice(offtopic.SMALL_TALK)
        if rng.random() < 0.5:
            q = q[0].upper() + q[1:]
        return q, [], False, {}

    def row_multi_turn(self, rng, values):
        tool = rng.choice(self.tools)
        got = self.say(tool, rng, values)
        if not got:
            return None
        call, text, protected, nd = got
        light = self.last_light
        turns = [self.result_turn(call, rng)]
        if rng.random() < self.follow_up_rate:
            tool2 = rng.choice(self.tools)
            got2 = self.say(tool2, rng, values)
            if got2 and got2[0] != call:
                call2, text2, prot2, nd2 = got2
                turns.append({"user": dress(rng.choice(["also ", "and ", "now ", "next, ", "one more: ", ""]) + text2,
                                            rng, prot2, indirect=False, light=True),
                              "answers": [call2]})
                turns.append(self.result_turn(call2, rng))
                nd = nd or nd2
        return dress(text, rng, protected, light=light), [call], nd, {"turns": turns}

    def result_turn(self, call, rng):
        """A tool result in the shapes agents send: a status object, the function's own return value
        (often its arguments echoed), an error object, and each of those inside a list (one result per
        call, as needle.Needle.run sends them)."""
        what = phrasing.human(call["name"])
        if rng.random() < 0.15:
            err = rng.choice(RESULT_ERR)
            result = rng.choice([{"status": "error", "message": err}, {"error": err}])
            answer = {"answers": [], "reasoning": "The call failed (%s); tell the user instead of retrying." % err}
        else:
            shape = rng.random()
            if shape < 0.35:
                result = {"status": "ok"}
            elif shape < 0.7:
                result = dict({"status": "ok"}, **call["arguments"])
            else:
                result = dict(call["arguments"]) or {"status": "ok"}
            answer = {"answers": [], "reasoning": rng.choice(RESULT_OK).replace("{what}", what)}
        if rng.random() < 0.4:
            result = [result]
        return dict({"tool_result": result}, **answer)


def split_sizes(n):
    val = max(1, round(n * 0.1))
    test = max(1, round(n * 0.1))
    return {"train": max(1, n - val - test), "val": val, "test": test}


def generate(gen, n_total, seed, log=None, fits=None):
    """{split: rows}; every query is unique across all splits. fits(row) -> bool, when given, rejects
    rows (too long for the model's context, say); a category none of whose drafts fit gives its
    places to positive rows, and gen.unfit counts what was rejected."""
    sizes = split_sizes(n_total)
    seen = set()
    out = {}
    gen.unfit = {"drafts": 0, "rows": {}}
    for split in ("train", "val", "test"):
        rng = random.Random("%s/%s" % (seed, split))
        cats = list(gen.weights)
        weights = [gen.weights[c] for c in cats]
        rows = []
        # Quotas keep the category shares close to the weights even for small sets.
        total_w = sum(weights)
        quota = {c: int(round(sizes[split] * gen.weights[c] / total_w)) for c in cats}
        while sum(quota.values()) > sizes[split]:
            quota[max(quota, key=quota.get)] -= 1
        while sum(quota.values()) < sizes[split]:
            quota["positive"] += 1
        order = [c for c in cats for _ in range(quota[c])]
        rng.shuffle(order)
        missing = {}
        for cat in order:
            if not make_row(gen, cat, split, rng, seen, rows, fits) and not (
                    fits is not None and make_row(gen, "positive", split, rng, seen, rows, fits)):
                missing[cat] = missing.get(cat, 0) + 1
        for cat, n in missing.items():
            if log:
                log("warning: could not make %d %s row%s for %s" % (n, cat, "s" if n > 1 else "", split))
        out[split] = rows
    return out


# Drafts of a positive row that keep to the tool of its first draft that did not fit, before any tool
# may be called: a tool whose rows run long (two 8-digit account numbers, an amount and a memo after
# a long tools block) would otherwise lose nearly every positive row to the others (measured: 1 of 68
# positive calls on a four-tool set, 17 of 69 without the length limit).
PINNED_DRAFTS = 40


def make_row(gen, cat, split, rng, seen, rows, fits):
    """Append one new row of category cat to rows; False when 60 drafts gave none."""
    try:
        for attempt in range(60):
            if attempt == PINNED_DRAFTS:
                gen.pinned = None
            row = gen.row(cat, split, rng)
            if row is None:
                continue
            key = row["query"].strip().lower()
            if key in seen:
                continue
            if fits is not None and not fits(row):
                gen.unfit["drafts"] += 1
                if cat == "positive" and gen.pinned is None and attempt < PINNED_DRAFTS and row["answers"]:
                    gen.pinned = next(t for t in gen.tools if t.name == row["answers"][0]["name"])
                continue
            seen.add(key)
            rows.append(row)
            return True
    finally:
        gen.pinned = None
    if fits is not None:
        gen.unfit["rows"][cat] = gen.unfit["rows"].get(cat, 0) + 1
    return False


def write_jsonl(path, rows):
    import os
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)

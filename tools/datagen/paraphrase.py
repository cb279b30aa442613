"""paraphrase.py - optional rewriting of requests by a language model.

Any OpenAI-compatible chat endpoint (POST {base}/chat/completions) can be
asked to rephrase a generated request. The rewrite is kept only when every
value the answers depend on still appears in it verbatim (and, for negated
requests, a negation is still there); otherwise the original stays. The key
comes from an environment variable, never from the command line.
"""
import json
import re
import urllib.error
import urllib.request

PROMPT = ("Rewrite the following request to a voice assistant the way a different person might say it. "
          "Keep its meaning exactly. Keep each of these exact strings unchanged, character for character: {keep}. "
          "Reply with the rewritten request only.\n\nRequest: {query}")
PARAPHRASED = {"positive", "parallel", "negation", "irrelevant", "multi_turn"}
NEGATION = re.compile(r"\b(don'?t|do not|never|no need|not|cancel|never mind|shouldn'?t|stop)\b", re.I)


class Paraphraser:
    def __init__(self, endpoint, model, api_key=None, timeout=30.0, log=None):
        url = endpoint.rstrip("/")
        if not url.endswith("/chat/completions"):
            url += "/chat/completions"
        self.url, self.model, self.api_key, self.timeout, self.log = url, model, api_key, timeout, log
        self.asked = self.kept = self.failed = 0
        self.too_long = 0  # kept rewrites given back because the row no longer fit the context

    def ask(self, query, keep):
        body = {"model": self.model, "temperature": 0.9,
                "messages": [{"role": "user", "content": PROMPT.format(
                    keep=", ".join(json.dumps(k, ensure_ascii=False) for k in keep) or "(none)", query=query)}]}
        req = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json"})
        if self.api_key:
            req.add_header("Authorization", "Bearer " + self.api_key)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            data = json.loads(resp.read().decode("utf-8"))
        text = data["choices"][0]["message"]["content"]
        return text.strip().strip('"').strip()

    def rewrite(self, row):
        """Rewrite row["query"] in place when the result keeps the values.
        Only rows whose every string and number is said verbatim are sent."""
        if row.get("category") not in PARAPHRASED:
            return False
        vals = string_values(row["answers"])
        if any(v not in row["query"] for v in vals):
            return False  # a value said another way ("half past seven"): the rewrite could not be checked
        keep = sorted(vals, key=len, reverse=True)
        self.asked += 1
        try:
            new = self.ask(row["query"], keep)
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
            self.failed += 1
            if self.log and self.failed <= 3:
                self.log("paraphrase: %s: %s (the original request is kept)" % (self.url, e))
            return False
        if not new or "\n" in new or len(new) > 4 * len(row["query"]) + 40:
            return False
        if any(k not in new for k in keep):
            return False
        if row.get("category") == "negation" and not NEGATION.search(new):
            return False
        row["query"] = new
        row["paraphrased"] = True
        self.kept += 1
        return True


def string_values(answers):
    out = set()

    def walk(v):
        if isinstance(v, str):
            out.add(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.add(str(int(v)) if float(v).is_integer() else "%g" % v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
    for call in answers:
        walk(call.get("arguments", {}))
    return out

"""row_length.py - how many tokens a row takes once `needle finetune` renders it.

The fine-tuning trainer skips rows longer than the model's context, and which rows those are is
not random: a tools block of ~430 tokens leaves room for short requests and `[]` answers but not
for two calls or a tool result, so a tool set with long descriptions lost 99% of its parallel and
multi-turn rows and 56% of its positive rows, and the model learned to refuse. The generator asks
`needle tokenize --rows` (a coprocess: one JSON row in, one count out) and replaces rows that do
not fit.
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_needle(given=None):
    """The needle executable: given, else $NEEDLE_EXE (`needle generate-data` sets it), else
    build/needle in this repository; None when none exists."""
    for p in (given, os.environ.get("NEEDLE_EXE"), os.path.join(ROOT, "build", "needle")):
        if p and os.access(p, os.X_OK):
            return p
    return None


# A row whose answers the compiled schemas refuse counts as this long, so it is drawn again
# like a row too long for the context (the tokenizer checks every row against its tools).
REFUSED = 1 << 30


class RowLength:
    """Callable: row -> its token count as fine-tuning renders it, or REFUSED when the row's
    answers do not match its tools' schemas (a value the generator could not fit to a schema:
    counted in .refused, the first few kept in .refused_examples)."""

    def __init__(self, needle, tokenizer):
        self.proc = subprocess.Popen([needle, "tokenize", "--model", tokenizer, "--rows"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self.refused, self.refused_examples = 0, []

    def __call__(self, row):
        self.proc.stdin.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("needle tokenize --rows stopped: %s" % self.proc.stderr.read().strip())
        ans = json.loads(line)
        if "error" in ans:
            if "do not match the tools' schemas" in ans["error"]:
                self.refused += 1
                if len(self.refused_examples) < 3:
                    self.refused_examples.append(ans["error"])
                return REFUSED
            raise RuntimeError("needle tokenize --rows: %s" % ans["error"])
        return ans["tokens"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()

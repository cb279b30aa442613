"""Runs under the cactus-needle 2.0.15 virtual environment (/opt/venv-n2015), called by
test_layout_oracle.py and test_qat_oracle.py: the reference package used as an oracle only.

  n2015_oracle.py render TOK.model ROWS.jsonl
      one line per row: {"ids": [...], "mask": [...]} from the reference's own
      render_example + its tokenizer class, ids = [BOS] + enc(prompt) + enc(target) + [EOS]
      and the mask of its _encode (loss on the target and EOS).
"""
import json
import os
import sys

os.environ.setdefault("NEEDLE_TELEMETRY", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def render(tok_path, rows_path):
    from needle.model import finetune, tokenizer as reftok
    tok = reftok.SANTokenizer(tok_path)
    with open(rows_path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            ex = json.loads(line)
            prompt, target = finetune.render_example(ex)
            p, t = tok.encode(prompt), tok.encode(target)
            n = 1 + len(p) + len(t) + 1
            ids, mask = finetune._encode(tok, ex, n)
            print(json.dumps({"ids": [int(i) for i in ids], "mask": [int(m) for m in mask],
                              "prompt": prompt, "target": target}, ensure_ascii=True))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "render":
        render(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)

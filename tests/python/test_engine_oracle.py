"""`needle logits` held to the reference implementation's golden logits
(tests/golden/tiny.json), through the CLI: float weights, both .cact files,
the --float path, the window/sink mask and token-by-token decoding."""
import json
import os
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")
NEEDLE = os.path.join(ROOT, os.environ.get("NEEDLE_BUILD", "build"), "needle")

with open(os.path.join(GOLDEN, "tiny.json")) as f:
    CASES = json.load(f)["cases"]


def run_logits(model, ids, positions, *extra):
    if not os.path.exists(NEEDLE):
        pytest.skip("needle binary not built")
    cmd = [NEEDLE, "logits", "--model", os.path.join(GOLDEN, model), "--ids", ",".join(map(str, ids)),
           "--positions", ",".join(map(str, positions)), "--acts", "float", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def check(got, ref, positions, tol=1e-4):
    assert got["positions"] == positions
    np.testing.assert_allclose(np.array(got["logits"]), np.array(ref["at_positions"]), atol=tol, rtol=0)
    np.testing.assert_allclose(np.array(got["logsumexp"]), np.array(ref["logsumexp"]), atol=tol, rtol=0)
    assert got["argmax"] == ref["argmax"]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("model,key,extra", [
    ("tiny.safetensors", "logits_f32", []),
    ("tiny_w4.cact", "logits_w4", []),
    ("tiny_mixed.cact", "logits_mixed", []),
    ("tiny_mixed.cact", "logits_mixed", ["--float"]),
    ("tiny_w4.cact", "logits_w4", ["--decode-from", "3"]),
    ("tiny.safetensors", "logits_f32_window6_sink4", ["--window", "6", "--sinks", "4"]),
    ("tiny.safetensors", "logits_f32_window6_sink4", ["--window", "6", "--sinks", "4", "--decode-from", "1"]),
])
def test_logits_cli_matches_golden(case, model, key, extra):
    c = CASES[case]
    got = run_logits(model, c["ids"], c["positions"], *extra)
    check(got, c[key], c["positions"])


def test_logits_cli_rejects_bad_input():
    if not os.path.exists(NEEDLE):
        pytest.skip("needle binary not built")
    model = os.path.join(GOLDEN, "tiny_w4.cact")
    for args in (["--ids", "2,99999"], ["--ids", "2,3", "--positions", "5"], ["--ids", "x"], ["--ids", "2", "--kv-bits", "5"]):
        out = subprocess.run([NEEDLE, "logits", "--model", model, *args], capture_output=True, text=True, timeout=60)
        assert out.returncode != 0
        assert out.stderr.strip()

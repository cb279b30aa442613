"""Needle 3 against the reference package (cactus-needle 3.2.8, an oracle only):
tests/python/n3_oracle.py, run in the venv that has it, makes a random model on a
geometry that is in no golden file, exports it with the reference exporter and
computes the reference's float32 logits and heads on the file's decoded weights;
`needle logits --acts float` on that file (float path, CQ path, token-by-token decode) must
meet the golden README's bars: every logit within 1e-3 x max|logit|, argmax
equal, heads within 1e-4; the default A8 path must meet the reference's
quant=True logits within the A8 band of deploy_numerics.md section 8.  The same model with binary (1-bit) CQ matrices (the
reference's packer at width 1, its reader decoding them) must meet the same
logit bars.

The venv: python3 -m venv /opt/venv-n3 && /opt/venv-n3/bin/pip install
cactus-needle==3.2.8 jax flax sentencepiece (.ci/run does this; NEEDLE3_VENV
overrides the path).  Without it the test is SKIPPED (reported as skipped, not
passed)."""
import json
import os
import subprocess

import numpy as np
import pytest

from n3_reference import ENV, NEEDLE, PY, ROOT, VENV, reference_missing


def _reference_available():
    return reference_missing("needle.model.export, jax, flax, sentencepiece")


def _oracle(tmp_path_factory, bits):
    why = _reference_available()
    if why:
        pytest.skip(f"SKIPPED: Needle 3 reference oracle not installed ({why}); "
                    f"install: python3 -m venv {VENV} && {VENV}/bin/pip install cactus-needle==3.2.8 jax flax sentencepiece")
    out = tmp_path_factory.mktemp(f"n3_oracle_w{bits}")
    r = subprocess.run([PY, os.path.join(ROOT, "tests", "python", "n3_oracle.py"),
                        os.path.join(ROOT, "tests", "golden", "tok8k.model"), str(out), str(bits)],
                       capture_output=True, text=True, env=ENV, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return str(out / "model.cact"), json.load(open(out / "ref.json"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return _oracle(tmp_path_factory, 4)


@pytest.fixture(scope="module")
def reference_binary(tmp_path_factory):
    """The same model with binary (1-bit) CQ matrices, packed by the reference's
    own packing code and decoded by its reader (n3_oracle.py says how)."""
    return _oracle(tmp_path_factory, 1)


@pytest.mark.parametrize("extra", [["--float"], [], ["--float", "--decode-from", "1"]],
                         ids=["float", "cq", "decode"])
def test_logits_and_heads_match_reference_export(reference, extra):
    path, ref = reference
    ids = ref["ids"]
    r = subprocess.run([NEEDLE, "logits", "--model", path, "--ids", ",".join(map(str, ids)), "--positions",
                        ",".join(map(str, range(len(ids)))), "--heads", "--acts", "float", *extra],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["generation"] == 3
    want = np.array(ref["logits"])
    have = np.array(got["logits"])
    assert have.shape == want.shape == (len(ids), ref["config"]["out_vocab"])
    bound = 1e-3 * np.abs(want).max()
    assert np.abs(have - want).max() <= bound
    assert (have.argmax(1) == want.argmax(1)).all()
    h = got["heads"]
    assert np.abs(np.array(h["embedding"]) - ref["embedding"]).max() <= 1e-4
    assert abs(h["confidence_logit"] - ref["confidence_logit"]) <= 1e-4
    assert np.abs(np.array(h["router_logits"]) - ref["router_logits"]).max() <= 1e-4
    assert np.allclose(h["router_calibration"], ref["router_calibration"])


@pytest.mark.parametrize("extra", [[], ["--float"], ["--decode-from", "1"]], ids=["cq", "float", "decode"])
def test_a8_logits_match_reference_deploy_numerics(reference, extra):
    """The default A8 path against the reference's quant=True forward after
    configure_deploy(8, 8) on this geometry (v head narrower than q/k, two conv
    taps): A8 is discontinuous at rounding ties (deploy_numerics.md section 8),
    so the bar is the A8 band (max |diff| 0.035, logsumexp 1e-3) and argmax
    wherever the reference's top-2 margin is at least 0.01."""
    path, ref = reference
    ids = ref["ids"]
    r = subprocess.run([NEEDLE, "logits", "--model", path, "--ids", ",".join(map(str, ids)), "--positions",
                        ",".join(map(str, range(len(ids)))), *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = np.array(ref["logits_a8"])
    have = np.array(json.loads(r.stdout)["logits"])
    assert have.shape == want.shape
    diff = np.abs(have - want).max(1)
    print(f"A8 vs reference: max {diff.max():.2e}; positions within 1e-4: {(diff <= 1e-4).sum()}/{len(ids)}")
    assert diff.max() <= 0.035

    def lse(a):
        return a.max(1) + np.log(np.exp(a - a.max(1, keepdims=True)).sum(1))

    assert np.abs(lse(have) - lse(want)).max() <= 1e-3
    top2 = np.sort(want, 1)[:, -2:]
    sure = top2[:, 1] - top2[:, 0] >= 0.01
    assert (have.argmax(1) == want.argmax(1))[sure].all()


@pytest.mark.parametrize("extra", [["--float"], []], ids=["float", "cq"])
def test_binary_cq_file_matches_reference_reader(reference_binary, extra):
    """A 1-bit file runs exactly: our reader's binary records (bit order, the
    analytic codebook, the norms) give the logits the reference computes on
    the weights its reader decodes; the heads stay 4-bit."""
    path, ref = reference_binary
    r = subprocess.run([NEEDLE, "inspect", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    widths = {line.split()[1]: line.split()[4] for line in r.stdout.splitlines()
              if len(line.split()) > 5 and line.split()[2] == "CQ"}
    assert widths["layers.0.attn.q_proj"] == "1" and widths["embedding"] == "1", widths
    ids = ref["ids"]
    r = subprocess.run([NEEDLE, "logits", "--model", path, "--ids", ",".join(map(str, ids)), "--positions",
                        ",".join(map(str, range(len(ids)))), "--acts", "float", "--heads", *extra],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = np.array(ref["logits"])
    have = np.array(got["logits"])
    assert have.shape == want.shape
    assert np.abs(have - want).max() <= 1e-3 * np.abs(want).max()
    assert (have.argmax(1) == want.argmax(1)).all()
    h = got["heads"]
    assert np.abs(np.array(h["embedding"]) - ref["embedding"]).max() <= 1e-4
    assert abs(h["confidence_logit"] - ref["confidence_logit"]) <= 1e-4
    assert np.abs(np.array(h["router_logits"]) - ref["router_logits"]).max() <= 1e-4

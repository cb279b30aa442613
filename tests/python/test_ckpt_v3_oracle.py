"""Needle 3 checkpoints and `needle build` against the reference package
(cactus-needle 3.2.8, an oracle only; tests/python/n3_ckpt_oracle.py runs in
its venv):

  - a random checkpoint on a geometry in no golden file, written by the
    reference's own checkpoint writer, and tests/golden/needle3/n3_tiny
    .safetensors: `needle logits` on the float checkpoint equals the
    reference's float32 forward on it (every logit within 1e-4 x max|logit|,
    argmax equal, heads within 1e-5);
  - `needle build CKPT` and `--layers 2` equal the reference exporter's files
    made from the same checkpoint at test time (BUILD/tools/cact_diff: every
    non-CQ byte identical, >= 99.9% of CQ bytes, norms within one ulp);
  - the reference's read_export reads our files (4-bit, rung, 2-bit) and their
    CQ matrices decode to the reference quantiser's own cq_quantize of the
    checkpoint's weights at the file's width (relative difference < 1e-3);
  - `needle init --preset needle3-tiny` writes a checkpoint the reference's
    load_checkpoint accepts, with exactly the tree and shapes of the
    reference's own init, every deterministic leaf equal (taps [1,0,0],
    normalised Walsh factors, d1..d4, b2, cond_u, norms, mHC, gains, log_temp,
    bias) and the random leaves at the reference's standard deviations.

Without the venv (python3 -m venv /opt/venv-n3 && /opt/venv-n3/bin/pip install
cactus-needle==3.2.8 jax flax sentencepiece safetensors; .ci/run does this)
the tests are SKIPPED, reported as skipped."""
import json
import subprocess

import numpy as np
import pytest

from n3_reference import ENV, NEEDLE, PY, TINY, TOK, build_tool, oracle_script, reference_missing

DIFF = build_tool("cact_diff")
ORACLE = oracle_script("n3_ckpt_oracle.py")


def _reference_available():
    return reference_missing("needle.model.export, jax, flax, sentencepiece, safetensors")


def _oracle(*args):
    r = subprocess.run([PY, ORACLE, *args], capture_output=True, text=True, env=ENV, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]


def _needle(*args):
    r = subprocess.run([NEEDLE, *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    why = _reference_available()
    if why:
        pytest.skip(f"SKIPPED: Needle 3 reference oracle not installed ({why})")
    out = tmp_path_factory.mktemp("n3_ckpt")
    _oracle("make", TOK, str(out))
    return out


@pytest.mark.parametrize("which", ["new_geometry", "n3_tiny"])
def test_float_checkpoint_logits_match_reference(made, which):
    ckpt, ref = (made / "ckpt.safetensors", made / "ref.json") if which == "new_geometry" else (TINY, made / "tiny.json")
    ref = json.load(open(ref))
    ids = ref["ids"]
    got = json.loads(_needle("logits", "--model", str(ckpt), "--ids", ",".join(map(str, ids)), "--positions",
                             ",".join(map(str, range(len(ids)))), "--heads", "--acts", "float"))
    want = np.array(ref["logits"])
    have = np.array(got["logits"])[:, :want.shape[1]]
    assert have.shape == want.shape
    assert np.abs(have - want).max() <= 1e-4 * np.abs(want).max()
    assert (have.argmax(1) == want.argmax(1)).all()
    h = got["heads"]
    assert np.abs(np.array(h["embedding"]) - ref["embedding"]).max() <= 1e-5
    assert abs(h["confidence_logit"] - ref["confidence_logit"]) <= 1e-5
    assert np.abs(np.array(h["router_logits"]) - ref["router_logits"]).max() <= 1e-5


@pytest.mark.parametrize("layers", [None, 2], ids=["full", "rung2"])
def test_build_equals_reference_exporter(made, layers):
    ours = made / f"ours_{layers}.cact"
    _needle("build", str(made / "ckpt.safetensors"), "--tokenizer", TOK, *(["--layers", str(layers)] if layers else []),
            "--out", str(ours))
    ref = made / ("ref.cact" if layers is None else "ref_rung2.cact")
    r = subprocess.run([DIFF, str(ours), str(ref), "99.9"], capture_output=True, text=True)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr


def test_reference_reads_our_files(made):
    files = []
    for name, extra in (("r4.cact", []), ("r_rung2.cact", ["--layers", "2"]), ("r2.cact", ["--bits", "2"])):
        _needle("build", str(made / "ckpt.safetensors"), "--tokenizer", TOK, *extra, "--out", str(made / name))
        files.append(str(made / name))
    _oracle("read", str(made / "ckpt.safetensors"), str(made / "read.json"), *files)
    rep = json.load(open(made / "read.json"))
    assert rep["r4.cact"]["num_layers"] == 3 and rep["r_rung2.cact"]["num_layers"] == 2
    for name, bits in (("r4.cact", 4), ("r_rung2.cact", 4), ("r2.cact", 2)):
        e = rep[name]
        assert e["tokenizer_last"]
        for m in ("embedding", "q_proj"):
            assert e["cq"][m]["bits"] == bits
            assert e["cq"][m]["rel"] < 1e-3, (name, m, e["cq"][m])
            assert e["cq"][m]["rel_to_float"] > 0.02  # it is quantised, not the float weights


def test_init_matches_reference_init(made, tmp_path):
    ours = tmp_path / "init.safetensors"
    _needle("init", "--preset", "needle3-tiny", "--seed", "3", "--out", str(ours))
    _oracle("init", str(ours), str(tmp_path / "init.json"))
    rep = json.load(open(tmp_path / "init.json"))
    assert rep["only_ours"] == [] and rep["only_reference"] == []
    assert rep["forward_finite"]
    deterministic = random = 0
    for k, e in rep["leaves"].items():
        assert e["shape_ours"] == e["shape_reference"], k
        if e["deterministic"]:
            assert e["equal"], k
            deterministic += 1
        else:
            n = int(np.prod(e["shape_ours"]))
            tol = 0.1 if n >= 1000 else 0.35
            assert abs(e["std_ours"] / e["std_reference"] - 1) < tol, (k, e)
            assert abs(e["mean_ours"]) < 4 * e["std_reference"] / np.sqrt(n), (k, e)
            random += 1
    assert deterministic >= 40 and random >= 15, (deterministic, random)

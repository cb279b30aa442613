"""The C trainer's Needle 3 gradients against jax.grad of the reference model
(cactus-needle 3.2.8, an oracle only): tests/python/n3_grad_oracle.py, run in
the venv that has it, makes a random tiny v3 model (split q/k vs v heads,
local and global layers, q/k/v conv taps, Monarch MLP, two seed-strided engram
sites, out_vocab) and the reference's gradient of the mean cross-entropy with
respect to every parameter; tools/train_grad_dump (full mode) computes ours on
the same checkpoint.  Bars: the loss within 1e-5 relative; every tensor's
gradient within 2e-3 of the reference's norm (relative L2 error), plus a
floor of 1e-6 x the whole gradient's norm for tensors whose gradient is near
zero.  The deploy-numerics LoRA step (CQ 4-bit weights through a
straight-through estimator, A8 activations incl. Needle 3's q per head, k/v
per head and position and the mHC input) against the reference's own
fine-tuning loss.  Its bars are wider than the float ones because the
quantisers are discontinuous: a step has ~20 activations within 2e-4 of a
rounding tie (in code units), and float32 differences of ~1e-6 relative
between two implementations flip some of those codes.  Measured on this
geometry: loss 1.0e-4 relative, LoRA gradients <= 4.2e-3 relative L2 (each
component alone, e.g. without the mHC input quantiser, matches the loss to
4e-8).  Bars: loss within 2e-4 relative and the numerics move the loss >= 10x
that; gradients within 2e-2 relative and the numerics move them >= 10x that.

Without the venv (/opt/venv-n3, NEEDLE3_VENV overrides) the test is SKIPPED."""
import json
import os
import subprocess

import numpy as np
import pytest

from n3_reference import ENV, PY, ROOT, build_tool, reference_missing

DUMP = build_tool("train_grad_dump")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    why = reference_missing("needle.model.architecture, jax, flax")
    if why:
        pytest.skip(f"SKIPPED: Needle 3 reference oracle not usable ({why})")
    if not os.path.exists(DUMP):
        pytest.skip("train_grad_dump not built (make test builds it)")
    out = tmp_path_factory.mktemp("n3_grad")
    r = subprocess.run([PY, os.path.join(ROOT, "tests", "python", "n3_grad_oracle.py"), str(out), DUMP],
                       capture_output=True, text=True, env=ENV, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return str(out / "model.safetensors"), dict(np.load(out / "ref.npz")), str(out / "qat_dump.json")


def test_full_gradients_match_reference(reference):
    path, ref, _ = reference
    ids = ref["ids"]
    B = ids.shape[0]
    r = subprocess.run([DUMP, path, "full", "0", "0", str(B), ",".join(str(int(i)) for i in ids.reshape(-1))],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    # the dump uses the same targets, with those past out_vocab skipped by the trainer itself
    want_targets = ref["targets"].reshape(-1)
    assert np.array_equal(np.where(np.array(got["targets"]) < 200, np.array(got["targets"]), -1), want_targets)
    assert abs(got["loss"] - float(ref["loss"])) <= 1e-5 * abs(float(ref["loss"]))
    refg = {k[2:]: v for k, v in ref.items() if k.startswith("g:")}
    total = np.sqrt(sum(float(np.sum(v.astype(np.float64) ** 2)) for v in refg.values()))
    worst, checked = 0.0, 0
    for name, mine in got["grads"].items():
        if name.startswith("hada_p"):
            assert not np.any(mine), name  # the permutations are not parameters of the reference
            continue
        want = refg[name].astype(np.float64).reshape(-1)
        have = np.array(mine, np.float64)
        assert have.shape == want.shape, name
        err = np.linalg.norm(have - want)
        bound = 2e-3 * np.linalg.norm(want) + 1e-6 * total
        worst = max(worst, err / max(np.linalg.norm(want), 1e-30))
        assert err <= bound, (name, err, np.linalg.norm(want))
        checked += 1
    # every forward parameter of the reference model is checked (the heads are not in the loss)
    assert checked == sum(1 for k in refg if "_head/" not in k), (checked, len(refg))
    print("worst relative gradient error", worst, "over", checked, "tensors")


def _rel(a, b):
    a, b = np.array(a, np.float64).reshape(-1), np.array(b, np.float64).reshape(-1)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)


def test_qat_lora_step_matches_reference_finetune(reference):
    path, ref, dump = reference
    mine = json.load(open(dump))
    ids = ref["ids"]
    # the same step in full precision (our dump without QAT), to see that the numerics matter
    r = subprocess.run([DUMP, path, "4", "8", "7", str(ids.shape[0]), ",".join(str(int(i)) for i in ids.reshape(-1)),
                        "none"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    full = json.loads(r.stdout)
    loss_err = abs(mine["loss"] - float(ref["qat_loss"]))
    assert loss_err <= 2e-4 * abs(float(ref["qat_loss"])), (mine["loss"], float(ref["qat_loss"]))
    assert abs(mine["loss"] - full["loss"]) > 10 * loss_err, (mine["loss"], full["loss"])
    worst = 0.0
    for name, t in mine["lora"].items():
        for which, key in (("gA", "A"), ("gB", "B")):
            rel = _rel(t[which], ref[f"qg:{name}:{key}"])
            worst = max(worst, rel)
            assert rel < 2e-2, (name, which, rel)
            assert _rel(t[which], full["lora"][name][which]) > 10 * rel, (name, which)
    print("QAT loss", mine["loss"], "reference", float(ref["qat_loss"]), "full precision", full["loss"],
          "worst relative LoRA gradient error", worst)

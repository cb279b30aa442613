"""A QAT LoRA step (needle finetune --qat-bits, src/train/qat.c) against the cactus-needle
2.0.15 reference's own loss: for the LoRA factors, ids and targets of one C step on the
golden tiny checkpoint, the loss and jax.grad of the reference's merge_lora + cq_ste_params
(CQ weights through a straight-through estimator) + model.apply(quant=True) (A8 activations
after configure_deploy) must equal the C trainer's loss and LoRA gradients, for --qat-bits
auto (this checkpoint has no weight_bits map: CQ 4 bits) and 2.

The reference runs in its own virtual environment (NEEDLE_N2015_VENV, default
/opt/venv-n2015; .ci/run installs it); without it the test is skipped, and says so."""
import json
import os
import subprocess

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("NEEDLE_BUILD", "build")
DUMP = os.path.join(ROOT, BUILD, "tools", "train_grad_dump")
CKPT = os.path.join(ROOT, "tests", "golden", "tiny.safetensors")
VENV = os.environ.get("NEEDLE_N2015_VENV", "/opt/venv-n2015")
PY = os.path.join(VENV, "bin", "python")
HELPER = os.path.join(os.path.dirname(__file__), "n2015_oracle.py")
# mode -> the seed of its step (ids, LoRA factors).  CQ and A8 are discontinuous: a value within
# float rounding of a decision boundary can take the other code on the two sides, which moves the
# gradients by ~1e-3 while the loss still agrees to ~1e-6 (seen at 2 bits with seed 3; seed 5
# agrees to 2e-6).  The seeds below are ones without such a near-tie.
MODES = {"auto": 3, "2": 5}


def _ids(seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(14, 8192, size=(2, 16))
    ids[:, 0] = 2
    return ids


def _c_step(ids, mode, seed):
    flat = ",".join(str(int(i)) for i in ids.reshape(-1))
    out = subprocess.run([DUMP, CKPT, "4", "8", str(seed), str(ids.shape[0]), flat, mode], capture_output=True,
                         text=True, check=True)
    d = json.loads(out.stdout)
    d["ids"] = ids.reshape(-1).tolist()
    return d


def _rel(a, b):
    a, b = np.array(a, np.float64), np.array(b, np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)


def test_qat_step_matches_reference(tmp_path):
    if not os.path.exists(PY):
        pytest.skip(f"SKIPPED, NOT PASSED: the cactus-needle 2.0.15 oracle venv {VENV} is missing "
                    "(python3 -m venv /opt/venv-n2015 && /opt/venv-n2015/bin/pip install cactus-needle==2.0.15 "
                    "sentencepiece jax flax; .ci/run does this)")
    assert os.path.exists(DUMP), "tools/train_grad_dump not built (make test builds it)"
    mine, full, specs = {}, {}, []
    for mode, seed in MODES.items():
        ids = _ids(seed)
        full[mode] = _c_step(ids, "none", seed)  # the full-precision step (held to jax.grad by test_train_jax.py)
        mine[mode] = _c_step(ids, mode, seed)
        path = tmp_path / f"dump_{mode}.json"
        path.write_text(json.dumps(mine[mode]))
        specs.append(f"{path}:{mode}")
    env = dict(os.environ, NEEDLE_TELEMETRY="0", HF_HUB_OFFLINE="1", JAX_PLATFORMS="cpu")
    ref = subprocess.run([PY, HELPER, "qat_grad", CKPT] + specs, capture_output=True, text=True, env=env,
                         timeout=900)
    assert ref.returncode == 0, ref.stderr[-3000:]
    refs = {r["mode"]: r for r in map(json.loads, ref.stdout.splitlines())}
    for mode in MODES:
        d, r = mine[mode], refs[mode]
        loss_err = abs(d["loss"] - r["loss"])
        assert loss_err < 1e-5 * abs(r["loss"]), (mode, d["loss"], r["loss"])
        # the deploy numerics really move the loss and the gradients, far beyond the match
        assert abs(d["loss"] - full[mode]["loss"]) > 100 * loss_err, (mode, d["loss"], full[mode]["loss"])
        worst = 0.0
        for name, t in d["lora"].items():
            for which in ("gA", "gB"):
                rel = _rel(t[which], r["grads"][name][which])
                worst = max(worst, rel)
                assert rel < 1e-3, (mode, name, which, rel)
                assert _rel(t[which], full[mode]["lora"][name][which]) > 20 * rel, (mode, name, which)
        print(mode, "loss", d["loss"], "reference", r["loss"], "full precision", full[mode]["loss"],
              "worst relative gradient error", worst)

"""Needle 3 fine-tuning files against the reference package (cactus-needle
3.2.8, an oracle only; tests/python/n3_finetune_oracle.py runs in its venv),
on tests/golden/needle3/n3_tiny.safetensors:

  - an adapter the reference makes itself (its init_lora, B random so the
    merge moves the weights): `needle build --lora` equals the reference's
    `needle build --lora` path (merge_lora, confidence head dropped, rung,
    write_export) byte for byte as for a plain build (BUILD/tools/cact_diff:
    every non-CQ byte identical, >= 99.9% of CQ bytes, norms within one ulp),
    for the whole model and for --layers 3; and our float merge equals its
    merge_lora (every kernel within 1e-6 of its largest weight, while the
    adapter moved them by > 0.01);
  - an adapter `needle finetune` trains: the reference reads it (read_adapter)
    and its build of it equals ours (the adapter layout is the reference's);
    the reference's read_export reads our merged .cact (4-bit, and a 2-bit
    --layers 3 build of the reference's adapter) and every tensor it decodes (embedding, every layer's block,
    final_norm) equals our own decoding of the file (tools/float_ckpt) within
    1e-5 of the tensor's largest value;
  - `needle finetune --full` writes a checkpoint the reference's
    load_checkpoint accepts, with exactly the tree of its own model (heads
    included) and shapes, and a finite forward.

Without the venv (python3 -m venv /opt/venv-n3 && /opt/venv-n3/bin/pip install
cactus-needle==3.2.8 jax flax sentencepiece safetensors; .ci/run does this)
the tests are SKIPPED, reported as skipped."""
import json
import subprocess

import pytest

from n3_reference import ENV, NEEDLE, PY, TINY, TOK, build_tool, oracle_script, reference_missing

DIFF = build_tool("cact_diff")
FLOAT = build_tool("float_ckpt")
ORACLE = oracle_script("n3_finetune_oracle.py")
TOOLS = [{"name": "set_lights", "description": "Turn lights on or off", "parameters": {
    "type": "object", "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}},
    "required": ["room", "on"]}}]


def _reference_available():
    return reference_missing("needle.model.export, needle.model.finetune, jax, flax, safetensors")


def _oracle(*args):
    r = subprocess.run([PY, ORACLE, *map(str, args)], capture_output=True, text=True, env=ENV, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]


def _run(*args):
    r = subprocess.run([*map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout + r.stderr


def _same_as_reference(ours, ref):
    r = subprocess.run([DIFF, str(ours), str(ref), "99.9"], capture_output=True, text=True)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    why = _reference_available()
    if why:
        pytest.skip(f"SKIPPED: Needle 3 reference oracle not installed ({why})")
    out = tmp_path_factory.mktemp("n3_ft")
    # small data in both formats (local rows and the platform chat format)
    rooms = ["kitchen", "bedroom", "hallway", "garage", "office", "porch"]
    with open(out / "data.jsonl", "w") as f:
        for i in range(16):
            room, on = rooms[i % 6], i % 2 == 0
            call = {"room": room, "on": on}
            q = f"turn {'on' if on else 'off'} the {room} lights"
            if i % 3 == 2:
                row = {"messages": [{"role": "user", "content": q}, {"role": "assistant", "tool_calls": [
                    {"type": "function", "function": {"name": "set_lights", "arguments": json.dumps(call)}}]}],
                    "tools": [{"type": "function", "function": t} for t in TOOLS]}
            else:
                row = {"query": q, "tools": TOOLS, "answers": [{"name": "set_lights", "arguments": call}]}
            f.write(json.dumps(row) + "\n")
    _oracle("adapter", TINY, out / "ref_adapter.safetensors", 5, 4, 8.0)
    return out


def test_reference_adapter_build_equals_reference_build(work):
    ad = work / "ref_adapter.safetensors"
    for layers in (0, 3):
        ref, ours = work / f"ref_{layers}.cact", work / f"ours_{layers}.cact"
        _oracle("export", TINY, ad, TOK, ref, layers, 4)
        extra = ["--layers", layers] if layers else []
        out = _run(NEEDLE, "build", TINY, "--tokenizer", TOK, "--lora", ad, *extra, "--out", ours)
        assert "dropped" in out and "confidence head" in out
        _same_as_reference(ours, ref)
    # the float merge itself
    _run(FLOAT, TINY, work / "ours_merged.safetensors", ad)
    _oracle("merged", TINY, ad, work / "ours_merged.safetensors", work / "merged.json")
    rep = json.load(open(work / "merged.json"))
    assert len(rep) == 5
    for k, e in rep.items():
        assert e["shape_ok"], k
        assert e["max_abs_diff"] <= 1e-6 * e["max_abs"], (k, e)
        assert e["max_delta"] > 0.01, (k, e)


def test_our_adapter_reads_in_reference_and_read_export_reads_our_cact(work):
    ad = work / "our_adapter.safetensors"
    _run(NEEDLE, "finetune", work / "data.jsonl", "--checkpoint", TINY, "--out", ad, "--epochs", 1,
         "--batch-size", 4, "--bucket", "batch", "--lora-rank", 8, "--lora-alpha", 16, "--threads", 1)
    # the reference builds our adapter (its read_adapter, merge_lora) to the same file as ours
    ref, ours = work / "ref_of_ours.cact", work / "ours_of_ours.cact"
    _oracle("export", TINY, ad, TOK, ref, 0, 4)
    _run(NEEDLE, "build", TINY, "--tokenizer", TOK, "--lora", ad, "--out", ours)
    _same_as_reference(ours, ref)
    # read_export on our merged files equals our decoding of them (2 bits: the reference's adapter, which
    # records no training numerics; ours was trained for W4 and refuses another width)
    two = work / "ours_w2_l3.cact"
    _run(NEEDLE, "build", TINY, "--tokenizer", TOK, "--lora", work / "ref_adapter.safetensors", "--bits", "2",
         "--layers", 3, "--out", two)
    for cact, layers in ((ours, 5), (two, 3)):
        dec = work / (cact.stem + "_decoded.safetensors")
        _run(FLOAT, cact, dec)
        _oracle("read", cact, dec, work / "read.json")
        rep = json.load(open(work / "read.json"))
        assert rep["num_layers"] == layers and rep["tokenizer_last"]
        assert len(rep["tensors"]) == 2 + layers * 27, len(rep["tensors"])
        for k, e in rep["tensors"].items():
            assert e["shape_ours"] == e["shape_reference"], (k, e)
            assert e["max_abs_diff"] <= 1e-5 * max(e["max_abs"], 1e-30), (k, e)


def test_full_finetune_checkpoint_loads_in_reference(work):
    ck = work / "full.safetensors"
    _run(NEEDLE, "finetune", work / "data.jsonl", "--checkpoint", TINY, "--full", "--out", ck, "--epochs", 1,
         "--batch-size", 4, "--bucket", "batch", "--threads", 1)
    _oracle("check", ck, work / "check.json")
    rep = json.load(open(work / "check.json"))
    assert rep["only_ours"] == [] and rep["missing"] == [] and rep["shape_mismatch"] == [], rep
    assert rep["num_layers"] == 5 and rep["forward_finite"]

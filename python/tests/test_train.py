"""needle.finetune and needle.build: the C trainer and exporter, in-process."""
import json
import os

import pytest

import needle

TOOL = {"name": "set_lights", "description": "Lights on or off",
        "parameters": {"type": "object", "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}},
                       "required": ["room", "on"]}}
ROWS = [{"query": q, "tools": [TOOL], "answers": a} for q, a in [
    ("kitchen lights off", [{"name": "set_lights", "arguments": {"room": "kitchen", "on": False}}]),
    ("hall lights on", [{"name": "set_lights", "arguments": {"room": "hall", "on": True}}]),
    ("what time is it", []),
    ("den lights off", [{"name": "set_lights", "arguments": {"room": "den", "on": False}}]),
]]
FAST = dict(epochs=1, batch_size=2, max_len=256, val_split=0, stop_after=1, bucket="batch", lora_rank=4)


def test_finetune_then_build_then_run(golden, tmp_path, capfd):
    adapter = str(tmp_path / "adapter.safetensors")
    result = needle.finetune(ROWS, checkpoint=os.path.join(golden, "tiny.safetensors"), out=adapter, **FAST)
    assert result["rows"] == 4 and result["steps"] == 1 and result["stopped"] is True
    assert result["first_loss"] > 0 and result["last_loss"] > 0 and result["out"] == adapter
    assert os.path.getsize(adapter) > 0
    err = capfd.readouterr().err
    assert "step       1/" in err and "wrote adapter" in err  # the CLI's progress lines, from C

    cact = str(tmp_path / "tuned.cact")
    assert needle.build(os.path.join(golden, "tiny.safetensors"), cact, lora=adapter, bits=4) == cact
    out = capfd.readouterr().out
    assert "merged" in out and "wrote" in out
    env = needle.Needle(weights=cact, tools=[TOOL]).complete("kitchen lights off", max_new_tokens=24)
    assert {"type", "success", "function_calls"} <= set(env)  # random base weights: only the contract holds


def test_finetune_from_a_jsonl_file_quietly(golden, tmp_path, capfd):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS) + "{broken line\n")
    result = needle.finetune(str(data), checkpoint=os.path.join(golden, "tiny.safetensors"),
                             out=str(tmp_path / "a.safetensors"), quiet=True, **FAST)
    assert result["rows"] == 4
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_build_requantises_a_cact(golden, tmp_path):
    out = needle.build(os.path.join(golden, "tiny_w4.cact"), str(tmp_path / "w3.cact"), bits=3, quiet=True)
    assert os.path.getsize(out) < os.path.getsize(os.path.join(golden, "tiny_w4.cact"))
    assert needle.Needle(weights=out).embed("hi")


@pytest.mark.parametrize("kwargs, code", [
    (dict(data="/nonexistent.jsonl"), -1),
    (dict(checkpoint="/nonexistent.safetensors"), -1),
    (dict(epochs=-1), -4),
    (dict(lr=-1.0), -4),
    (dict(val_split=1.5), -4),
    (dict(bucket="sometimes"), -4),
    (dict(no_such_option=1), -4),
    (dict(batch_size="big"), -4),
    (dict(tokenizer="/nonexistent.model"), -1),
])
def test_finetune_bad_arguments_raise(golden, tmp_path, kwargs, code):
    args = dict(data=ROWS, checkpoint=os.path.join(golden, "tiny.safetensors"), out=str(tmp_path / "x.safetensors"))
    args.update(FAST)
    args.update(kwargs)
    with pytest.raises(needle.NeedleError) as e:
        needle.finetune(args.pop("data"), args.pop("checkpoint"), args.pop("out"), quiet=True, **args)
    assert e.value.code == code
    assert not os.path.exists(tmp_path / "x.safetensors")


def test_finetune_rejects_a_model_file_as_data(golden, tmp_path):
    with pytest.raises(needle.NeedleError):
        needle.finetune(os.path.join(golden, "tiny_w4.cact"), os.path.join(golden, "tiny.safetensors"),
                        str(tmp_path / "x.safetensors"), quiet=True, **FAST)


@pytest.mark.parametrize("kwargs", [dict(bits=5), dict(bits=4, bits_map="default=4"), dict(bits_map="bogus=9"),
                                    dict(kv_window=-1), dict(lora="/nonexistent.safetensors"),
                                    dict(checkpoint="/nonexistent.safetensors")])
def test_build_bad_arguments_raise(golden, tmp_path, kwargs):
    ckpt = kwargs.pop("checkpoint", os.path.join(golden, "tiny.safetensors"))
    with pytest.raises(needle.NeedleError):
        needle.build(ckpt, str(tmp_path / "x.cact"), quiet=True, **kwargs)
    assert not os.path.exists(tmp_path / "x.cact")

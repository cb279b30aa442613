"""The official `openai` Python client against `needle serve`: tool calls, the
tool-result follow-up (continuing the cached session), streaming, embeddings,
tool_choice, a wrong API key."""
import json
import math
import os
import subprocess

import openai
import pytest
from conftest import BUILD, KEY, ROOT, tools_openai

TOOLS = tools_openai()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key=KEY, max_retries=0, timeout=30)


@pytest.fixture(scope="module")
def model_id(client):
    return client.models.list().data[0].id


def test_models_lists_the_served_model(client, model_id):
    assert model_id == "needle-default"
    assert client.models.retrieve(model_id).id == model_id


def test_tool_call_then_tool_result_round_trip(client, model_id):
    msgs = [{"role": "user", "content": "turn off the kitchen lights"}]
    r = client.chat.completions.create(model=model_id, messages=msgs, tools=TOOLS)
    choice = r.choices[0]
    assert r.object == "chat.completion"
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "set_lights"
    args = json.loads(call.function.arguments)
    assert args["room"] == "kitchen" and args["on"] is False
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert 0.0 <= r.needle["confidence"] <= 1.0
    # the tool's result: the server continues the session it kept (KV reuse)
    msgs.append(choice.message.model_dump(exclude_none=True))
    msgs.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"ok": True, "room": "kitchen"})})
    r2 = client.chat.completions.create(model=model_id, messages=msgs, tools=TOOLS)
    assert r2.choices[0].finish_reason in ("stop", "tool_calls")
    assert r2.needle["session"] == "reused"
    # the same two turns through `needle run` (stdin mode) give the same answer
    run = subprocess.run([os.path.join(ROOT, BUILD, "needle"), "run", "--threads", "1"], cwd=ROOT, text=True,
                         capture_output=True, timeout=60,
                         input="turn off the kitchen lights\n" + json.dumps({"ok": True, "room": "kitchen"}) + "\n")
    envs = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(envs) == 2, run.stderr
    got = [(c.function.name, json.loads(c.function.arguments)) for c in (r2.choices[0].message.tool_calls or [])]
    want = [(c["name"], c["arguments"]) for c in envs[1]["function_calls"]]
    assert got == want
    # and a new user turn continues it again
    msgs.append(r2.choices[0].message.model_dump(exclude_none=True))
    msgs.append({"role": "user", "content": "set the thermostat to 21 degrees"})
    r3 = client.chat.completions.create(model=model_id, messages=msgs, tools=TOOLS)
    assert r3.needle["session"] == "reused"
    assert r3.choices[0].finish_reason == "tool_calls"
    assert r3.choices[0].message.tool_calls[0].function.name == "set_thermostat"


def test_history_the_server_did_not_write_starts_fresh(client, model_id):
    msgs = [{"role": "user", "content": "turn on the bedroom lights"},
            {"role": "assistant", "tool_calls": [{"id": "call_x", "type": "function", "function": {
                "name": "set_lights", "arguments": "{\"room\": \"bedroom\", \"on\": true}"}}]},
            {"role": "tool", "tool_call_id": "call_x", "content": "{\"ok\": true}"}]
    r = client.chat.completions.create(model=model_id, messages=msgs, tools=TOOLS)
    assert r.needle["session"] == "new"
    assert r.choices[0].finish_reason in ("stop", "tool_calls")


def test_streaming_chunks(client, model_id):
    stream = client.chat.completions.create(model=model_id, tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "turn off the kitchen lights"}])
    chunks = list(stream)
    assert len(chunks) >= 4
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    calls = {}
    finish = None
    for c in chunks:
        if not c.choices:
            continue
        d = c.choices[0].delta
        for tc in d.tool_calls or []:
            slot = calls.setdefault(tc.index, {"name": "", "arguments": ""})
            slot["name"] += tc.function.name or ""
            slot["arguments"] += tc.function.arguments or ""
        finish = c.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert calls[0]["name"] == "set_lights"
    assert json.loads(calls[0]["arguments"])["room"] == "kitchen"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


def test_embeddings_have_the_heads_width(client, model_id, server):
    status, _, models = server.request("GET", "/v1/models")
    dim = models["data"][0]["embedding_dim"]
    assert dim > 0
    r = client.embeddings.create(model=model_id, input=["turn on the lights", "what is the weather"])
    assert [d.index for d in r.data] == [0, 1]
    for d in r.data:
        assert len(d.embedding) == dim
        assert abs(math.sqrt(sum(x * x for x in d.embedding)) - 1.0) < 1e-3
    f = client.embeddings.create(model=model_id, input="turn on the lights", encoding_format="float")
    assert max(abs(a - b) for a, b in zip(f.data[0].embedding, r.data[0].embedding)) < 1e-5


def test_tool_choice(client, model_id):
    q = [{"role": "user", "content": "turn off the kitchen lights"}]
    r = client.chat.completions.create(model=model_id, messages=q, tools=TOOLS, tool_choice="none")
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls
    r = client.chat.completions.create(model=model_id, messages=q, tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "set_lights"}})
    assert r.choices[0].message.tool_calls[0].function.name == "set_lights"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, messages=q, tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "no_such_tool"}})
    assert "no_such_tool" in str(e.value)


def test_wrong_api_key_is_401(server, model_id):
    bad = openai.OpenAI(base_url=server.base + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "hi"}])
    assert e.value.status_code == 401
    status, _, body = server.request("GET", "/v1/models", key=None)
    assert status == 401 and body["error"]["code"] == "invalid_api_key"


def test_router_shows_the_tools_retrieval_picked(client, model_id):
    extra = [{"type": "function", "function": {"name": n, "description": d, "parameters": {
        "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}
        for n, d in (("send_email", "Send an email to a contact"), ("book_flight", "Book a flight to a city"),
                     ("translate", "Translate text into another language"))]
    r = client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "turn off the kitchen lights"}],
                                       tools=TOOLS + extra)
    shown = r.needle["router"]["tools"]
    assert 1 <= len(shown) <= 5 and len(set(shown)) == len(shown)
    assert "set_lights" in shown
    assert set(shown) <= {t["function"]["name"] for t in TOOLS + extra}
    # with five tools or fewer every tool is shown and there is no router
    r = client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "turn off the kitchen lights"}],
                                       tools=TOOLS)
    assert r.needle["router"] is None


def test_no_tools_means_no_call(client, model_id):
    r = client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "turn off the kitchen lights"}],
                                       tools=[])
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls


def test_max_tokens_too_small_finishes_with_length(client, model_id):
    r = client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "turn off the kitchen lights"}],
                                       tools=TOOLS, max_tokens=3)
    assert r.choices[0].finish_reason == "length"
    assert not r.choices[0].message.tool_calls
    assert r.needle["error"]


def test_sampling_options_are_accepted_and_seeded(client, model_id):
    q = [{"role": "user", "content": "set the thermostat to 21 degrees"}]
    a = client.chat.completions.create(model=model_id, messages=q, tools=TOOLS, temperature=0.8, top_p=0.9, seed=7)
    b = client.chat.completions.create(model=model_id, messages=q, tools=TOOLS, temperature=0.8, top_p=0.9, seed=7)
    calls = [[(c.function.name, c.function.arguments) for c in (x.choices[0].message.tool_calls or [])] for x in (a, b)]
    assert calls[0] == calls[1]

"""needle's own request field "strict": true withholds calls the grounding checks flag
(docs/envelope.md): a negated request gets no tool call; a non-boolean is a 400."""
from conftest import tools_openai


def ask(server, text, **extra):
    body = {"model": "needle-default", "messages": [{"role": "user", "content": text}], "tools": tools_openai()}
    body.update(extra)
    return server.request("POST", "/v1/chat/completions", body)


def calls_of(body):
    return [c["function"] for c in body["choices"][0]["message"].get("tool_calls") or []]


def test_strict_withholds_a_negated_request(server):
    text = "please don't turn off the kitchen lights"
    status, _, loose = ask(server, text)
    assert status == 200
    status, _, strict = ask(server, text, strict=True)
    assert status == 200
    assert calls_of(strict) == []
    # the same session settings without strict answer as before (the model may call: strict is what withholds)
    status, _, again = ask(server, text, strict=False)
    assert status == 200 and calls_of(again) == calls_of(loose)
    # a plain request is untouched by strict
    status, _, plain = ask(server, "turn off the kitchen lights", strict=True)
    assert status == 200 and [c["name"] for c in calls_of(plain)] == ["set_lights"]


def test_strict_must_be_a_boolean(server):
    status, _, body = ask(server, "hi", strict="yes")
    assert status == 400 and "strict" in body["error"]["message"]

"""Withheld calls through the server (docs/envelope.md): a negated request gets no tool call in every
session, and the answer's `needle` object says why (validation) and what was withheld
(suppressed_calls); needle's own request field "strict": true also withholds calls on values the
request does not say; a non-boolean is a 400."""
from conftest import tools_openai


def ask(server, text, **extra):
    body = {"model": "needle-default", "messages": [{"role": "user", "content": text}], "tools": tools_openai()}
    body.update(extra)
    return server.request("POST", "/v1/chat/completions", body)


def calls_of(body):
    return [c["function"] for c in body["choices"][0]["message"].get("tool_calls") or []]


def test_negated_request_withheld_with_or_without_strict(server):
    text = "please don't turn off the kitchen lights"
    for strict in (False, True):
        status, _, body = ask(server, text, strict=strict)
        assert status == 200
        assert calls_of(body) == []
        ext = body["needle"]
        assert ext["validation"]["negation"] is True and ext["type"] == "respond"
        # the model's call, if it wrote one, is kept for the caller, not executed
        for c in ext["suppressed_calls"]:
            assert c["name"] == "set_lights"
    # a plain request is untouched by strict
    status, _, plain = ask(server, "turn off the kitchen lights", strict=True)
    assert status == 200 and [c["name"] for c in calls_of(plain)] == ["set_lights"]


def test_strict_must_be_a_boolean(server):
    status, _, body = ask(server, "hi", strict="yes")
    assert status == 400 and "strict" in body["error"]["message"]


def test_split_answers_a_two_part_request_in_parts(server):
    """needle's request field "split" (default true): a first request answered with one call that can
    be cut in two is answered one part at a time (docs/envelope.md, "Two requests in one")."""
    text = "set the thermostat to 30 and switch off the balcony lights"
    status, _, body = ask(server, text)
    assert status == 200
    assert [c["name"] for c in calls_of(body)] == ["set_thermostat", "set_lights"]
    assert body["needle"]["validation"]["split"] == ["set the thermostat to 30", "switch off the balcony lights"]
    status, _, off = ask(server, text, split=False)
    assert status == 200 and off["needle"]["validation"]["split"] == []
    status, _, bad = ask(server, text, split="yes")
    assert status == 400 and "split" in bad["error"]["message"]


def test_ask_again_answers_a_request_the_model_left_without_a_call(server):
    """needle's request field "ask_again" (default true): a first request the model answers with no
    call is asked again (docs/envelope.md, "Asked again")."""
    text = "thermostat 18.5 celsius"
    status, _, body = ask(server, text)
    assert status == 200
    assert calls_of(body) and calls_of(body)[0]["name"] == "set_thermostat"
    assert body["needle"]["validation"]["asked_again"] is True
    status, _, off = ask(server, text, ask_again=False)
    assert status == 200 and calls_of(off) == [] and off["needle"]["validation"]["asked_again"] is False
    status, _, bad = ask(server, text, ask_again=1)
    assert status == 400 and "ask_again" in bad["error"]["message"]

"""Bad input and bad clients get clear errors, and the server keeps serving:
malformed JSON, huge bodies, slow clients, bad tool schemas, bad shapes,
clients that hang up."""
import json
import socket
import time

import pytest
from conftest import KEY, MAX_BODY, TIMEOUT_S, tools_openai

ASK = {"model": "needle-default", "messages": [{"role": "user", "content": "turn off the kitchen lights"}]}


def still_serving(server):
    status, _, body = server.request("POST", "/v1/chat/completions", ASK)
    assert status == 200, body
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "set_lights"
    assert server.alive()


def assert_error(status, body, want_status, *words):
    assert status == want_status, body
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    for w in words:
        assert w in err["message"], err["message"]


@pytest.mark.parametrize("raw", [b"{bad", b"", b"[1,2", b"\xff\xfe", b"{\"messages\": [}", b"null"])
def test_malformed_json(server, raw):
    status, _, body = server.request("POST", "/v1/chat/completions", raw)
    assert_error(status, body, 400)
    assert "JSON" in body["error"]["message"]
    still_serving(server)


def test_huge_body_is_413(server):
    big = dict(ASK, messages=[{"role": "user", "content": "x" * (MAX_BODY * 3)}])
    status, _, body = server.request("POST", "/v1/chat/completions", big)
    assert_error(status, body, 413, "limit")
    still_serving(server)


def test_huge_declared_length_is_refused_without_reading(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
              b"\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n{")
    reply = s.recv(65536).decode(errors="replace")
    s.close()
    assert reply.startswith("HTTP/1.1 413"), reply[:200]
    still_serving(server)


def test_slow_clients_are_timed_out_while_others_are_served(server):
    t0 = time.time()
    slow = []
    for head in (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",  # headers never finish
                 b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mod"):  # body stalls
        s = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT_S + 5)
        s.sendall(head)
        slow.append(s)
    still_serving(server)  # others are not held up by the stalled connections
    for s in slow:
        try:  # the server closes the stalled connection (a socket timeout here fails the test)
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        s.close()
        assert data == b"", data[:200]
    waited = time.time() - t0
    assert waited < TIMEOUT_S + 4, "slow connections were held %.1f s" % waited
    still_serving(server)


def test_bad_tool_schemas(server):
    cases = [
        ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "x": {"type": "frobnicate"}}}}}], "tools"),
        ([{"type": "function", "function": {"name": "f", "parameters": {"not": {"type": "string"}}}}], "not"),
        ([{"type": "function", "function": {"parameters": {}}}], "name"),
        ([{"type": "function", "function": {"name": "f", "parameters": "object"}}], "parameters"),
        ({"type": "function"}, "tools"),
        ([{"type": "retrieval"}], "tools[0]"),
    ]
    for tools, word in cases:
        status, _, body = server.request("POST", "/v1/chat/completions", dict(ASK, tools=tools))
        assert_error(status, body, 400, word)
    still_serving(server)


def test_bad_request_shapes(server):
    cases = [
        ({"model": "m"}, 400, "messages"),
        (dict(ASK, messages=[]), 400, "messages"),
        (dict(ASK, messages=[{"role": "wizard", "content": "hi"}]), 400, "wizard"),
        (dict(ASK, messages=[{"role": "user"}]), 400, "content"),
        (dict(ASK, messages=[{"role": "user", "content": [{"type": "image_url"}]}]), 400, "text"),
        (dict(ASK, messages=[{"role": "user", "content": "hi"}] * 65), 400, "limit"),
        (dict(ASK, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]), 400, "last"),
        (dict(ASK, messages=[{"role": "tool", "content": "{}"}]), 400, "tool results"),
        (dict(ASK, max_tokens=10 ** 6), 400, "max_tokens"),
        (dict(ASK, temperature=7), 400, "temperature"),
        (dict(ASK, n=3), 400, "n"),
        (dict(ASK, tool_choice="always"), 400, "tool_choice"),
        (dict(ASK, stream="yes"), 400, "stream"),
        ([1, 2], 400, "object"),
    ]
    for req, want, word in cases:
        status, _, body = server.request("POST", "/v1/chat/completions", req)
        assert_error(status, body, want, word)
    status, _, body = server.request("GET", "/v1/chat/completions")
    assert_error(status, body, 405)
    status, _, body = server.request("GET", "/v1/nothing")
    assert_error(status, body, 404)
    status, _, body = server.request("POST", "/v1/embeddings", {"input": 5})
    assert_error(status, body, 400, "input")
    still_serving(server)


def wait_idle(server):
    deadline = time.time() + 20
    while True:
        status, _, health = server.request("GET", "/health", key=None)
        assert status == 200 and health["status"] == "ok"
        if health["active"] == 0 and health["queued"] == 0:
            return health
        assert time.time() < deadline, health
        time.sleep(0.05)


def test_clients_that_hang_up(server):
    """Requests whose clients are gone are dropped before their decode."""
    before = wait_idle(server)
    body = json.dumps(dict(ASK, tools=tools_openai())).encode()
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                  b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.close()
    after = wait_idle(server)
    assert after["cancelled"] > before["cancelled"], (before, after)
    still_serving(server)

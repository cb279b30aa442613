"""A bounded load test: 500 requests from 32 concurrent clients over loopback.
Every response is a well-formed 200 or a 503 with Retry-After and an error
object; the server's RSS stays flat after warm-up.  Throughput and latency
percentiles are written to BUILD/server_load.json (run_tests.sh prints them)."""
import http.client
import json
import os
import threading
import time

from conftest import BUILD, KEY, ROOT, tools_openai

N_REQUESTS = 500
CLIENTS = 32
WARMUP = 150
QUERIES = ["turn off the kitchen lights", "set the thermostat to 21 degrees", "what's the weather in Paris",
           "turn on the bedroom lights at 40 percent", "play some jazz in the living room",
           "remind me to call mum at 6pm", "lock the front door", "set a timer for ten minutes"]
TOOLS = tools_openai()


def check_completion(body, stream):
    if stream:
        events = [e for e in body.split("\n\n") if e]
        assert events[-1] == "data: [DONE]", events[-1]
        chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1]
        assert finish in ("tool_calls", "stop", "length")
        return None
    r = json.loads(body)
    assert r["object"] == "chat.completion"
    choice = r["choices"][0]
    assert choice["finish_reason"] in ("tool_calls", "stop", "length")
    msg = choice["message"]
    for c in msg.get("tool_calls") or []:
        assert c["id"].startswith("call_") and c["type"] == "function"
        json.loads(c["function"]["arguments"])
    assert r["usage"]["total_tokens"] > 0
    return msg


def test_load_500_requests_32_clients(server):
    lock = threading.Lock()
    next_i = [0]
    results = []  # (status, seconds)
    rss = {}
    failures = []

    def client(k):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        last = None  # this client's last answered conversation, for tool-result follow-ups
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= N_REQUESTS:
                break
            stream = i % 7 == 3
            if last and last[-1].get("tool_calls") and i % 3 == 0:
                msgs = last + [{"role": "tool", "tool_call_id": last[-1]["tool_calls"][0]["id"],
                                "content": "{\"ok\":true}"}]
            else:
                msgs = [{"role": "user", "content": QUERIES[(i * 5 + k) % len(QUERIES)]}]
            body = json.dumps({"model": "needle-default", "messages": msgs, "tools": TOOLS, "stream": stream})
            t0 = time.time()
            try:
                conn.request("POST", "/v1/chat/completions", body,
                             {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read().decode()
                dt = time.time() - t0
                if resp.status == 200:
                    msg = check_completion(data, stream)
                    if msg is not None:
                        last = msgs + [msg] if msg.get("tool_calls") else None
                elif resp.status == 503:
                    assert resp.getheader("Retry-After") == "1"
                    err = json.loads(data)["error"]
                    assert err["code"] == "overloaded" and err["message"]
                    time.sleep(float(resp.getheader("Retry-After")))  # as a polite client does
                else:
                    raise AssertionError("status %d: %s" % (resp.status, data[:300]))
            except Exception as e:  # noqa: BLE001 - every failure is collected and reported
                with lock:
                    failures.append("request %d: %r" % (i, e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
                continue
            with lock:
                results.append((resp.status, dt))
                if len(results) == WARMUP:
                    rss["warm"] = server.rss_kib()
                rss["peak"] = max(rss.get("peak", 0), server.rss_kib())
        conn.close()

    rss["start"] = server.rss_kib()
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    wall = time.time() - t0
    assert not any(t.is_alive() for t in threads), "the load test did not finish in time"
    rss["end"] = server.rss_kib()
    assert not failures, failures[:5]
    assert len(results) == N_REQUESTS
    ok = sorted(dt for st, dt in results if st == 200)
    n503 = sum(1 for st, _ in results if st == 503)
    assert len(ok) >= N_REQUESTS // 10, "only %d of %d requests were answered" % (len(ok), N_REQUESTS)

    def pct(p):
        return ok[min(len(ok) - 1, int(p / 100.0 * len(ok)))] * 1000.0

    report = {"requests": N_REQUESTS, "clients": CLIENTS, "ok_200": len(ok), "busy_503": n503,
              "wall_s": round(wall, 2), "answered_per_s": round(len(ok) / wall, 1),
              "p50_ms": round(pct(50), 1), "p99_ms": round(pct(99), 1),
              "rss_start_mib": round(rss["start"] / 1024, 1), "rss_after_warmup_mib": round(rss["warm"] / 1024, 1),
              "rss_peak_mib": round(rss["peak"] / 1024, 1), "rss_end_mib": round(rss["end"] / 1024, 1)}
    with open(os.path.join(ROOT, BUILD, "server_load.json"), "w") as f:
        json.dump(report, f)
    print(report)
    # flat after warm-up: the session cache is full by then, so later requests only reuse memory
    assert rss["end"] - rss["warm"] < 8 * 1024, report
    status, _, health = server.request("GET", "/health", key=None)
    assert status == 200 and health["active"] == 0 and health["queued"] == 0
    assert 1 <= health["sessions_cached"] <= 8  # the server runs with --cache 8
    assert health["cache_hits"] > 0  # tool-result follow-ups continued their sessions

"""The `needle serve` tests: one server per test run, started on a free loopback
port with the bundled model and tools (models/needle-default.cact, models/tools.json).

The server runs with an API key, a 3 s idle timeout and a 64 KiB body limit so
the limit tests stay fast; NEEDLE_BUILD names the build directory (default build)."""
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("NEEDLE_BUILD", "build")
KEY = "test-key-123"
MAX_BODY = 65536
TIMEOUT_S = 3


class Server:
    def __init__(self, proc, port):
        self.proc = proc
        self.port = port
        self.base = "http://127.0.0.1:%d" % port

    def request(self, method, path, body=None, key=KEY, headers=None, timeout=30):
        """(status, headers, parsed JSON or raw text) for one request."""
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if key:
            req.add_header("Authorization", "Bearer " + key)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, hdrs, raw = r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, hdrs, raw = e.code, dict(e.headers), e.read()
        text = raw.decode()
        try:
            return status, hdrs, json.loads(text)
        except ValueError:
            return status, hdrs, text

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS for the server")

    def alive(self):
        return self.proc.poll() is None


@pytest.fixture(scope="session")
def server():
    exe = os.path.join(ROOT, BUILD, "needle")
    cmd = [exe, "serve", "--port", "0", "--api-key", KEY, "--model", os.path.join(ROOT, "models/needle-default.cact"),
           "--tools", os.path.join(ROOT, "models/tools.json"), "--parallel", "2", "--queue", "8",
           "--max-body", str(MAX_BODY), "--max-messages", "64", "--timeout", str(TIMEOUT_S), "--threads", "1", "--cache", "8"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        raise AssertionError("needle serve did not start: %r %r" % (line, proc.stderr.read()))
    srv = Server(proc, int(m.group(1)))
    yield srv
    assert srv.alive(), "the server died during the tests"
    proc.terminate()
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, "needle serve exited %d: %s" % (proc.returncode, err)
    assert "stopping" in out


def tools_openai():
    with open(os.path.join(ROOT, "models/tools.json")) as f:
        return [{"type": "function", "function": t} for t in json.load(f)]

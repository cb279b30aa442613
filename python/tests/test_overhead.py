"""What the binding costs: import time, and per-call time outside the C call.

Numbers are printed in the run's summary.  The asserted bounds are the targets
(import < 100 ms is reported; the assert allows a loaded machine 5x), per-call
binding overhead < 1 ms (median)."""
import json
import statistics
import subprocess
import sys
import time

import needle
from needle import _native

from conftest import SUMMARY_LINES

IMPORT_PROBE = ("import time, sys; t = time.perf_counter(); import needle; t = time.perf_counter() - t; "
                "print(t, 'numpy' in sys.modules, 'pydantic' in sys.modules)")


def test_import_time_and_no_heavy_imports():
    times = []
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], stdout=subprocess.PIPE, check=True,
                             universal_newlines=True).stdout.split()
        times.append(float(out[0]))
        assert out[1:] == ["False", "False"]  # numpy and pydantic are never imported by `import needle`
    best, median = min(times), statistics.median(times)
    SUMMARY_LINES.append("import needle: %.1f ms median, %.1f ms best of 5 (fresh interpreters)"
                         % (median * 1e3, best * 1e3))
    assert best < 0.5


class Timed:
    """Wraps one foreign function and adds up the time spent inside it."""

    def __init__(self, fn):
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *args):
        t = time.perf_counter()
        try:
            return self.fn(*args)
        finally:
            self.seconds += time.perf_counter() - t


def overhead(call, names, n):
    lib = _native.lib()
    saved = {name: getattr(lib, name) for name in names}
    wrappers = {name: Timed(fn) for name, fn in saved.items()}
    per_call = []
    try:
        for name, w in wrappers.items():
            setattr(lib, name, w)
        for _ in range(n):
            before = sum(w.seconds for w in wrappers.values())
            t = time.perf_counter()
            call()
            total = time.perf_counter() - t
            per_call.append((total, total - (sum(w.seconds for w in wrappers.values()) - before)))
    finally:
        for name, fn in saved.items():
            setattr(lib, name, fn)
    return statistics.median(c for c, _ in per_call), statistics.median(o for _, o in per_call)


def test_binding_overhead_per_call():
    agent = needle.Needle(stateless=True)
    agent.complete("turn off the kitchen lights")  # warm up
    turn, turn_over = overhead(lambda: agent.complete("turn off the kitchen lights"),
                               ["needle_session_turn", "needle_session_reset"], 20)
    emb, emb_over = overhead(lambda: agent.embed("turn off the kitchen lights"), ["needle_model_embed"], 40)
    SUMMARY_LINES.append("complete(): %.2f ms per call, of which binding %.3f ms (median of 20)"
                         % (turn * 1e3, turn_over * 1e3))
    SUMMARY_LINES.append("embed():    %.2f ms per call, of which binding %.3f ms (median of 40)"
                         % (emb * 1e3, emb_over * 1e3))
    assert turn_over < 1e-3 and emb_over < 1e-3

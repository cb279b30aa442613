"""Many Needle objects, on different models, on several threads at once."""
import threading

import needle

QUERIES = ["turn off the kitchen lights", "set the thermostat to 19 degrees", "text Ana that dinner is ready",
           "set an alarm for 06:15 on weekdays", "what's the weather in Oslo", "dim the bedroom lights to 30"]


def answers(weights):
    # one compute thread per model: the parallelism under test is across sessions;
    # a short budget keeps the random-weight second model from writing 512 tokens
    agent = needle.Needle(weights=weights, stateless=True, auto_date=False, threads=1)
    return [agent.complete(q, max_new_tokens=48) for q in QUERIES]


def calls(envelopes):
    return [(e["success"], e["function_calls"], e["confidence"]) for e in envelopes]


def test_two_models_on_two_threads_equal_sequential(golden):
    models = [None, golden + "/tiny_w4.cact"]  # the bundled model and a second, different one
    sequential = [calls(answers(m)) for m in models]
    assert sequential[0] != sequential[1]  # two different models really answer differently
    for _ in range(2):
        got = [None, None]
        errors = []

        def work(i):
            try:
                got[i] = calls(answers(models[i]))
            except Exception as e:  # surfaced below, not lost in the thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert got == sequential


def test_many_sessions_on_one_model_in_parallel():
    expected = calls(answers(None))
    results = {}

    def work(i):
        results[i] = calls(answers(None))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i] == expected for i in range(6))


def test_embed_on_threads_matches_sequential(golden):
    agent = needle.Needle()
    expected = [agent.embed(q) for q in QUERIES]
    out = [None] * len(QUERIES)

    def work(i):
        out[i] = agent.embed(QUERIES[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(QUERIES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == expected

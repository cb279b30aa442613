"""needle.extract and Needle.embed."""
import math
from typing import Literal, Optional

import pytest

import needle

RESERVATION = {
    "type": "object", "title": "Reservation",
    "properties": {"restaurant": {"type": "string"}, "people": {"type": "integer", "minimum": 1, "maximum": 20},
                   "time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}},
    "required": ["restaurant", "people", "time"],
}


def test_extract_returns_schema_valid_arguments():
    args = needle.extract("Book a table for 4 people at Luigi's at 19:30", RESERVATION)
    # the grammar guarantees the shape; the bundled model's accuracy is reported by the acceptance suite
    assert args is None or set(args) == {"restaurant", "people", "time"}
    if args is not None:
        assert isinstance(args["restaurant"], str) and 1 <= args["people"] <= 20
        assert len(args["time"]) == 5 and args["time"][2] == ":"


def test_extract_takes_a_tool_dict_and_a_needle_method():
    tool = {"name": "set_alarm", "description": "Set an alarm",
            "parameters": {"type": "object", "properties": {"time": {"type": "string"}}, "required": ["time"]}}
    args = needle.extract("wake me up at 06:45", tool)
    assert args is None or list(args) == ["time"]
    agent = needle.Needle(system="date: 2026-05-01")
    assert agent.extract("wake me up at 06:45", tool) == needle.extract("wake me up at 06:45", tool,
                                                                        system="date: 2026-05-01")


def test_extract_pydantic():
    pydantic = pytest.importorskip("pydantic")

    class Contact(pydantic.BaseModel):
        """A contact card"""
        name: str
        phone: str
        kind: Literal["home", "work"] = "home"
        email: Optional[str] = None

    got = needle.extract("Save Maria Lopez, work phone 555-0199", Contact)
    assert got is None or isinstance(got, Contact)


@pytest.mark.parametrize("schema", [42, "text", {"name": "x"}, {"type": "string"}, [1, 2]])
def test_extract_bad_schema_raises(schema):
    with pytest.raises(needle.NeedleError):
        needle.extract("anything", schema)


def test_embed_is_normalised_deterministic_and_semantic():
    agent = needle.Needle()
    a = agent.embed("turn off the lights")
    assert isinstance(a, list) and len(a) == 128 and all(isinstance(x, float) for x in a)
    assert abs(math.fsum(x * x for x in a) - 1.0) < 1e-4
    assert agent.embed("turn off the lights") == a
    near = agent.embed("switch the lamp off")
    far = agent.embed("what is the weather in Rome tomorrow")
    dot = lambda u, v: math.fsum(x * y for x, y in zip(u, v))
    assert dot(a, near) > dot(a, far)
    # embedding needs no conversation: it leaves the session untouched
    assert agent.complete("turn off the kitchen lights")["function_calls"][0]["name"] == "set_lights"


def test_embed_numpy_and_batches():
    np = pytest.importorskip("numpy")
    agent = needle.Needle()
    texts = ["turn off the lights", "set an alarm", ""]
    m = agent.embed(texts, numpy=True)
    assert m.shape == (3, 128) and m.dtype == np.float32
    assert np.allclose(m[0], np.array(agent.embed(texts[0]), dtype=np.float32))
    assert agent.embed(texts) == [agent.embed(t) for t in texts]
    assert agent.embed([], numpy=True).shape == (0, 128)


def test_embed_on_a_second_model(golden):
    # tests/golden/tiny_w4.cact (random weights) carries both heads: its own embedding
    agent = needle.Needle(weights=golden + "/tiny_w4.cact")
    assert len(agent.embed("hello")) > 0

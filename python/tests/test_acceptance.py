"""An acceptance suite in the reference's environment style: tools + system +
cases by category (positive, missing, irrelevant, negation, invalid, parallel),
run against the bundled model.

The cases are this project's own, written by hand for this file; the model was
never trained or tuned on them.  What is asserted is the contract every answer
must keep (a well-formed envelope; every call names a declared tool and its
arguments satisfy the schema).  Accuracy per category is measured and printed
at the end of the run; only a floor well under the measured positive accuracy
is asserted, as a regression guard.  The bundled model is a small demo: it is
weak at refusing (missing / irrelevant / negation / invalid), and the numbers
say so."""
import json
import re
from typing import Annotated, Literal, Optional

import pytest

import needle

from conftest import SUMMARY_LINES

HHMM = "^([01][0-9]|2[0-3]):[0-5][0-9]$"


@needle.tool
def set_lights(room: str, on: bool, brightness: Annotated[Optional[int], needle.Field(ge=1, le=100)] = None):
    """Turn a room's lights on or off, or set their brightness

    Args:
        room: the room, as the user names it
        on: true to switch on, false to switch off
        brightness: percent, only when the user gives one
    """
    return {"ok": True}


@needle.tool
def set_thermostat(temperature: Annotated[float, needle.Field(ge=5, le=35)],
                   mode: Optional[Literal["heat", "cool", "auto", "off"]] = None):
    """Set the thermostat temperature in degrees Celsius, and optionally its mode"""
    return {"ok": True}


@needle.tool
def set_alarm(time: Annotated[str, needle.Field(pattern=HHMM)], label: Optional[str] = None):
    """Set an alarm

    Args:
        time: 24-hour time HH:MM
        label: a short label, only when the user gives one
    """
    return {"ok": True}


@needle.tool
def send_message(recipient: str, text: str):
    """Send a text message"""
    return {"ok": True}


TOOLS = [set_lights, set_thermostat, set_alarm, send_message]
SYSTEM = "locale: en-GB; location: Leeds"


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


CASES = [
    ("positive", "switch off the lights in the garage", [call("set_lights", room="garage", on=False)]),
    ("positive", "lights on in the study please", [call("set_lights", room="study", on=True)]),
    ("positive", "set the thermostat to 22 degrees", [call("set_thermostat", temperature=22)]),
    ("positive", "make an alarm for 05:45", [call("set_alarm", time="05:45")]),
    ("positive", "message Priya saying the parcel arrived",
     [call("send_message", recipient="Priya", text="the parcel arrived")]),
    ("positive", "put the landing lights at 40 percent", [call("set_lights", room="landing", on=True, brightness=40)]),
    ("positive", "cool the house down to 19 degrees", [call("set_thermostat", temperature=19, mode="cool")]),
    ("missing", "send a message", []),
    ("missing", "set an alarm", []),
    ("missing", "change the thermostat", []),
    ("missing", "text my brother", []),
    ("irrelevant", "who won the world cup in 1998", []),
    ("irrelevant", "order a pizza with mushrooms", []),
    ("irrelevant", "how many grams are in a pound", []),
    ("irrelevant", "book a taxi to the airport", []),
    ("negation", "don't switch off the hallway lights", []),
    ("negation", "please do not set an alarm", []),
    ("negation", "never message Tom again", []),
    ("invalid", "set the thermostat to 90 degrees", []),
    ("invalid", "set an alarm for 27:99", []),
    ("invalid", "lounge lights to 250 percent brightness", []),
    ("parallel", "turn off the bedroom lights and set an alarm for 06:30",
     [call("set_lights", room="bedroom", on=False), call("set_alarm", time="06:30")]),
    ("parallel", "text Omar that I'm on my way and set the thermostat to 19",
     [call("send_message", recipient="Omar", text="I'm on my way"), call("set_thermostat", temperature=19)]),
    ("parallel", "switch on the kitchen lights and the porch lights",
     [call("set_lights", room="kitchen", on=True), call("set_lights", room="porch", on=True)]),
]
CATEGORIES = ["positive", "missing", "irrelevant", "negation", "invalid", "parallel"]


def fold(value):
    """Case-insensitive strings, 19.0 == 19, for comparing calls."""
    if isinstance(value, str):
        return value.casefold()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: fold(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fold(v) for v in value]
    return value


def same_calls(got, want):
    key = lambda c: json.dumps(fold(c), sort_keys=True)
    return sorted(map(key, got)) == sorted(map(key, want))


def schema_errors(value, schema, path="$"):
    """The subset of JSON Schema these tools use, checked independently of the C grammar."""
    errors = []
    kind = schema.get("type")
    checks = {"string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list)}
    if kind and not checks[kind](value):
        return ["%s: %r is not %s" % (path, value, kind)]
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r not in enum" % (path, value))
    if "minimum" in schema and value < schema["minimum"]:
        errors.append("%s: %r < minimum" % (path, value))
    if "maximum" in schema and value > schema["maximum"]:
        errors.append("%s: %r > maximum" % (path, value))
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
    if kind == "object":
        props = schema.get("properties", {})
        errors += ["%s: missing %s" % (path, k) for k in schema.get("required", []) if k not in value]
        errors += ["%s: undeclared %s" % (path, k) for k in value if k not in props]
        for k, v in value.items():
            if k in props:
                errors += schema_errors(v, props[k], path + "." + k)
    return errors


@pytest.fixture(scope="module")
def outcomes():
    agent = needle.Needle(tools=TOOLS, system=SYSTEM, stateless=True)
    schemas = {t["name"]: t["parameters"] for t in agent.tools}
    rows = []
    for category, query, want in CASES:
        env = agent.complete(query)
        rows.append((category, query, want, env, schemas))
    return rows


def test_every_answer_keeps_the_contract(outcomes):
    for category, query, want, env, schemas in outcomes:
        assert {"type", "success", "function_calls", "confidence"} <= set(env), query
        assert env["success"] is True, (query, env)
        assert env["type"] == ("call" if env["function_calls"] else "respond"), (query, env)
        for c in env["function_calls"]:
            assert c["name"] in schemas, (query, c)
            assert schema_errors(c["arguments"], schemas[c["name"]]) == [], (query, c)
        if env["confidence"] is not None:
            assert 0 <= env["confidence"] <= 1


def test_report_accuracy_by_category(outcomes):
    per = {c: [0, 0] for c in CATEGORIES}
    misses = []
    for category, query, want, env, _ in outcomes:
        ok = same_calls(env["function_calls"], want)
        per[category][0] += ok
        per[category][1] += 1
        if not ok:
            misses.append("  miss [%s] %s -> %s" % (category, query, json.dumps(env["function_calls"])))
    total = sum(p[0] for p in per.values())
    SUMMARY_LINES.append("  ".join("%s %d/%d" % (c, per[c][0], per[c][1]) for c in CATEGORIES)
                            + "  | all %d/%d" % (total, len(outcomes)))
    SUMMARY_LINES.extend(misses)
    # a regression floor, well under what the bundled model measures (see the printed table)
    assert per["positive"][0] >= 3, per

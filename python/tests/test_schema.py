"""@needle.tool: the JSON Schema derived from every supported annotation."""
import enum
import json
import sys
from typing import Annotated, Any, Dict, List, Literal, Optional, Union

import pytest

import needle


def params(fn):
    return needle.tool(fn).needle_schema["parameters"]


def test_scalars_are_required_without_defaults():
    def f(a: str, b: int, c: float, d: bool):
        pass
    assert params(f) == {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "number"}, "d": {"type": "boolean"}},
        "required": ["a", "b", "c", "d"]}


def test_lists_and_dicts():
    def f(a: list[str], b: List[int], c: list, d: dict, e: dict[str, float], f: list[list[bool]]):
        pass
    p = params(f)["properties"]
    assert p["a"] == {"type": "array", "items": {"type": "string"}}
    assert p["b"] == {"type": "array", "items": {"type": "integer"}}
    assert p["c"] == {"type": "array"}
    assert p["d"] == {"type": "object"}
    assert p["e"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert p["f"] == {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}}


def test_optional_and_defaults_are_not_required():
    def f(a: Optional[int], b: str = "x", c: Union[float, None] = None, d: int = 3, e: bool = False, g: str = ""):
        pass
    s = params(f)
    assert "required" not in s
    assert s["properties"]["a"] == {"type": "integer"}
    assert s["properties"]["c"] == {"type": "number"}


@pytest.mark.skipif(sys.version_info < (3, 10), reason="X | None needs Python 3.10")
def test_pep604_union():
    ns = {}
    exec("def f(a: int | None = None, b: str | int = 1): pass", ns)
    p = params(ns["f"])["properties"]
    assert p["a"] == {"type": "integer"}
    assert p["b"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}


def test_literal_and_enum():
    class Mode(enum.Enum):
        HEAT = "heat"
        COOL = "cool"

    def f(unit: Literal["celsius", "fahrenheit"], level: Literal[1, 2, 3], mode: Mode,
          maybe: Optional[Literal["a", "b"]] = None):
        pass
    p = params(f)["properties"]
    assert p["unit"] == {"type": "string", "enum": ["celsius", "fahrenheit"]}
    assert p["level"] == {"type": "integer", "enum": [1, 2, 3]}
    assert p["mode"] == {"type": "string", "enum": ["heat", "cool"]}
    assert p["maybe"] == {"type": "string", "enum": ["a", "b"]}


def test_annotated_field_constraints():
    def f(n: Annotated[int, needle.Field(ge=1, le=10, description="how many")],
          s: Annotated[str, needle.Field(min_length=2, max_length=5, pattern="^[a-z]+$")],
          x: Annotated[float, needle.Field(gt=0, lt=1)] = 0.5,
          items: Annotated[list[str], needle.Field(min_items=1, max_items=3)] = None,
          o: Annotated[Optional[int], needle.Field(ge=0)] = None,
          day: Annotated[str, needle.Field(format="date")] = ""):
        pass
    s = params(f)
    p = s["properties"]
    assert p["n"] == {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many"}
    assert p["s"] == {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"}
    assert p["x"] == {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}
    assert p["items"] == {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}
    assert p["o"] == {"type": "integer", "minimum": 0}
    assert p["day"] == {"type": "string", "format": "date"}
    assert s["required"] == ["n", "s"]


def test_field_as_default():
    def f(a: int = needle.Field(3, ge=0), b: str = needle.Field(description="why")):
        pass
    s = params(f)
    assert s["properties"] == {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string", "description": "why"}}
    assert s["required"] == ["b"]  # a Field without a default keeps the argument required


def test_docstring_first_paragraph_and_google_args():
    def f(city: str, days: int = 1, unit: str = "c", **kwargs):
        """Get the weather forecast
        for a city.

        Only the first paragraph is the description.

        Args:
            city: The city name,
                possibly with a country.
            days (int): How many days.
            unit: Temperature unit. The Field description wins over this.

        Returns:
            A forecast.
        """
    f.__annotations__["unit"] = Annotated[str, needle.Field(description="c or f")]
    s = needle.tool(f).needle_schema
    assert s["name"] == "f"
    assert s["description"] == "Get the weather forecast for a city."
    p = s["parameters"]["properties"]
    assert p["city"]["description"] == "The city name, possibly with a country."
    assert p["days"]["description"] == "How many days."
    assert p["unit"]["description"] == "c or f"
    assert "kwargs" not in p
    assert list(s) == ["name", "description", "parameters"]


def test_no_annotation_is_a_string_and_no_docstring_no_description():
    def f(a, b=2):
        pass
    s = needle.tool(f).needle_schema
    assert "description" not in s
    assert s["parameters"] == {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                               "required": ["a"]}


def test_decorator_keeps_the_function_and_takes_options():
    @needle.tool(name="lights", description="Switch lights")
    def set_lights(room: str, on: bool = True):
        return (room, on)
    assert set_lights("hall") == ("hall", True)
    assert set_lights.needle_schema["name"] == "lights"
    assert set_lights.needle_schema["description"] == "Switch lights"


def test_schema_is_json_and_compiles_in_the_engine():
    @needle.tool
    def book(city: Literal["paris", "rome"], nights: Annotated[int, needle.Field(ge=1, le=14)],
             guests: list[str], breakfast: Optional[bool] = None):
        """Book a hotel."""
    json.dumps(book.needle_schema)
    with needle.Needle(tools=[book]) as agent:  # the C grammar compiler accepts it
        assert agent.tools == [book.needle_schema]


@pytest.mark.parametrize("annotation", [set, tuple, complex, bytes, dict[int, str], object])
def test_unsupported_annotations_raise(annotation):
    def f(x):
        pass
    f.__annotations__["x"] = annotation
    with pytest.raises(needle.NeedleError) as e:
        needle.tool(f)
    assert e.value.code == -4 and "argument x" in str(e.value)


def test_literal_of_unsupported_values_raises():
    def f(x: Literal[b"a"]):
        pass
    with pytest.raises(needle.NeedleError):
        needle.tool(f)


def test_any_is_unconstrained():
    def f(x: Any, y: Dict[str, Any]):
        pass
    p = params(f)["properties"]
    assert p["x"] == {}
    assert p["y"] == {"type": "object", "additionalProperties": {}}


def test_pydantic_models():
    pydantic = pytest.importorskip("pydantic")

    class Address(pydantic.BaseModel):
        """A postal address."""
        street: str
        city: str
        zip_code: Optional[str] = None

    class Person(pydantic.BaseModel):
        name: str
        age: int = pydantic.Field(ge=0, le=150)

    s = needle.Needle(tools=[Address], auto_date=False).tools[0]
    assert s["name"] == "Address" and s["description"] == "A postal address."
    assert s["parameters"]["required"] == ["street", "city"]

    def register(person: Person):
        pass
    p = params(register)["properties"]["person"]
    assert p["properties"]["age"]["maximum"] == 150

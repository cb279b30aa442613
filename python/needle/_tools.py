"""@needle.tool and needle.Field: a tool's JSON Schema from a Python signature.

A decorated function stays an ordinary function; its schema
({"name", "description", "parameters"}) is attached as `fn.needle_schema`.
Annotations map to JSON Schema as follows:

    str, int, float, bool          "string", "integer", "number", "boolean"
    list / list[X] / List[X]       "array" (with "items" from X)
    dict / dict[str, X]            "object" (with "additionalProperties" from X)
    Literal["a", "b"]              "enum" (with the values' JSON type)
    an enum.Enum subclass          "enum" of its values
    Optional[X], X | None          X, and the argument is not required
    Union[X, Y]                    "anyOf"
    Annotated[X, Field(...)]       X with the Field's constraints and description
    a pydantic model               its JSON Schema (nested object)
    no annotation                  "string"

A parameter with a default (or a Field with a default) is not required.  The
description is the docstring's first paragraph; a Google-style `Args:` section
gives each argument's description.  Anything else raises NeedleError.
"""
import enum
import inspect
import re
import types
import typing

from ._errors import NeedleError

_EINVAL = -4
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_UNIONS = (typing.Union,) + ((types.UnionType,) if hasattr(types, "UnionType") else ())
_MISSING = object()


class Field:
    """Constraints and a description for one argument, used as
    `x: Annotated[int, Field(ge=1, le=10)]` or as a default `x: int = Field(5, ge=1)`.
    Each keyword becomes the JSON Schema keyword of the same meaning; the grammar
    then only lets the model write values that satisfy it."""

    _KEYWORDS = (("description", "description"), ("ge", "minimum"), ("le", "maximum"),
                 ("gt", "exclusiveMinimum"), ("lt", "exclusiveMaximum"), ("multiple_of", "multipleOf"),
                 ("min_length", "minLength"), ("max_length", "maxLength"), ("pattern", "pattern"),
                 ("format", "format"), ("min_items", "minItems"), ("max_items", "maxItems"),
                 ("enum", "enum"), ("examples", "examples"))

    def __init__(self, default=_MISSING, *, description=None, ge=None, le=None, gt=None, lt=None,
                 multiple_of=None, min_length=None, max_length=None, pattern=None, format=None,
                 min_items=None, max_items=None, enum=None, examples=None):
        self.default = default
        self.description, self.ge, self.le, self.gt, self.lt = description, ge, le, gt, lt
        self.multiple_of, self.min_length, self.max_length = multiple_of, min_length, max_length
        self.pattern, self.format, self.min_items, self.max_items = pattern, format, min_items, max_items
        self.enum, self.examples = enum, examples

    @property
    def has_default(self):
        return self.default is not _MISSING

    def apply(self, schema):
        for attr, keyword in self._KEYWORDS:
            value = getattr(self, attr)
            if value is not None:
                schema[keyword] = list(value) if keyword in ("enum", "examples") else value
        return schema

    def __repr__(self):
        shown = ["%s=%r" % (a, getattr(self, a)) for a, _ in self._KEYWORDS if getattr(self, a) is not None]
        if self.has_default:
            shown.insert(0, repr(self.default))
        return "Field(%s)" % ", ".join(shown)


def is_pydantic_model(obj):
    return isinstance(obj, type) and any(
        base.__name__ == "BaseModel" and base.__module__.startswith("pydantic") for base in obj.__mro__)


def pydantic_tool_schema(model):
    """{"name","description","parameters"} for a pydantic model (v2 or v1)."""
    raw = model.model_json_schema() if hasattr(model, "model_json_schema") else model.schema()
    params = {"type": "object", "properties": raw.get("properties", {})}
    for key in ("required", "$defs", "definitions"):
        if key in raw:
            params[key] = raw[key]
    out = {"name": model.__name__}
    description = _first_paragraph(model.__doc__)
    if description:
        out["description"] = description
    out["parameters"] = params
    return out


def _literal_schema(values, where):
    types_seen = set()
    for v in values:
        if isinstance(v, bool):
            types_seen.add("boolean")
        elif isinstance(v, int):
            types_seen.add("integer")
        elif isinstance(v, float):
            types_seen.add("number")
        elif isinstance(v, str):
            types_seen.add("string")
        else:
            raise NeedleError(_EINVAL, "%s: Literal/Enum value %r is not a JSON string, number or boolean"
                              % (where, v))
    schema = {"type": types_seen.pop()} if len(types_seen) == 1 else {}
    schema["enum"] = list(values)
    return schema


def _split_optional(annotation):
    """(inner annotation, True) for Optional[X] / X | None, else (annotation, False)."""
    if typing.get_origin(annotation) in _UNIONS:
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        if len(rest) < len(args):
            if len(rest) == 1:
                return rest[0], True
            return typing.Union[tuple(rest)], True
    return annotation, False


def annotation_schema(annotation, where):
    """The JSON Schema of one annotation (no Field applied); raises NeedleError."""
    if annotation is inspect.Parameter.empty or annotation is typing.Any:
        return {"type": "string"} if annotation is inspect.Parameter.empty else {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        schema = annotation_schema(args[0], where)
        for meta in args[1:]:
            if isinstance(meta, Field):
                meta.apply(schema)
        return schema
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if annotation in (list, typing.List):
        return {"type": "array"}
    if annotation in (dict, typing.Dict):
        return {"type": "object"}
    if origin in (list, typing.List):
        return {"type": "array", "items": annotation_schema(args[0], where + "[]")} if args else {"type": "array"}
    if origin in (dict, typing.Dict):
        if args and args[0] is not str:
            raise NeedleError(_EINVAL, "%s: dict keys must be str (JSON object keys), not %r" % (where, args[0]))
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = annotation_schema(args[1], where + "{}")
        return schema
    if origin is typing.Literal:
        return _literal_schema(args, where)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _literal_schema([member.value for member in annotation], where)
    if origin in _UNIONS:
        inner, optional = _split_optional(annotation)
        if optional:
            return annotation_schema(inner, where)
        return {"anyOf": [annotation_schema(a, where) for a in args]}
    if is_pydantic_model(annotation):
        schema = pydantic_tool_schema(annotation)["parameters"]
        return schema
    raise NeedleError(_EINVAL, "%s: the annotation %r has no JSON Schema (use str, int, float, bool, list[...], "
                      "dict[str, ...], Literal, Enum, Optional, Union, Annotated or a pydantic model)"
                      % (where, annotation))


def _field_of(annotation, default):
    if isinstance(default, Field):
        return default
    annotation, _ = _split_optional(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in reversed(typing.get_args(annotation)[1:]):
            if isinstance(meta, Field):
                return meta
    return None


def _is_optional(annotation):
    if typing.get_origin(annotation) is typing.Annotated:
        return _is_optional(typing.get_args(annotation)[0])
    return _split_optional(annotation)[1]


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
                      r"Attributes|See Also|Todo|Warnings?)\s*:\s*$", re.IGNORECASE)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _first_paragraph(doc):
    """The docstring's first paragraph as one line (up to a blank line or a section)."""
    if not doc:
        return ""
    para = []
    for line in inspect.cleandoc(doc).splitlines():
        if _SECTION.match(line):
            break
        if not line.strip():
            if para:
                break
            continue
        para.append(line.strip())
    return " ".join(para)


def _arg_docs(doc):
    """{name: description} from a Google-style Args: section."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    out = {}
    in_args, name, name_indent = False, None, None
    for line in lines:
        head = _SECTION.match(line)
        if head:
            in_args = head.group(1).lower() in ("args", "arguments", "parameters", "params")
            name = None
            continue
        if not in_args or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        m = _ARG_LINE.match(line)
        if m and (name is None or indent <= name_indent):
            name, name_indent = m.group(1), indent
            out[name] = m.group(2).strip()
        elif name is not None and indent > name_indent:
            out[name] = (out[name] + " " + line.strip()).strip()
        elif indent == 0:
            in_args = False
    return out


def function_schema(fn):
    """{"name","description","parameters"} from a function's signature and docstring."""
    name = getattr(fn, "__name__", None)
    if not name or not callable(fn):
        raise NeedleError(_EINVAL, "tool: %r is not a named function" % (fn,))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise NeedleError(_EINVAL, "tool %s: no signature to read (%s)" % (name, e)) from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:  # a forward reference that does not resolve
        raise NeedleError(_EINVAL, "tool %s: cannot resolve its annotations (%s)" % (name, e)) from None
    docs = _arg_docs(fn.__doc__)
    properties, required = {}, []
    for pname, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if pname in ("self", "cls") and param.annotation is param.empty:
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise NeedleError(_EINVAL, "tool %s: argument %s is positional-only; tool arguments are passed by "
                              "name" % (name, pname))
        annotation = hints.get(pname, param.annotation)
        where = "tool %s, argument %s" % (name, pname)
        schema = annotation_schema(annotation, where)
        field = _field_of(annotation, param.default)
        if field is not None:
            field.apply(schema)
        if pname in docs and "description" not in schema:
            schema["description"] = docs[pname]
        properties[pname] = schema
        has_default = param.default is not param.empty and not isinstance(param.default, Field)
        if (field is not None and field.has_default) or has_default or _is_optional(annotation):
            continue
        required.append(pname)
    parameters = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    out = {"name": name}
    description = _first_paragraph(fn.__doc__)
    if description:
        out["description"] = description
    out["parameters"] = parameters
    return out


def tool(fn=None, *, name=None, description=None):
    """Mark a function as a Needle tool: `@needle.tool` or `@needle.tool(name=..., description=...)`.
    The function is returned unchanged, with its schema in `fn.needle_schema`."""
    def attach(target):
        schema = function_schema(target)
        if name is not None:
            schema["name"] = name
        if description is not None:
            schema = {"name": schema["name"], "description": description, "parameters": schema["parameters"]}
        target.needle_schema = schema
        return target
    return attach(fn) if fn is not None else attach


def schema_of(entry):
    """(schema dict, the callable to run or None) for one entry of Needle(tools=[...])."""
    if isinstance(entry, dict):
        if not isinstance(entry.get("name"), str):
            raise NeedleError(_EINVAL, "tools: a schema dict needs a string \"name\" (got %r)" % (entry,))
        return entry, None
    if is_pydantic_model(entry):
        return pydantic_tool_schema(entry), entry
    if callable(entry):
        schema = getattr(entry, "needle_schema", None) or function_schema(entry)
        return schema, entry
    raise NeedleError(_EINVAL, "tools: %r is neither a function, a pydantic model nor a schema dict" % (entry,))

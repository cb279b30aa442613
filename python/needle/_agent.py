"""needle.Needle: one conversation on a model, over libneedle's sessions.

Models are opened once per (file, options) and shared read-only by every Needle
on them (libneedle's models are immutable and thread-safe); each Needle owns one
needle_session.  A per-object lock serialises calls on the same Needle (one
conversation cannot take two turns at once); different Needles, on the same or
different models, run in parallel on separate threads because ctypes releases
the GIL during the C call.
"""
import ctypes
import datetime
import json
import os
import re
import threading
import weakref

from . import _native
from ._errors import NeedleError
from ._tools import is_pydantic_model, pydantic_tool_schema, schema_of

_EINVAL, _ESTATE = -4, -11
# Installed: the models ship inside the package.  Run from a source checkout
# (python/needle with NEEDLE_LIBRARY set), the repository's models/ is used.
MODELS_DIR = os.path.join(_native.HERE, "models")
if not os.path.isdir(MODELS_DIR):
    MODELS_DIR = os.path.join(_native.HERE, "..", "..", "models")


def default_weights():
    """$NEEDLE_MODEL, else the bundled models/needle-default.cact."""
    return os.environ.get("NEEDLE_MODEL") or os.path.join(MODELS_DIR, "needle-default.cact")


def default_tools_path():
    return os.path.join(MODELS_DIR, "tools.json")


# ---------------------------------------------------------------- auto_date

_DATE_KEY = re.compile(r"(?<![A-Za-z_])date\s*:")
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def with_date(system, today=None):
    """The system text with a leading `date: YYYY-MM-DD (Weekday)` fact, unless it
    already states a date (a `date:` key or an ISO date) or is a JSON object.
    The form is the one the bundled model's training data uses."""
    system = system or ""
    if _DATE_KEY.search(system) or _ISO_DATE.search(system) or system.lstrip().startswith("{"):
        return system
    today = today or datetime.date.today()
    fact = "date: %s (%s)" % (today.isoformat(), _WEEKDAYS[today.weekday()])
    return fact + "; " + system.strip() if system.strip() else fact


# ---------------------------------------------------------------- shared models

class _Model:
    """One open needle_model; closed when the last Needle using it is gone."""

    def __init__(self, path, tokenizer, threads, backend, kv_window):
        lib = _native.lib()
        err = _native.ErrorRecord()
        opts = _native.ModelOptions(int(threads), _native.encode(backend, "backend"), int(kv_window))
        handle = ctypes.c_void_p()
        _native.check(lib.needle_model_open(_native.encode(path, "weights"), _native.encode(tokenizer, "tokenizer"),
                                            ctypes.byref(opts), ctypes.byref(handle), ctypes.byref(err)), err)
        self.handle = handle.value
        self.path = path
        self.embed_dim = lib.needle_model_embed_dim(self.handle)
        why = ctypes.c_char_p()
        self.backend = (lib.needle_model_backend(self.handle, ctypes.byref(why)) or b"").decode()
        self._finalizer = weakref.finalize(self, lib.needle_model_close, self.handle)


_models = weakref.WeakValueDictionary()
_models_lock = threading.Lock()


def _open_model(weights, tokenizer, threads, backend, kv_window):
    path = os.fspath(weights) if weights is not None else default_weights()
    if not isinstance(path, str):
        path = os.fsdecode(path)
    if not os.path.isfile(path):
        raise NeedleError(-1, "%s: no such model file" % path)
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns,
           os.path.realpath(tokenizer) if tokenizer else None, threads, backend, kv_window)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = _Model(path, tokenizer, threads, backend, kv_window)
            _models[key] = model
        return model


def _close_session(lib, handle, model):
    # `model` is held here so that the model outlives the session, whatever
    # order the garbage collector finalises them in.
    lib.needle_session_close(handle)
    del model


def _jsonable(value):
    """What json.dumps cannot write: pydantic models, dataclasses, sets, else str()."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "dict") and is_pydantic_model(type(value)):
        return value.dict()
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _tools_json(tools, functions):
    if tools is None:
        with open(default_tools_path(), encoding="utf-8") as f:
            return f.read()
    if isinstance(tools, (str, bytes)):
        return tools.decode("utf-8") if isinstance(tools, bytes) else tools
    if isinstance(tools, dict) or callable(tools):
        tools = [tools]
    schemas = []
    for entry in tools:
        schema, fn = schema_of(entry)
        if fn is not None:
            functions[schema["name"]] = fn
        schemas.append(schema)
    try:
        return json.dumps(schemas, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise NeedleError(_EINVAL, "tools: a schema is not JSON-serialisable (%s)" % e) from None


class Needle:
    """A tool-calling agent: one conversation with a Needle model.

    tools: functions decorated with @needle.tool (or plain functions), pydantic
        models, schema dicts {"name","description","parameters"}, or a JSON string;
        None: the bundled demo tools (models/tools.json); [] for none.
    system: system facts, "key: value; key: value".
    weights: a .cact (or a .safetensors checkpoint with tokenizer=...); None: the
        bundled default model ($NEEDLE_MODEL overrides).
    tool_index_path: a file caching the tools' embeddings (retrieval).
    auto_date: put today's `date:` fact into the system unless it has one.
    stateless: forget the conversation before every complete()/run().
    strict: also withhold calls with argument values the request does not say (every session withholds
        a negated request's calls, values outside the schema and required values filled with a
        placeholder); withheld calls are reported under
        "suppressed_calls" and "function_calls" is empty.
    copy_values: grounded decoding - free-text argument values may only be whole-word copies of what
        was said or the system facts (True), or any text (False); None: the library's default (on).
    split: a first request answered with one call or none that can be cut in two ("... and then ...")
        is answered one part at a time, and the parts' calls are taken when both call something
        (True, the default); False: never ("validation"."split" names the parts).
    ask_again: a first request the model answers with no call is asked again ("please " and the
        request), and that answer taken when it calls something grounded with no sign of a request
        to refuse (True, the default; "validation"."asked_again" says so); still with no call, a
        request in a messaging frame ("text mom that I'll be late") gets the call the frame spells
        out, and one where the model gave a call at least 0.1 of its probability gets that call when
        the request names the tool and says its values ("validation"."leaned"); one answered with a
        call to a tool while it names another tool's choice ("temperature in Reno in fahrenheit") is
        asked again with those tools alone; False: none of these.
    """

    def __init__(self, tools=None, system=None, weights=None, tool_index_path=None, auto_date=True,
                 stateless=False, *, tokenizer=None, threads=0, backend=None, kv_window=0, temperature=0.0,
                 top_p=0.0, seed=0, max_reasoning_tokens=0, strict=False,
                 copy_values=None, split=True, ask_again=True):
        self._lock = threading.Lock()
        self._handle = None
        if system is not None and not isinstance(system, str):
            raise NeedleError(_EINVAL, "system must be a string, not %s" % type(system).__name__)
        self._functions = {}
        self.tools_json = _tools_json(tools, self._functions)
        try:
            self.tools = json.loads(self.tools_json)
        except ValueError as e:
            raise NeedleError(-5, "tools: not valid JSON (%s)" % e) from None
        self.system = with_date(system) if auto_date else (system or "")
        self.stateless = bool(stateless)
        for name, value in (("threads", threads), ("kv_window", kv_window), ("seed", seed),
                            ("max_reasoning_tokens", max_reasoning_tokens)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise NeedleError(_EINVAL, "%s must be an integer >= 0 (got %r)" % (name, value))
        self._model = _open_model(weights, tokenizer, threads, backend, kv_window)
        self.weights = self._model.path
        lib = _native.lib()
        err = _native.ErrorRecord()
        opts = _native.SessionOptions(
            _native.encode(self.system, "system"), _native.encode(self.tools_json, "tools"),
            _native.encode(tool_index_path, "tool_index_path"), 0, int(max_reasoning_tokens), float(temperature),
            float(top_p), int(seed), 1 if strict else 0, 0 if copy_values is None else 1 if copy_values else -1,
            1 if split else -1, 1 if ask_again else -1)
        handle = ctypes.c_void_p()
        _native.check(lib.needle_session_open(self._model.handle, ctypes.byref(opts), ctypes.byref(handle),
                                              ctypes.byref(err)), err)
        self._handle = handle.value
        self._finalizer = weakref.finalize(self, _close_session, lib, self._handle, self._model)

    # ------------------------------------------------------------ turns

    def _turn(self, is_tool_result, text, max_new_tokens):
        what = "tool result" if is_tool_result else "text"
        raw = _native.encode(text, what)
        if raw is None:
            raise NeedleError(_EINVAL, "%s must be a string, not None" % what)
        if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
            raise NeedleError(_EINVAL, "max_new_tokens must be a positive integer (got %r)" % (max_new_tokens,))
        lib = _native.lib()
        err = _native.ErrorRecord()
        out = ctypes.c_void_p()
        with self._lock:
            if self._handle is None:
                raise NeedleError(_ESTATE, "this Needle is closed")
            rc = lib.needle_session_turn(self._handle, int(is_tool_result), raw, max_new_tokens, ctypes.byref(out),
                                         ctypes.byref(err))
        if rc < 0:
            if out.value:
                lib.needle_free(out)
            _native.check(rc, err)
        if not out.value:
            raise NeedleError(_ESTATE, "libneedle returned no envelope (rc %d)" % rc)
        try:
            envelope = ctypes.string_at(out.value).decode("utf-8")
        finally:
            lib.needle_free(out)
        try:
            return json.loads(envelope)
        except ValueError as e:
            raise NeedleError(-5, "libneedle returned an envelope that is not JSON (%s): %.200s" % (e, envelope)) \
                from None

    def complete(self, text, max_new_tokens=512):
        """One turn: the envelope as a dict {"type","success","error","error_code",
        "function_calls","reasoning","confidence",...}."""
        if self.stateless:
            self.reset()
        return self._turn(0, text, max_new_tokens)

    def tool_result(self, result, max_new_tokens=512):
        """Send a tool's result (any JSON-serialisable value) back; the next envelope."""
        text = result if isinstance(result, str) else json.dumps(result, default=_jsonable)
        return self._turn(1, text, max_new_tokens)

    def run(self, query, max_steps=8, max_new_tokens=512):
        """Answer `query`, executing the Python functions the calls name and
        feeding their results back, for at most max_steps rounds; returns the last
        envelope with "results" (every executed call's result, in order).  A call
        to a tool without a function, or one that raises, gives {"error": ...}.
        A call identical to one already executed in this run is not executed
        again: the loop stops and the envelope lists it under "repeated_calls"."""
        if not isinstance(max_steps, int) or max_steps < 0:
            raise NeedleError(_EINVAL, "max_steps must be an integer >= 0 (got %r)" % (max_steps,))
        envelope = self.complete(query, max_new_tokens)
        executed, seen = [], set()
        for _ in range(max_steps):
            calls = envelope.get("function_calls") or []
            if envelope.get("type") != "call" or not envelope.get("success") or not calls:
                break
            # A call identical to one this run already executed is never run
            # twice: the loop ends instead.  (A model that has not learned to
            # stop after a tool result repeats its call; the bundled one does.)
            keys = [json.dumps(call, sort_keys=True) for call in calls]
            if any(key in seen for key in keys):
                envelope["repeated_calls"] = [c for c, k in zip(calls, keys) if k in seen]
                break
            seen.update(keys)
            results = [self._execute(call) for call in calls]
            executed.extend(results)
            envelope = self.tool_result(results, max_new_tokens)
        envelope["results"] = executed
        return envelope

    def _execute(self, call):
        name = call.get("name")
        fn = self._functions.get(name)
        if fn is None:
            return {"error": "no function for tool %s" % name}
        try:
            return fn(**(call.get("arguments") or {}))
        except Exception as e:  # the tool's failure goes back to the model, not up to the caller
            return {"error": "%s: %s" % (type(e).__name__, e)}

    def reset(self):
        """Forget the conversation (tools and system kept)."""
        with self._lock:
            if self._handle is None:
                raise NeedleError(_ESTATE, "this Needle is closed")
            _native.lib().needle_session_reset(self._handle)

    def set_tools(self, tools):
        """Replace the tools; the conversation restarts."""
        functions = {}
        tools_json = _tools_json(tools, functions)
        err = _native.ErrorRecord()
        with self._lock:
            if self._handle is None:
                raise NeedleError(_ESTATE, "this Needle is closed")
            _native.check(_native.lib().needle_session_set_tools(self._handle, _native.encode(tools_json, "tools"),
                                                                 ctypes.byref(err)), err)
        self.tools_json, self.tools, self._functions = tools_json, json.loads(tools_json), functions

    # ------------------------------------------------------------ embedding

    def embed(self, text, numpy=False):
        """The model's L2-normalised text embedding: a list of floats (a float32
        numpy array with numpy=True); a list of texts gives one per text."""
        if isinstance(text, (list, tuple)):
            vectors = [self.embed(t, numpy=numpy) for t in text]
            if numpy:
                import numpy as np
                return np.stack(vectors) if vectors else np.zeros((0, self._model.embed_dim), np.float32)
            return vectors
        raw = _native.encode(text, "text")
        if raw is None:
            raise NeedleError(_EINVAL, "text must be a string, not None")
        dim = self._model.embed_dim
        if dim <= 0:
            raise NeedleError(-9, "%s: this model has no embedding head" % self.weights)
        if numpy:
            import numpy as np
            out = np.empty(dim, dtype=np.float32)
            buf = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        else:
            out = buf = (ctypes.c_float * dim)()
        err = _native.ErrorRecord()
        with self._lock:
            if self._handle is None:
                raise NeedleError(_ESTATE, "this Needle is closed")
            _native.check(_native.lib().needle_model_embed(self._model.handle, raw, buf, dim, ctypes.byref(err)), err)
        return out if numpy else list(out)

    def extract(self, text, schema, max_new_tokens=512):
        """needle.extract on this Needle's model and system."""
        return extract(text, schema, system=self.system, max_new_tokens=max_new_tokens, weights=self.weights,
                       auto_date=False)

    # ------------------------------------------------------------ lifetime

    @property
    def backend(self):
        return self._model.backend

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Close the session now (idempotent); the model closes with its last user."""
        with self._lock:
            if self._handle is not None:
                self._handle = None
                self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._handle is None else "%d tools" % len(self.tools)
        return "<needle.Needle %s, %s>" % (os.path.basename(self.weights), state)


def _extraction_tool(schema):
    if is_pydantic_model(schema):
        return pydantic_tool_schema(schema)
    if isinstance(schema, dict):
        if "parameters" in schema:
            return schema
        if schema.get("type") == "object" or "properties" in schema:
            name = re.sub(r"\W+", "_", str(schema.get("title") or "extract")).strip("_").lower() or "extract"
            out = {"name": name}
            if schema.get("description"):
                out["description"] = schema["description"]
            out["parameters"] = schema
            return out
    raise NeedleError(_EINVAL, "extract: schema must be a pydantic model, a tool {\"name\",\"parameters\"} or an "
                      "object JSON Schema (got %r)" % (schema,))


def extract(text, schema, system=None, max_new_tokens=512, weights=None, auto_date=True):
    """Structured extraction: `schema` (a pydantic model, an object JSON Schema or
    a tool dict) is the only tool; returns the call's arguments (a model instance
    for a pydantic schema), or None when the model made no call."""
    tool = _extraction_tool(schema)
    with Needle(tools=[tool], system=system, weights=weights, auto_date=auto_date) as agent:
        envelope = agent.complete(text, max_new_tokens)
    calls = envelope.get("function_calls") or []
    if not calls:
        return None
    arguments = calls[0].get("arguments") or {}
    return schema(**arguments) if is_pydantic_model(schema) else arguments

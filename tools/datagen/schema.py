"""schema.py - read a tools file and classify each parameter into a value kind.

A kind tells the value pools what to sample and the phrasing how to say it.
Kinds are chosen from the schema (type, enum, format, pattern, minimum,
maximum) first and from the words of the parameter's name and description
second, so any tool set works; nothing here knows a particular tool.
"""
import json
import re

# Name/description words -> string kinds, checked in order (first hit wins).
STRING_KIND_WORDS = [
    ("phone", r"phone|mobile|cell|tel(ephone)?\b|number_to_call"),
    ("email", r"e-?mail"),
    ("url", r"\burl\b|link|website|uri\b"),
    # codes a system issued: order and account ids, tracking and serial numbers, SKUs, references
    ("identifier", r"\bid\b|_id$|\bids?$|tracking|serial|\bsku\b|reference|\bref\b|invoice.?(number|no)|"
                   r"order.?(number|no)|confirmation|booking.?(code|number)|account.?(number|no)|"
                   r"(?<!postal )(?<!zip )(?<!country )(?<!language )(?<!currency )(?<!area )\bcode$"),
    ("room", r"\broom|zone\b|area\b"),
    ("language", r"language|\blang\b|locale"),
    ("city", r"\bcity\b|\btown\b"),
    ("message", r"message|\btext\b|body|content|note|comment|reply|caption|memo|remark|notes"),
    ("artist", r"artist|singer|band|composer|author|performer"),
    ("media", r"song|track|album|playlist|podcast|episode|show|movie|film|station|audiobook|book|video"),
    ("person", r"recipient|contact|person|attendee|assignee|owner|friend|sender|\bwho\b|full.?name|"
               r"first.?name|last.?name|customer|patient|guest|\bname\b|^to$|^from$|participant"),
    ("address", r"address|street"),
    ("place", r"location|city|place|destination|origin|venue|where|town|country|region|airport"),
    ("business", r"company|business|store|shop|restaurant|merchant|vendor|employer|organi[sz]ation"),
    ("product", r"product|item|sku|article|goods|ingredient|grocery|food|meal|dish"),
    ("query", r"query|search|keyword|term|topic|question"),
    ("title", r"title|subject|label|event|task|summary|heading|reason|purpose"),
]
# Number kinds by words (checked in order).
NUMBER_KIND_WORDS = [
    ("measure", r"\bml\b|millilit|\bkg\b|\bkm\b|\bbpm\b|beats|grams|litres|liters|meters|metres|miles|\bmg\b|"
                r"ounces|\boz\b|kcal|calories|\bsteps\b|\blbs?\b|pounds|\bcm\b"),
    ("temperature", r"temp|degree|thermostat"),
    ("percent", r"percent|%|brightness|volume|level|opacity|humidity|battery"),
    ("duration", r"duration|minutes|seconds|hours|timer|\bfor how long|length|interval|secs|mins"),
    ("money", r"amount|price|cost|total|budget|fee|sum|dollars|euros"),
    ("count", r"count|number of|quantity|servings|people|guests|reps|steps|times|how many|size|qty"),
]
MEDIA_TOOL = r"\bplay|music|song|playlist|podcast|track|album|radio|stream"
TIME_PATTERN_PROBES = ("07:30", "7:30", "07:30:00")


def humanize(name):
    """"targetTemp_c" -> "target temp c"."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return re.sub(r"[_\-.]+", " ", s).strip().lower()


class ToolError(Exception):
    pass


def load_tools(path):
    """The tools of a tools file: a JSON array of {name, description, parameters},
    an object with "tools", or OpenAI's {"type":"function","function":{...}} form.
    Returns (tools as declared for the rows, normalised tools for sampling)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ToolError("%s: cannot read (%s)" % (path, e.strerror))
    except json.JSONDecodeError as e:
        raise ToolError("%s:%d:%d: not JSON (%s)" % (path, e.lineno, e.colno, e.msg))
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise ToolError("%s: expected a non-empty JSON array of tools" % path)
    declared, tools = [], []
    for i, t in enumerate(data):
        if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict):
            t = t["function"]
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            raise ToolError("%s: tool %d has no \"name\" string" % (path, i + 1))
        params = t.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or not isinstance(params.get("properties", {}), dict):
            raise ToolError("%s: tool %s: \"parameters\" must be an object schema" % (path, t["name"]))
        declared.append(t)
        tools.append(Tool(t))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ToolError("%s: duplicate tool names" % path)
    return declared, tools


def resolve_ref(schema, root, depth=0):
    """A local "$ref" ("#/$defs/x", "#/definitions/x") replaced by what it points to (sibling
    keywords kept); anything else as it is."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/") or depth > 8:
        return schema
    node = root
    for part in ref[2:].split("/"):
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return schema
    merged = dict(resolve_ref(node, root, depth + 1), **{k: v for k, v in schema.items() if k != "$ref"})
    return merged


class Param:
    def __init__(self, name, schema, required, tool):
        schema = resolve_ref(schema, tool.root)
        alts = schema.get("anyOf") or schema.get("oneOf")
        if "type" not in schema and "enum" not in schema and isinstance(alts, list):
            # {"anyOf": [{"type": "string", ...}, {"type": "null"}]}: sample the first real alternative
            alt = next((a for a in alts if isinstance(a, dict) and a.get("type") != "null"), {})
            alt = resolve_ref(alt, tool.root)
            schema = dict(alt, **{k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")})
        self.name, self.schema, self.required = name, schema, required
        self.human = humanize(name)
        self.desc = (schema.get("description") or "").strip()
        self.type = schema.get("type", "string")
        if isinstance(self.type, list):
            self.type = next((x for x in self.type if x != "null"), "string")
        self.enum = schema.get("enum")
        if self.enum is None and "const" in schema:
            self.enum = [schema["const"]]  # one allowed value: a choice of one
            if "type" not in schema:
                c = schema["const"]
                self.type = "boolean" if isinstance(c, bool) else "integer" if isinstance(c, int) else \
                    "number" if isinstance(c, float) else "string"
        self.minimum = schema.get("minimum", schema.get("exclusiveMinimum"))
        self.maximum = schema.get("maximum", schema.get("exclusiveMaximum"))
        self.exclusive = ("exclusiveMinimum" in schema, "exclusiveMaximum" in schema)
        self.format = schema.get("format")
        self.pattern = schema.get("pattern")
        self.items = None
        if self.type == "array":
            item = schema.get("items") if isinstance(schema.get("items"), dict) else {"type": "string"}
            self.items = Param(name, item, True, tool)
            self.items.human = self.human
        self.children = []
        if self.type == "object":
            req = set(schema.get("required", []))
            self.children = [Param(k, v, k in req, tool) for k, v in schema.get("properties", {}).items()
                             if isinstance(v, dict)]
        self.kind = classify(self, tool)

    @property
    def words(self):
        return (self.human + " " + self.desc).lower()


def classify(p, tool):
    words = p.words
    if p.enum:
        return "enum"
    if p.type == "boolean":
        return "bool"
    if p.type in ("integer", "number"):
        for kind, rx in NUMBER_KIND_WORDS:
            if re.search(rx, words):
                if kind == "percent" and p.maximum is not None and p.maximum < 100 and "percent" not in words:
                    return "number"  # "level" 1-5 is a level, not a percentage
                return kind
        return "number"
    if p.type == "array":
        return "array"
    if p.type == "object":
        return "object"
    if p.format in ("date",):
        return "date"
    if p.format in ("date-time", "datetime"):
        return "datetime"
    if p.format == "time" or (p.pattern and is_time_pattern(p.pattern)):
        return "time"
    if p.format == "email":
        return "email"
    if p.format in ("uri", "url"):
        return "url"
    if p.format in ("hostname", "ipv4", "uuid"):
        return p.format
    if p.pattern:
        return "pattern"
    if re.search(r"\btime\b|clock", humanize(p.name)):
        return "time"
    if re.search(r"\bdate\b|\bday\b|birthday", humanize(p.name)):
        return "date"
    kind = next((k for k, rx in STRING_KIND_WORDS if re.search(rx, humanize(p.name))), None) or \
        next((k for k, rx in STRING_KIND_WORDS if re.search(rx, p.desc.lower())), "words")
    if kind in ("query", "words", "title") and re.search(MEDIA_TOOL, (tool.name + " " + tool.desc).lower()):
        return "media"  # "what to play": titles and artists, not web searches
    return kind


def is_time_pattern(pattern):
    try:
        rx = re.compile(pattern)
    except re.error:
        return False
    return any(rx.search(s) for s in TIME_PATTERN_PROBES) and not rx.search("25:99") and not rx.search("hello")


class Tool:
    def __init__(self, schema):
        self.schema = schema
        self.name = schema["name"]
        self.desc = (schema.get("description") or "").strip()
        params = schema.get("parameters") or {}
        self.root = params  # where "#/$defs/..." references point
        req = params.get("required", [])
        self.required = [r for r in req if r in params.get("properties", {})]
        self.params = [Param(k, v, k in req, self) for k, v in params.get("properties", {}).items()
                       if isinstance(v, dict)]
        self.tokens = humanize(self.name).split()

    def param(self, name):
        return next(p for p in self.params if p.name == name)

    def keywords(self):
        """Content words of the tool (for keeping off-topic requests off-topic)."""
        text = " ".join([humanize(self.name), self.desc] + [p.human + " " + p.desc for p in self.params])
        text += " " + " ".join(str(v) for p in self.params for v in (p.enum or []))
        return {stem(w) for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS and len(w) > 2}


STOPWORDS = set("""a an the and or of to for in on at by with from into onto off is are be as it its this that
these those or if then than not no yes can could should would will set get make do does use using value values
given one two any all some each per your my our their true false turn new list current""".split())


def stem(w):
    w = w.lower()
    for suf in ("ing", "es", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)]
    return w

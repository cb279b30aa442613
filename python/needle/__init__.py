"""needle: Needle tool-calling models from Python, over the C library libneedle.

    import needle

    @needle.tool
    def set_lights(room: str, on: bool):
        "Turn a room's lights on or off."
        return {"room": room, "on": on}

    agent = needle.Needle(tools=[set_lights])
    print(agent.run("turn off the kitchen lights")["results"])

Only the standard library is imported; numpy is used by embed(numpy=True) and
pydantic models are accepted when pydantic is installed.  docs/python.md has
the whole API.
"""
from ._errors import NeedleError
from ._tools import Field, tool, function_schema as tool_schema
from ._agent import Needle, extract, with_date
from ._train import build, finetune

__version__ = "0.1.0"
__all__ = ["Needle", "NeedleError", "Field", "tool", "tool_schema", "extract", "finetune", "build", "with_date",
           "__version__"]

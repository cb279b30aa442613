"""The installed package: what `pip install .` put where."""
import os

import needle
from needle import _native


def test_installed_layout():
    here = os.path.dirname(needle.__file__)
    if not os.environ.get("NEEDLE_LIBRARY"):
        assert os.path.isfile(os.path.join(here, _native.LIBRARY_NAME))
        assert os.path.isfile(os.path.join(here, "models", "needle-default.cact"))
        assert os.path.isfile(os.path.join(here, "models", "tools.json"))
    assert needle.__version__ == "0.1.0"
    assert set(needle.__all__) >= {"Needle", "NeedleError", "Field", "tool", "extract", "finetune", "build"}


def test_version_matches_the_c_header():
    header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "needle.h")
    with open(header) as f:
        assert '#define NEEDLE_VERSION "%s"' % needle.__version__ in f.read()


def test_readme_example_prints_what_it_says(capsys):
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    with open(readme) as f:
        text = f.read()
    start = text.index("```python\n") + len("```python\n")
    code = text[start:text.index("```", start)]
    expected = [line.split("# ", 1)[1] for line in code.splitlines() if line.startswith("print(")]
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == expected

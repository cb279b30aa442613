"""Where the Needle 3 reference oracle lives, for the tests that run it.

The reference package (cactus-needle 3.2.8, a test oracle only) is installed
in its own virtual environment (python3 -m venv /opt/venv-n3 &&
/opt/venv-n3/bin/pip install cactus-needle==3.2.8 jax flax sentencepiece
safetensors; .ci/run does this; NEEDLE3_VENV overrides the place).  The oracle
scripts run in that venv with telemetry and the model hub off and JAX on the
CPU.  Without it the tests that need it are SKIPPED, reported as skipped."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("NEEDLE_BUILD", "build"))
NEEDLE = os.path.join(BUILD, "needle")
VENV = os.environ.get("NEEDLE3_VENV", "/opt/venv-n3")
PY = os.path.join(VENV, "bin", "python")
ENV = {**os.environ, "NEEDLE_TELEMETRY": "0", "HF_HUB_OFFLINE": "1", "JAX_PLATFORMS": "cpu"}
TOK = os.path.join(ROOT, "tests", "golden", "tok8k.model")
TINY = os.path.join(ROOT, "tests", "golden", "needle3", "n3_tiny.safetensors")


def build_tool(name):
    """A program `make test` builds into BUILD/tools."""
    return os.path.join(BUILD, "tools", name)


def oracle_script(name):
    return os.path.join(ROOT, "tests", "python", name)


def reference_missing(imports):
    """None when the venv imports `imports` (a comma-separated module list), else why not."""
    if not os.path.exists(PY):
        return f"no {PY}"
    r = subprocess.run([PY, "-c", f"import {imports}"], capture_output=True, text=True, env=ENV)
    return None if r.returncode == 0 else f"{PY} cannot import the reference: {r.stderr.strip()[-200:]}"

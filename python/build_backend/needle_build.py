"""needle_build - the PEP 517 build backend of the `needle` Python package.

`pip install .` calls build_wheel here.  It compiles libneedle from this
repository's C sources with the system C compiler (the same source list as the
Makefile's library rule: every src/**/*.c outside src/cli/), links one shared
library, and writes a wheel holding python/needle/, that library and the bundled
model (models/needle-default.cact, models/tools.json).

Only the standard library is used, and pyproject.toml asks for no build
requirements, so the install works offline in a fresh virtual environment.

The library is built portably (no -march=native): a wheel may run on another
CPU of the same architecture.  Environment: CC (default cc), NEEDLE_CFLAGS
(extra flags, e.g. -march=native for a local build), NEEDLE_BUILD_JOBS
(parallel compiles, default every core).
"""
import base64
import concurrent.futures
import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DIST_NAME = "libneedle"
CFLAGS = ["-std=c11", "-O2", "-fPIC", "-D_GNU_SOURCE", "-pthread", "-Wall", "-Wextra"]
LDLIBS = ["-lm", "-pthread"]
# Kernel copies for run-time selection (the Makefile's ISA_AVX512 / ISA_AVX2): a file named
# *_avx512.c or *_avx2.c is compiled with that instruction set, on x86-64 only.
ISA_FLAGS = {
    "_avx512.c": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mavx2", "-mfma", "-mf16c"],
    "_avx2.c": ["-mavx2", "-mfma", "-mf16c"],
}


def _isa_flags(cc, src):
    """The instruction-set flags of one source, or None when it is not for this target."""
    for suffix, isa in ISA_FLAGS.items():
        if src.endswith(suffix):
            machine = subprocess.run(cc + ["-dumpmachine"], stdout=subprocess.PIPE, universal_newlines=True).stdout
            return isa if machine.startswith("x86_64") else None
    return []
MODEL_FILES = ("needle-default.cact", "tools.json")
SDIST_PARTS = ("pyproject.toml", "README.md", "Makefile", "include", "src", "models", "python", "docs")
# Zip entries get a fixed date so the same sources give the same wheel bytes.
ZIP_DATE = (2020, 1, 1, 0, 0, 0)


def _version():
    with open(os.path.join(ROOT, "include", "needle.h"), encoding="utf-8") as f:
        m = re.search(r'#define NEEDLE_VERSION "([^"]+)"', f.read())
    if not m:
        raise RuntimeError("include/needle.h: no NEEDLE_VERSION")
    return m.group(1)


def _library_name():
    if sys.platform == "darwin":
        return "libneedle.dylib"
    if sys.platform == "win32":
        raise RuntimeError("libneedle builds on POSIX systems (Linux, macOS); Windows is not supported yet")
    return "libneedle.so"


def _platform_tag():
    return re.sub(r"[^A-Za-z0-9_]", "_", sysconfig.get_platform())


def _library_sources():
    """Every .c under src/ except the CLI and the HTTP server (which link
    libmicrohttpd, never libneedle), sorted: the Makefile's LIB_SRC."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "src")):
        dirnames.sort()
        rel = os.path.relpath(dirpath, ROOT)
        if any(rel == os.path.join("src", d) or rel.startswith(os.path.join("src", d) + os.sep)
               for d in ("cli", "server")):
            continue
        out.extend(os.path.join(rel, f) for f in filenames if f.endswith(".c"))
    return sorted(out)


def _newest_header():
    newest = 0.0
    for top in ("src", "include"):
        for dirpath, _, filenames in os.walk(os.path.join(ROOT, top)):
            for f in filenames:
                if f.endswith(".h"):
                    newest = max(newest, os.path.getmtime(os.path.join(dirpath, f)))
    return newest


def build_library(build_dir=None):
    """Compile (incrementally) and link libneedle; returns the library's path."""
    cc = shlex.split(os.environ.get("CC") or "cc")
    extra = shlex.split(os.environ.get("NEEDLE_CFLAGS", ""))
    build_dir = build_dir or os.path.join(ROOT, "build", "python", _platform_tag())
    flags = CFLAGS + ["-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "src")] + extra
    stamp = " ".join(cc + flags)
    stamp_path = os.path.join(build_dir, "flags")
    old_stamp = open(stamp_path, encoding="utf-8").read() if os.path.exists(stamp_path) else None
    headers = _newest_header()
    jobs = []
    objects = []
    for src in _library_sources():
        if _isa_flags(cc, src) is None:
            continue
        obj = os.path.join(build_dir, "obj", src[:-2] + ".o")
        objects.append(obj)
        src_abs = os.path.join(ROOT, src)
        fresh = (old_stamp == stamp and os.path.exists(obj)
                 and os.path.getmtime(obj) >= max(os.path.getmtime(src_abs), headers))
        if not fresh:
            jobs.append((src_abs, obj))
    os.makedirs(build_dir, exist_ok=True)

    def compile_one(job):
        src, obj = job
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        cmd = cc + flags + _isa_flags(cc, src) + ["-c", src, "-o", obj]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        return cmd, r.returncode, r.stdout

    started = time.time()
    n_jobs = int(os.environ.get("NEEDLE_BUILD_JOBS") or os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, n_jobs)) as pool:
        for cmd, rc, output in pool.map(compile_one, jobs):
            if output:
                sys.stderr.write(output)
            if rc != 0:
                raise RuntimeError("compiling libneedle failed: " + " ".join(cmd))
    with open(stamp_path, "w", encoding="utf-8") as f:
        f.write(stamp)
    lib = os.path.join(build_dir, _library_name())
    cmd = cc + ["-shared"] + flags + ["-o", lib] + objects + LDLIBS
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        raise RuntimeError("linking libneedle failed: " + " ".join(cmd))
    sys.stderr.write("libneedle: compiled %d of %d sources in %.1f s -> %s\n"
                     % (len(jobs), len(objects), time.time() - started, lib))
    return lib


def _metadata(version):
    readme = ""
    try:
        with open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8") as f:
            readme = f.read()
    except OSError:
        pass
    head = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Needle tool-calling models from Python, over the C library libneedle\n"
            "Requires-Python: >=3.9\nProvides-Extra: embed\nRequires-Dist: numpy; extra == \"embed\"\n"
            "Description-Content-Type: text/markdown\n" % (DIST_NAME, version))
    return head + "\n" + readme


def _wheel_files(lib_path):
    """(archive name, bytes) for every file the wheel installs, sorted."""
    files = []
    pkg = os.path.join(ROOT, "python", "needle")
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith((".py", ".typed")):
                full = os.path.join(dirpath, f)
                name = os.path.relpath(full, os.path.join(ROOT, "python")).replace(os.sep, "/")
                files.append((name, open(full, "rb").read()))
    for f in MODEL_FILES:
        files.append(("needle/models/" + f, open(os.path.join(ROOT, "models", f), "rb").read()))
    files.append(("needle/" + os.path.basename(lib_path), open(lib_path, "rb").read()))
    return sorted(files)


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _zip_add(z, name, data, executable=False):
    info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o755 if executable else 0o644) << 16
    z.writestr(info, data)


# ---- PEP 517 hooks ----

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    lib = build_library()
    tag = "py3-none-" + _platform_tag()
    dist_info = "%s-%s.dist-info" % (DIST_NAME, version)
    wheel_name = "%s-%s-%s.whl" % (DIST_NAME, version, tag)
    entries = _wheel_files(lib)
    entries.append((dist_info + "/METADATA", _metadata(version).encode("utf-8")))
    entries.append((dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: needle_build\nRoot-Is-Purelib: false\n"
                                           "Tag: %s\n" % tag).encode()))
    entries.append((dist_info + "/top_level.txt", b"needle\n"))
    record = [_record_line(n, d) for n, d in entries] + [dist_info + "/RECORD,,"]
    path = os.path.join(wheel_directory, wheel_name)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w") as z:
        for name, data in entries:
            _zip_add(z, name, data, executable=name.endswith((".so", ".dylib")))
        _zip_add(z, dist_info + "/RECORD", ("\n".join(record) + "\n").encode())
    os.replace(tmp, path)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (DIST_NAME, version)
    name = base + ".tar.gz"
    path = os.path.join(sdist_directory, name)

    def keep(info):
        parts = info.name.split("/")
        if "__pycache__" in parts or info.name.endswith(".pyc"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with tarfile.open(path + ".tmp", "w:gz") as t:
        for part in SDIST_PARTS:
            full = os.path.join(ROOT, part)
            if os.path.exists(full):
                t.add(full, arcname=base + "/" + part, filter=keep)
        meta = _metadata(version).encode("utf-8")
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(meta)
        t.addfile(info, io.BytesIO(meta))
    os.replace(path + ".tmp", path)
    return name

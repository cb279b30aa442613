"""The ctypes binding to libneedle (include/needle.h).

ctypes over the shared library: nothing to compile against Python's headers, no
build-time or run-time Python dependency, one library for every Python version,
and ctypes releases the GIL around each foreign call, so sessions on several
threads run in parallel.  The library is loaded on first use, not at import.
"""
import ctypes
import os
import sys
import threading

from ._errors import NeedleError

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_NAME = "libneedle.dylib" if sys.platform == "darwin" else "libneedle.so"


class ErrorRecord(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]


class ModelOptions(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("backend", ctypes.c_char_p), ("kv_window", ctypes.c_int),
                ("layers", ctypes.c_int), ("layout", ctypes.c_int), ("acts", ctypes.c_int)]


class SessionOptions(ctypes.Structure):
    _fields_ = [("system", ctypes.c_char_p), ("tools_json", ctypes.c_char_p), ("tool_index_path", ctypes.c_char_p),
                ("max_new_tokens", ctypes.c_int), ("max_reasoning_tokens", ctypes.c_int),
                ("temperature", ctypes.c_float), ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64),
                ("strict", ctypes.c_int), ("grounded_decoding", ctypes.c_int), ("split_requests", ctypes.c_int),
                ("ask_again", ctypes.c_int)]


class FinetuneOptions(ctypes.Structure):
    _fields_ = [("data_path", ctypes.c_char_p), ("checkpoint_path", ctypes.c_char_p), ("out_path", ctypes.c_char_p),
                ("tokenizer_path", ctypes.c_char_p), ("full", ctypes.c_int),
                ("epochs", ctypes.c_int), ("batch_size", ctypes.c_int), ("lora_rank", ctypes.c_int),
                ("max_len", ctypes.c_int), ("threads", ctypes.c_int), ("log_every", ctypes.c_int),
                ("lr", ctypes.c_double), ("lora_alpha", ctypes.c_double), ("val_split", ctypes.c_double),
                ("seed", ctypes.c_uint64), ("bucket_batch", ctypes.c_int), ("bucket_window", ctypes.c_int),
                ("save_every", ctypes.c_int), ("state_path", ctypes.c_char_p), ("resume_path", ctypes.c_char_p),
                ("stop_after", ctypes.c_int), ("plot_path", ctypes.c_char_p), ("quiet", ctypes.c_int),
                ("val_path", ctypes.c_char_p), ("eval_every", ctypes.c_int), ("patience", ctypes.c_int),
                ("keep_last", ctypes.c_int), ("layout", ctypes.c_int), ("qat_bits", ctypes.c_char_p),
                ("decision_weight", ctypes.c_double)]


class FinetuneResult(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_int), ("steps", ctypes.c_int), ("stopped", ctypes.c_int),
                ("first_loss", ctypes.c_double), ("last_loss", ctypes.c_double), ("last_val_loss", ctypes.c_double),
                ("seconds", ctypes.c_double), ("tokens_per_s", ctypes.c_double),
                ("epochs", ctypes.c_int), ("best_step", ctypes.c_int), ("early_stopped", ctypes.c_int),
                ("best_val_loss", ctypes.c_double), ("lr", ctypes.c_double)]


class BuildOptions(ctypes.Structure):
    _fields_ = [("checkpoint_path", ctypes.c_char_p), ("tokenizer_path", ctypes.c_char_p), ("bits", ctypes.c_char_p),
                ("bits_map", ctypes.c_char_p), ("lora_path", ctypes.c_char_p), ("out_path", ctypes.c_char_p),
                ("kv_window", ctypes.c_int), ("quiet", ctypes.c_int)]


_P = ctypes.c_void_p
_ERR = ctypes.POINTER(ErrorRecord)
_SIGNATURES = {
    "needle_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "needle_model_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ModelOptions),
                                         ctypes.POINTER(_P), _ERR]),
    "needle_model_close": (None, [_P]),
    "needle_model_backend": (ctypes.c_char_p, [_P, ctypes.POINTER(ctypes.c_char_p)]),
    "needle_model_embed_dim": (ctypes.c_int, [_P]),
    "needle_model_embed": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int, _ERR]),
    "needle_session_open": (ctypes.c_int, [_P, ctypes.POINTER(SessionOptions), ctypes.POINTER(_P), _ERR]),
    "needle_session_close": (None, [_P]),
    "needle_session_set_tools": (ctypes.c_int, [_P, ctypes.c_char_p, _ERR]),
    "needle_session_reset": (None, [_P]),
    # the envelope comes back as a char* we must free, so it is read as a void*
    "needle_session_turn": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_P),
                                           _ERR]),
    "needle_free": (None, [_P]),
    "needle_finetune_options_default": (None, [ctypes.POINTER(FinetuneOptions)]),
    "needle_finetune": (ctypes.c_int, [ctypes.POINTER(FinetuneOptions), ctypes.POINTER(FinetuneResult), _ERR]),
    "needle_build": (ctypes.c_int, [ctypes.POINTER(BuildOptions), _ERR]),
}

_lib = None
_lock = threading.Lock()


def library_path():
    """$NEEDLE_LIBRARY, else the library installed inside the package."""
    return os.environ.get("NEEDLE_LIBRARY") or os.path.join(HERE, LIBRARY_NAME)


def lib():
    """The loaded library, with every signature declared (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = library_path()
            try:
                loaded = ctypes.CDLL(path)
            except OSError as e:
                raise NeedleError(-1, "cannot load libneedle from %s: %s (reinstall the package: pip install .)"
                                  % (path, e)) from None
            for name, (restype, argtypes) in _SIGNATURES.items():
                try:
                    fn = getattr(loaded, name)
                except AttributeError:
                    raise NeedleError(-9, "%s: libneedle lacks %s (a library older than this package)"
                                      % (path, name)) from None
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = loaded
    return _lib


def check(rc, err):
    """Raise NeedleError carrying the C message when rc is a failure code."""
    if rc < 0:
        message = err.message.decode("utf-8", "replace") or lib().needle_strerror(rc).decode()
        raise NeedleError(rc, message)
    return rc


def encode(text, what):
    """str -> UTF-8 bytes for the C side (None stays None); a clear error otherwise."""
    if text is None:
        return None
    if isinstance(text, bytes):
        raw = text
    elif isinstance(text, str):
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise NeedleError(-7, "%s: not valid UTF-8 text (%s)" % (what, e)) from None
    elif isinstance(text, os.PathLike):
        raw = os.fsencode(text)
    else:
        raise NeedleError(-4, "%s must be a string, not %s" % (what, type(text).__name__))
    if b"\0" in raw:
        raise NeedleError(-4, "%s contains a NUL character" % what)
    return raw

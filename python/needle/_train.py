"""needle.finetune and needle.build: libneedle's trainer and exporter, in-process.

Both block until done and print the CLI's progress lines (`needle finetune` on
stderr, `needle build` on stdout) straight from C, unless quiet=True.
"""
import ctypes
import json
import os
import sys
import tempfile

from . import _native
from ._agent import default_weights
from ._errors import NeedleError

_EINVAL = -4

_FINETUNE_OPTIONS = {
    # option: (struct field, type)
    "full": ("full", bool), "epochs": ("epochs", int), "batch_size": ("batch_size", int),
    "lr": ("lr", float), "lora_rank": ("lora_rank", int), "lora_alpha": ("lora_alpha", float),
    "max_len": ("max_len", int), "val_split": ("val_split", float), "seed": ("seed", int),
    "threads": ("threads", int), "log_every": ("log_every", int), "bucket_window": ("bucket_window", int),
    "save_every": ("save_every", int), "stop_after": ("stop_after", int), "quiet": ("quiet", bool),
    "state_file": ("state_path", str), "resume": ("resume_path", str), "plot": ("plot_path", str),
    "val": ("val_path", str), "eval_every": ("eval_every", int), "patience": ("patience", int),
    "keep_last": ("keep_last", bool), "qat_bits": ("qat_bits", str),
    "decision_weight": ("decision_weight", float),
}
_LAYOUTS = {"auto": 0, "2.0.8": 1, "2.0.15": 2}


def _path(value, what):
    if isinstance(value, (str, bytes, os.PathLike)):
        return _native.encode(value, what)
    raise NeedleError(_EINVAL, "%s must be a path, not %s" % (what, type(value).__name__))


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def finetune(data, checkpoint, out, *, tokenizer=None, bucket="global", layout="auto", **options):
    """Fine-tune a .safetensors checkpoint on JSONL rows, as `needle finetune`.

    data: a JSONL path, or a list of row dicts {query, tools, answers, ...}.
    checkpoint: the base .safetensors (or a .cact, dequantised); out: the adapter
    (LoRA, default) or, with full=True, the whole checkpoint.  tokenizer: a
    SentencePiece .model or a .cact (default: the bundled model's).  Options (the
    CLI's, with underscores): full, epochs=0 (automatic), batch_size=16, lr=0
    (automatic), lora_rank=16, lora_alpha=32, max_len=1024, val_split=0.1, val
    (a validation file), eval_every=0 (automatic), patience=3, keep_last=False,
    seed=0, threads, log_every=10, bucket="global"|"batch", bucket_window=50,
    save_every, state_file, resume, stop_after, plot, quiet,
    qat_bits="auto"|"none"|"2"|"4", decision_weight=1, layout="auto"|"2.0.8"|"2.0.15".  Returns
    {"rows","steps","stopped","first_loss","last_loss","last_val_loss","seconds",
    "tokens_per_s","epochs","best_step","early_stopped","best_val_loss","lr","out"}.
    """
    lib = _native.lib()
    opts = _native.FinetuneOptions()
    lib.needle_finetune_options_default(ctypes.byref(opts))
    if layout not in _LAYOUTS:
        raise NeedleError(_EINVAL, "finetune: layout must be auto, 2.0.8 or 2.0.15 (got %r)" % (layout,))
    opts.layout = _LAYOUTS[layout]
    keep = []  # the bytes the struct points at must live until the call returns
    for name, value in options.items():
        if name not in _FINETUNE_OPTIONS:
            raise NeedleError(_EINVAL, "finetune: unknown option %r (known: %s)"
                              % (name, ", ".join(sorted(_FINETUNE_OPTIONS) + ["bucket", "layout", "tokenizer"])))
        field, kind = _FINETUNE_OPTIONS[name]
        if value is None:
            continue
        if kind is str:
            raw = _path(value, name)
            keep.append(raw)
            setattr(opts, field, raw)
        elif kind is bool:
            setattr(opts, field, 1 if value else 0)
        elif kind is int:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise NeedleError(_EINVAL, "finetune: %s must be an integer >= 0 (got %r)" % (name, value))
            setattr(opts, field, value)
        else:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise NeedleError(_EINVAL, "finetune: %s must be a number (got %r)" % (name, value))
            setattr(opts, field, float(value))
    if bucket not in ("global", "batch"):
        raise NeedleError(_EINVAL, "finetune: bucket must be \"global\" or \"batch\" (got %r)" % (bucket,))
    opts.bucket_batch = 1 if bucket == "batch" else 0

    tmp = None
    try:
        if isinstance(data, (list, tuple)):
            fd, tmp = tempfile.mkstemp(suffix=".jsonl", prefix="needle-finetune-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for row in data:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
            data = tmp
        raws = [_path(data, "data"), _path(checkpoint, "checkpoint"), _path(out, "out"),
                _path(tokenizer if tokenizer is not None else default_weights(), "tokenizer")]
        opts.data_path, opts.checkpoint_path, opts.out_path, opts.tokenizer_path = raws
        res = _native.FinetuneResult()
        err = _native.ErrorRecord()
        _flush()
        _native.check(lib.needle_finetune(ctypes.byref(opts), ctypes.byref(res), ctypes.byref(err)), err)
    finally:
        if tmp:
            os.unlink(tmp)
    result = {name: getattr(res, name) for name, _ in _native.FinetuneResult._fields_}
    result["stopped"] = bool(result["stopped"])
    result["early_stopped"] = bool(result["early_stopped"])
    result["out"] = os.fspath(out)
    return result


def build(checkpoint, out, *, tokenizer=None, bits=None, bits_map=None, lora=None, kv_window=0, quiet=False):
    """Quantise a checkpoint into a .cact deploy file, as `needle build`.

    checkpoint: a .safetensors (or a .cact to re-quantise).  tokenizer: a .model
    or a .cact (default: the checkpoint's own for a .cact, else the bundled
    model's).  bits: 2, 3, 4 or 1.58 for every matrix, or bits_map
    "default=4,embedding=3,...".  lora: an adapter from finetune() to merge
    first.  kv_window: the KV window stored in the header.  Returns out.
    """
    if bits is not None and bits_map is not None:
        raise NeedleError(_EINVAL, "build: give bits or bits_map, not both")
    if not isinstance(kv_window, int) or isinstance(kv_window, bool) or kv_window < 0:
        raise NeedleError(_EINVAL, "build: kv_window must be an integer >= 0 (got %r)" % (kv_window,))
    ckpt = _path(checkpoint, "checkpoint")
    if tokenizer is None and not ckpt.endswith(b".cact"):
        tokenizer = default_weights()  # a .cact carries its own tokenizer
    opts = _native.BuildOptions(
        ckpt, _path(tokenizer, "tokenizer") if tokenizer is not None else None,
        _native.encode(str(bits), "bits") if bits is not None else None, _native.encode(bits_map, "bits_map"),
        _path(lora, "lora") if lora is not None else None, _path(out, "out"), kv_window, 1 if quiet else 0)
    err = _native.ErrorRecord()
    _flush()
    _native.check(_native.lib().needle_build(ctypes.byref(opts), ctypes.byref(err)), err)
    return os.fspath(out)

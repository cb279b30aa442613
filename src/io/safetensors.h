/* safetensors.h - the project's full-precision checkpoint format.
 *
 * File layout (huggingface safetensors): u64 little-endian header length N,
 * N bytes of JSON header (an object: name -> {"dtype","shape","data_offsets"},
 * plus an optional "__metadata__" object of string -> string), then the data
 * buffer; data_offsets are [begin, end) relative to the buffer.
 *
 * The API is generic (named tensors + metadata) so checkpoints, LoRA adapters
 * (`<param path>.lora_A`) and resumable training state share one reader and
 * one writer.  Reading memory-maps the file; tensor data stays in the mapping.
 */
#ifndef ND_SAFETENSORS_H
#define ND_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/file.h"
#include "needle.h"

#define ND_ST_MAX_DIMS 8

typedef enum {
    ND_ST_F32,
    ND_ST_F16,
    ND_ST_BF16,
    ND_ST_F64,
    ND_ST_I64,
    ND_ST_I32,
    ND_ST_I16,
    ND_ST_I8,
    ND_ST_U8,
    ND_ST_U16,
    ND_ST_U32,
    ND_ST_U64,
    ND_ST_BOOL,
    ND_ST_F8_E4M3,
    ND_ST_F8_E5M2,
    ND_ST_DTYPE_COUNT
} nd_st_dtype;

/* "F32" etc., and the element size in bytes. */
const char *nd_st_dtype_name(nd_st_dtype t);
size_t nd_st_dtype_size(nd_st_dtype t);

typedef struct nd_st_tensor {
    char *name;
    nd_st_dtype dtype;
    int ndim;
    int64_t shape[ND_ST_MAX_DIMS];
    size_t numel;
    const uint8_t *data; /* numel * dtype size bytes inside the file (may be unaligned) */
    size_t nbytes;
    size_t file_offset;  /* absolute offset of data in the file */
} nd_st_tensor;

typedef struct nd_safetensors {
    nd_mapping map;        /* owned when opened with nd_st_open */
    nd_st_tensor *tensors; /* in header order */
    size_t count;
    char **meta_keys, **meta_values; /* __metadata__, in header order */
    size_t meta_count;
    size_t data_start;     /* 8 + N */
} nd_safetensors;

/* Map and validate a file: header length within the file, header JSON an
 * object, known dtypes, shape products matching data_offsets, offsets inside
 * the data buffer and no two tensors overlapping. */
int nd_st_open(const char *path, nd_safetensors *st, needle_error *err);
/* The same on a caller's buffer (not copied: it must outlive st; not unmapped). */
int nd_st_parse(const uint8_t *data, size_t size, const char *where, nd_safetensors *st, needle_error *err);
void nd_st_close(nd_safetensors *st);

const nd_st_tensor *nd_st_find(const nd_safetensors *st, const char *name);
/* A __metadata__ value, NULL when absent. */
const char *nd_st_meta(const nd_safetensors *st, const char *key);

/* Element i of a float tensor (F32, F16, BF16, F64) as float; other dtypes 0. */
float nd_st_get_f32(const nd_st_tensor *t, size_t i);
int nd_st_is_float(nd_st_dtype t);
/* "(d0,d1,...)" for error messages. */
void nd_st_shape_text(char *out, size_t n, int ndim, const int64_t *shape);
/* Convert the whole tensor to float32 (out has numel floats); NEEDLE_EUNSUPPORTED
 * for non-float dtypes. */
int nd_st_read_f32(const nd_st_tensor *t, float *out, const char *where, needle_error *err);

/* ---- writing ---- */
typedef struct nd_st_out_tensor {
    const char *name;
    nd_st_dtype dtype; /* data is written as is, little-endian, dtype-size elements */
    int ndim;          /* 0 (a scalar) .. ND_ST_MAX_DIMS */
    int64_t shape[ND_ST_MAX_DIMS];
    const void *data;
} nd_st_out_tensor;

/* Write tensors (sorted by name in the file) and metadata key/value pairs
 * atomically.  The header is space-padded so the data buffer starts 8-byte
 * aligned.  Names must be unique and non-empty and not "__metadata__". */
int nd_st_write(const char *path, const nd_st_out_tensor *tensors, size_t n, const char *const *meta_keys,
                const char *const *meta_values, size_t n_meta, needle_error *err);

#endif

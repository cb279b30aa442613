/* cuda_kernels.cu - the CUDA kernels of the backend, one per op, each written
 * to do the same arithmetic as the CPU reference (src/backend/cpu) so the two
 * agree to rounding: same butterfly order in the Walsh-Hadamard, double
 * accumulation in RMSNorm, the same visibility rule in attention.
 *
 * The launchers size the grids; cuda_device.cu owns the memory and streams. */
#include <cuda_fp16.h>
#include <math.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"

/* ---------------------------------------------------------------- reductions */

/* Sum (or max) over the block; every thread gets the result.  `red` holds 32
 * partials; blockDim.x is a multiple of 32. */
template <typename T, bool IsMax>
__device__ T block_reduce(T v, T *red)
{
    for (int off = 16; off > 0; off >>= 1) {
        T o = __shfl_down_sync(0xffffffffu, v, off);
        v = IsMax ? (o > v ? o : v) : v + o;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    __syncthreads(); /* red may still be read by a previous reduction */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    T r = red[0];
    for (int i = 1; i < warps; i++) r = IsMax ? (red[i] > r ? red[i] : r) : r + red[i];
    return r;
}

/* ---------------------------------------------------------------- CQ dequantise */

/* One block per (row, 128-group), one thread per column of the group: decode
 * the code, scale by the group norm, then undo the rotation with the same
 * in-place butterflies as nd_cpu_hadamard (H128 is its own inverse). */
__global__ void cq_dequant_kernel(nd_cu_cq_desc d, const uint8_t *idx, const uint8_t *norms, float *out)
{
    __shared__ float s[128];
    int groups = d.cols_pad / 128;
    long long blk = blockIdx.x;
    int r = (int)(blk / groups), g = (int)(blk % groups), i = threadIdx.x;
    size_t row_bytes = (size_t)d.cols_pad * (size_t)d.storage_bits / 8u;
    const uint8_t *p = idx + (size_t)r * row_bytes;
    size_t bit = (size_t)(g * 128 + i) * (size_t)d.storage_bits, byte = bit >> 3;
    unsigned v = p[byte];
    if (byte + 1 < row_bytes) v |= (unsigned)p[byte + 1] << 8; /* a 3-bit code may straddle two bytes */
    unsigned code = (v >> (bit & 7u)) & ((1u << d.storage_bits) - 1u);
    const uint8_t *np = norms + ((size_t)r * (size_t)groups + (size_t)g) * 2u; /* FP16, maybe unaligned */
    float norm = __half2float(__ushort_as_half((unsigned short)(np[0] | (np[1] << 8))));
    s[i] = d.codebook[code] * norm;
    __syncthreads();
    for (int len = 1; len < 128; len <<= 1) {
        float mine = s[i], other = s[i ^ len];
        __syncthreads();
        s[i] = (i & len) ? other - mine : mine + other;
        __syncthreads();
    }
    int c = g * 128 + i;
    if (c < d.cols) out[(size_t)r * (size_t)d.cols + (size_t)c] = s[i] * (1.0f / sqrtf(128.0f));
}

cudaError_t nd_cu_launch_cq_dequant(const nd_cu_cq_desc &d, const uint8_t *idx, const uint8_t *norms, float *out,
                                    cudaStream_t stream)
{
    long long blocks = (long long)d.rows * (long long)(d.cols_pad / 128);
    if (blocks <= 0) return cudaSuccess;
    if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
    cq_dequant_kernel<<<(unsigned)blocks, 128, 0, stream>>>(d, idx, norms, out);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- gather */

__global__ void gather_kernel(const float *w, int cols, const int *rows, float *out)
{
    const float *src = w + (size_t)rows[blockIdx.x] * (size_t)cols;
    float *dst = out + (size_t)blockIdx.x * (size_t)cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c];
}

cudaError_t nd_cu_launch_gather(const float *w, int cols, const int *rows, int n, float *out, cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    gather_kernel<<<n, 128, 0, stream>>>(w, cols, rows, out);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- rmsnorm */

__global__ void rmsnorm_kernel(const float *x, int n, const float *scale, float *out)
{
    __shared__ double red[32];
    const float *xv = x + (size_t)blockIdx.x * (size_t)n;
    float *ov = out + (size_t)blockIdx.x * (size_t)n;
    double ss = 0.0; /* double, as the CPU: a mean square of thousands of floats */
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)xv[i] * (double)xv[i];
    ss = block_reduce<double, false>(ss, red);
    float inv = (float)(1.0 / sqrt(ss / (double)n + 1e-6));
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float y = __fmul_rn(xv[i], inv);
        ov[i] = scale ? __fmul_rn(1.0f + scale[i], y) : y;
    }
}

cudaError_t nd_cu_launch_rmsnorm(const float *x, int n, int count, const float *scale, float *out,
                                 cudaStream_t stream)
{
    if (count <= 0) return cudaSuccess;
    rmsnorm_kernel<<<count, 256, 0, stream>>>(x, n, scale, out);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- rope */

__global__ void rope_kernel(float *x, int heads, int head_dim, const float *cs)
{
    int half = head_dim / 2, k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= heads * half) return;
    int h = k / half, i = k % half;
    float *v = x + (size_t)h * (size_t)head_dim;
    float x1 = v[i], x2 = v[i + half], c = cs[i], s = cs[half + i];
    /* explicit roundings: no fused multiply-add, as the CPU code computes it */
    v[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    v[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

cudaError_t nd_cu_launch_rope(float *x, int heads, int head_dim, const float *cs, cudaStream_t stream)
{
    int work = heads * (head_dim / 2);
    if (work <= 0) return cudaSuccess;
    rope_kernel<<<(work + 127) / 128, 128, 0, stream>>>(x, heads, head_dim, cs);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- hadamard */

/* One block per vector, the vector in shared memory; butterflies in the same
 * order as nd_cpu_hadamard (len 1, 2, 4, ...), so the sums are identical. */
__global__ void hadamard_kernel(float *x, int n)
{
    extern __shared__ float s[];
    float *v = x + (size_t)blockIdx.x * (size_t)n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = v[i];
    __syncthreads();
    for (int len = 1; len < n; len <<= 1) {
        for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
            int a = (p / len) * 2 * len + p % len, b = a + len;
            float u = s[a], w = s[b];
            s[a] = u + w;
            s[b] = u - w;
        }
        __syncthreads();
    }
    float sc = 1.0f / sqrtf((float)n);
    for (int i = threadIdx.x; i < n; i += blockDim.x) v[i] = s[i] * sc;
}

cudaError_t nd_cu_launch_hadamard(float *x, int n, int count, cudaStream_t stream)
{
    if (count <= 0 || n <= 1) return cudaSuccess;
    if (n > ND_CU_HADAMARD_MAX || (n & (n - 1))) return cudaErrorInvalidValue;
    int threads = n / 2 < 512 ? n / 2 : 512;
    if (threads < 32) threads = 32;
    hadamard_kernel<<<count, threads, (size_t)n * sizeof(float), stream>>>(x, n);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- sinkhorn */

/* One thread per n x n matrix (n <= 16: the mHC lane count is 4). */
__global__ void sinkhorn_kernel(float *mats, int n, int count, int iters)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) return;
    float *m = mats + (size_t)k * (size_t)(n * n);
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) {
            float *row = m + i * n, mx = row[0];
            for (int j = 1; j < n; j++) mx = fmaxf(mx, row[j]);
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += expf(row[j] - mx);
            float lse = mx + logf(s);
            for (int j = 0; j < n; j++) row[j] -= lse;
        }
        for (int j = 0; j < n; j++) {
            float mx = m[j];
            for (int i = 1; i < n; i++) mx = fmaxf(mx, m[i * n + j]);
            float s = 0.0f;
            for (int i = 0; i < n; i++) s += expf(m[i * n + j] - mx);
            float lse = mx + logf(s);
            for (int i = 0; i < n; i++) m[i * n + j] -= lse;
        }
    }
    for (int i = 0; i < n * n; i++) m[i] = expf(m[i]);
}

cudaError_t nd_cu_launch_sinkhorn(float *m, int n, int count, int iters, cudaStream_t stream)
{
    if (count <= 0 || n <= 0) return cudaSuccess;
    sinkhorn_kernel<<<(count + 63) / 64, 64, 0, stream>>>(m, n, count, iters);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- int8 KV */

/* One thread per group of ND_KV_GROUP values. */
__global__ void quantize_kv_kernel(const float *x, int groups, int8_t *q, float *scale)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    const float *xg = x + (size_t)g * ND_KV_GROUP;
    float mx = 0.0f;
    for (int i = 0; i < ND_KV_GROUP; i++) mx = fmaxf(mx, fabsf(xg[i]));
    float inv = mx > 0.0f ? 127.0f / mx : 0.0f;
    scale[g] = mx / 127.0f;
    /* round half to even, as lrintf in the default rounding mode */
    for (int i = 0; i < ND_KV_GROUP; i++) q[(size_t)g * ND_KV_GROUP + i] = (int8_t)__float2int_rn(__fmul_rn(xg[i], inv));
}

cudaError_t nd_cu_launch_quantize_kv(const float *x, int n, int8_t *q, float *scale, cudaStream_t stream)
{
    int groups = n / ND_KV_GROUP;
    if (groups <= 0) return cudaSuccess;
    quantize_kv_kernel<<<(groups + 63) / 64, 64, 0, stream>>>(x, groups, q, scale);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- attention */

/* One block per (query t, head h).  Pass 1 scores every key (invisible keys
 * get -inf), pass 2 turns scores into exp weights and sums them, pass 3 has
 * one thread per output channel accumulate the weighted values. */
__global__ void attention_kernel(nd_cu_attn_desc a)
{
    __shared__ float red[32];
    extern __shared__ float qs[];
    int t = blockIdx.x / a.num_heads, h = blockIdx.x % a.num_heads;
    int hd = a.head_dim, kvw = a.num_kv_heads * hd, kvh = h / (a.num_heads / a.num_kv_heads);
    int groups = kvw / ND_KV_GROUP;
    int qpos = a.pos0 + t, nkeys = a.cache_slots + a.T;
    const float *q = a.q + (size_t)t * (size_t)(a.num_heads * hd) + (size_t)h * (size_t)hd;
    for (int c = threadIdx.x; c < hd; c += blockDim.x) qs[c] = q[c];
    __syncthreads();
    float *sc = a.scores + (size_t)blockIdx.x * (size_t)nkeys;
    float scale = 1.0f / sqrtf((float)hd), mx = -INFINITY;
    for (int k = threadIdx.x; k < nkeys; k += blockDim.x) {
        int cached = k < a.cache_slots;
        int p = cached ? a.cache_pos[k] : a.pos0 + (k - a.cache_slots);
        float s = -INFINITY;
        if (p >= 0 && p <= qpos && (qpos - p < a.window || p < a.sinks)) {
            float d = 0.0f;
            if (cached && a.kv_bits == 8) { /* widen the int8 row as the CPU does: code * group scale */
                const int8_t *kq = a.k_cache8 + (size_t)k * (size_t)kvw + (size_t)kvh * (size_t)hd;
                const float *ks = a.k_scale + (size_t)k * (size_t)groups + (size_t)kvh * (size_t)hd / ND_KV_GROUP;
                for (int c = 0; c < hd; c++) d += qs[c] * __fmul_rn((float)kq[c], ks[c / ND_KV_GROUP]);
            } else {
                const float *kr = cached ? a.k_cache + (size_t)k * (size_t)kvw : a.k_chunk + (size_t)(k - a.cache_slots) * (size_t)kvw;
                kr += (size_t)kvh * (size_t)hd;
                for (int c = 0; c < hd; c++) d += qs[c] * kr[c];
            }
            s = d * scale;
        }
        sc[k] = s;
        mx = fmaxf(mx, s);
    }
    mx = block_reduce<float, true>(mx, red);
    float sum = 0.0f;
    for (int k = threadIdx.x; k < nkeys; k += blockDim.x) {
        float e = sc[k] == -INFINITY ? 0.0f : expf(sc[k] - mx);
        sc[k] = e;
        sum += e;
    }
    sum = block_reduce<float, false>(sum, red); /* its barriers also publish sc[] to the block */
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float *o = a.out + (size_t)t * (size_t)(a.num_heads * hd) + (size_t)h * (size_t)hd;
    for (int c = threadIdx.x; c < hd; c += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < nkeys; k++) {
            float e = sc[k];
            if (e == 0.0f) continue;
            size_t at = (size_t)kvh * (size_t)hd + (size_t)c;
            float v;
            if (k >= a.cache_slots) v = a.v_chunk[(size_t)(k - a.cache_slots) * (size_t)kvw + at];
            else if (a.kv_bits == 8) v = __fmul_rn((float)a.v_cache8[(size_t)k * (size_t)kvw + at], a.v_scale[(size_t)k * (size_t)groups + at / ND_KV_GROUP]);
            else v = a.v_cache[(size_t)k * (size_t)kvw + at];
            acc += e * v;
        }
        o[c] = acc * inv;
    }
}

cudaError_t nd_cu_launch_attention(const nd_cu_attn_desc &a, cudaStream_t stream)
{
    int blocks = a.T * a.num_heads;
    if (blocks <= 0) return cudaSuccess;
    attention_kernel<<<blocks, 128, (size_t)a.head_dim * sizeof(float), stream>>>(a);
    return cudaGetLastError();
}

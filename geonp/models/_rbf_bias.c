/* geonp's fused RBF bias kernel (float32, CPU), loaded by geonp/models/native.py.
 *
 *   out[h, i, j] = sum over head h's terms t of  w_t * 2**max(r_t * |xq_i - xk_j|^2, min_exp)
 *
 * with r_t = -log2(e) * b_t the base-2 rates (RBFBias.fast_bias).  The torch path evaluates the same
 * sum as separate passes (distances, multiply, clamp, exp2 and a small product per chunk of pairs);
 * here every term of a block of keys is evaluated while the block is in registers and L1, and 2**x
 * is computed inline so the compiler vectorises the whole loop.  Accuracy: 2**x is within about
 * 2 ulp of the float32-rounded value over [-126, 0] (tests/test_native.py compares with float64).
 *
 * Plain C99, no torch headers: compiled on first use with the system C compiler (cc -O3
 * -march=native), or not at all, in which case geonp uses the torch path.
 */
#include <stdint.h>
#include <string.h>

#define GEONP_BLOCK 256

/* 2**x for x in [-126, 0]: 2**round(x) from the exponent bits, 2**f (|f| <= 1/2) by the degree-6
 * polynomial interpolating 2**f at the Chebyshev nodes of [-1/2, 1/2] (relative error below 2.6e-9,
 * a twentieth of float32's rounding step; one term fewer than a Taylor series as accurate). */
static inline float geonp_exp2_nonpos(float x)
{
    const float shifter = 12582912.0f; /* 1.5 * 2**23: x + shifter rounds x to an integer n */
    const float t = x + shifter;
    const float f = x - (t - shifter);
    float p = 1.5461444677438305e-04f;
    p = p * f + 1.3400428177538421e-03f;
    p = p * f + 9.6180566786022890e-03f;
    p = p * f + 5.5503272266701466e-02f;
    p = p * f + 2.4022650922288333e-01f;
    p = p * f + 6.9314720670283370e-01f;
    p = p * f + 1.0f;
    /* t's low mantissa bits hold n + 2**22: shifted to the exponent field, (bits + 127) << 23 is
     * (n + 127) << 23 for -126 <= n <= 0, the bits of 2**n (the higher bits shift out) */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* d2[j] = |q - k_j|^2 for the m keys of a block, from exact differences; k_t points at the block's
 * first key in the transposed [ncol, nk] key coordinates. */
static inline void geonp_sqdist_block(const float *q, const float *k_t, int64_t nk, int64_t ncol, int64_t m,
                                      float *d2)
{
    for (int64_t j = 0; j < m; ++j)
        d2[j] = 0.0f;
    for (int64_t c = 0; c < ncol; ++c) {
        const float qc = q[c];
        const float *k = k_t + c * nk;
        for (int64_t j = 0; j < m; ++j) {
            const float d = qc - k[j];
            d2[j] += d * d;
        }
    }
}

/* xq: [nq, ncol] row-major; xk_t: [ncol, nk] (transposed, so keys are contiguous); terms are ordered by
 * head, head h owning terms head_start[h] .. head_start[h + 1] - 1 (none: its rows are zero);
 * out[h * head_stride + i * row_stride + j].
 *
 * With a table (not NULL), a second bias on a coordinate with few distinct values (time, in frames) is
 * added in the same pass: out[h, i, j] = sum + table[h, iq[i], ik[j]], rounded as the two added apart
 * would be (the sum first, then one float32 addition), without a second [h, nq, nk] buffer and pass.
 * With key_add (not NULL), key_add[j] is added last in the same way (padding: 0 or MASKED). */
void geonp_rbf_bias_f32(const float *xq, int64_t nq, const float *xk_t, int64_t nk, int64_t ncol,
                        const float *rate, const float *weight, const int64_t *head_start, int64_t nheads,
                        float min_exp, const int32_t *iq, const int32_t *ik, const float *table, int64_t uq,
                        int64_t uk, const float *key_add, float *out, int64_t head_stride, int64_t row_stride)
{
    float d2[GEONP_BLOCK];
    float acc[GEONP_BLOCK];
    for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j0 = 0; j0 < nk; j0 += GEONP_BLOCK) {
            const int64_t m = nk - j0 < GEONP_BLOCK ? nk - j0 : GEONP_BLOCK;
            geonp_sqdist_block(xq + i * ncol, xk_t + j0, nk, ncol, m, d2);
            for (int64_t h = 0; h < nheads; ++h) {
                for (int64_t j = 0; j < m; ++j)
                    acc[j] = 0.0f;
                for (int64_t t = head_start[h]; t < head_start[h + 1]; ++t) {
                    const float r = rate[t];
                    const float w = weight[t];
                    for (int64_t j = 0; j < m; ++j) {
                        float e = r * d2[j];
                        e = e < min_exp ? min_exp : e;
                        acc[j] += w * geonp_exp2_nonpos(e);
                    }
                }
                float *o = out + h * head_stride + i * row_stride + j0;
                if (table) {
                    const float *row = table + (h * uq + iq[i]) * uk;
                    const int32_t *kj = ik + j0;
                    for (int64_t j = 0; j < m; ++j)
                        acc[j] = acc[j] + row[kj[j]];
                }
                if (key_add) {
                    const float *ka = key_add + j0;
                    for (int64_t j = 0; j < m; ++j)
                        o[j] = acc[j] + ka[j];
                } else {
                    for (int64_t j = 0; j < m; ++j)
                        o[j] = acc[j];
                }
            }
        }
    }
}

/* Gradient sums of the same bias for a gradient grad[h * head_stride + i * row_stride + j] of the
 * output: for every term t of head h, g_weight[t] += sum_ij grad * 2**e and
 * g_decay[t] += sum_ij grad * d2 * 2**e, with e = max(rate[t] d2, min_exp) (RBFBias.bias_grad turns
 * these into the gradients of the weights and the log-lengthscales).  Sums over a block of keys are
 * taken in float32, across blocks and rows in float64. */
void geonp_rbf_bias_grad_f32(const float *xq, int64_t nq, const float *xk_t, int64_t nk, int64_t ncol,
                             const float *rate, const int64_t *head_start, int64_t nheads, float min_exp,
                             const float *grad, int64_t head_stride, int64_t row_stride,
                             double *g_weight, double *g_decay)
{
    float d2[GEONP_BLOCK];
    for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j0 = 0; j0 < nk; j0 += GEONP_BLOCK) {
            const int64_t m = nk - j0 < GEONP_BLOCK ? nk - j0 : GEONP_BLOCK;
            geonp_sqdist_block(xq + i * ncol, xk_t + j0, nk, ncol, m, d2);
            for (int64_t h = 0; h < nheads; ++h) {
                const float *g = grad + h * head_stride + i * row_stride + j0;
                for (int64_t t = head_start[h]; t < head_start[h + 1]; ++t) {
                    const float r = rate[t];
                    float sw = 0.0f, sd = 0.0f;
#pragma omp simd reduction(+ : sw, sd)
                    for (int64_t j = 0; j < m; ++j) {
                        float e = r * d2[j];
                        e = e < min_exp ? min_exp : e;
                        const float v = g[j] * geonp_exp2_nonpos(e);
                        sw += v;
                        sd += v * d2[j];
                    }
                    g_weight[t] += sw;
                    g_decay[t] += sd;
                }
            }
        }
    }
}

/* out[h, i, j] = table[h, iq[i], ik[j]]: a bias on a coordinate with few distinct values (time, in
 * frames) is evaluated once per pair of distinct values (uq x uk, by the function above) and looked up. */
void geonp_table_bias_f32(const int32_t *iq, int64_t nq, const int32_t *ik, int64_t nk, const float *table,
                          int64_t uq, int64_t uk, int64_t nheads, float *out, int64_t head_stride, int64_t row_stride)
{
    for (int64_t h = 0; h < nheads; ++h) {
        for (int64_t i = 0; i < nq; ++i) {
            const float *restrict row = table + (h * uq + iq[i]) * uk;
            float *restrict o = out + h * head_stride + i * row_stride;
            for (int64_t j = 0; j < nk; ++j)
                o[j] = row[ik[j]];
        }
    }
}

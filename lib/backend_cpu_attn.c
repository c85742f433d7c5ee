/* backend_cpu_attn.c — attention on the CPU, fused per (sample, head) block:
 * the block's q, k, v (T x hd), scores, probabilities and their gradients stay
 * in the worker's scratch (L1/L2). The normaliser is lib/attn_norm.h's, called
 * once per block with the sample's n_valid and the head's alpha.
 *
 * Vector kernels for head dims that are multiples of 16 (all tiers: 16, 32);
 * plain loops otherwise. Products with a probability (or its gradient) skip the
 * zeros of sparse rows through a per-row list of the nonzero columns.
 */
#include <math.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cpu_simd.h"

static inline int round16(int n)
{
	return (n + 15) & ~15;
}

/* 1/sqrt(hd) applied as in PyTorch's `scores / math.sqrt(hd)`: a multiplication
 * by the inverse when sqrt(hd) is a power of two (exactly the same), else a division. */
struct qk_scale {
	float div;
	float mul;
	int exact;
};
static struct qk_scale qk_scale_of(int hd)
{
	struct qk_scale s;
	double r = sqrt((double)hd);
	s.div = (float)r;
	s.mul = 1.0f / s.div;
	int e;
	s.exact = frexp(r, &e) == 0.5; /* power of two */
	return s;
}

/* Y^T packed: YT[c * Tp + j] = Y[j * ldy + c], zero for j >= T (data movement only) */
static void pack_t(float *YT, const float *Y, int ldy, int T, int hd, int Tp)
{
#if defined(__AVX512F__)
	if (hd % 16 == 0) { /* 16 x 16 blocks through registers */
		for (int j0 = 0; j0 < Tp; j0 += 16)
			for (int c0 = 0; c0 < hd; c0 += 16) {
				__m512 r[16];
				for (int j = 0; j < 16; j++)
					r[j] = j0 + j < T ? _mm512_loadu_ps(Y + (size_t)(j0 + j) * ldy + c0)
					                  : _mm512_setzero_ps();
				vtranspose16(r);
				for (int c = 0; c < 16; c++)
					_mm512_storeu_ps(YT + (size_t)(c0 + c) * Tp + j0, r[c]);
			}
		return;
	}
#endif
	for (int c = 0; c < hd; c++) {
		float *o = YT + (size_t)c * Tp;
		for (int j = 0; j < T; j++)
			o[j] = Y[(size_t)j * ldy + c];
		for (int j = T; j < Tp; j++)
			o[j] = 0;
	}
}

/* C[i, j] = sum_c X[i, c] Y[j, c] (then scaled) for i, j < T; C row stride T.
 * YT is Y packed by pack_t. The product is sb_cpu_gemm's (one FMA chain over c per
 * element, in order from 0), over the Tp packed columns into buf [T][Tp] (or straight into
 * C when T = Tp); the scaling follows, element by element. */
static void rowdot(float *C, const float *X, int ldx, const float *YT, int T, int hd, int Tp, struct qk_scale sc,
                   int apply_scale, float *buf)
{
	float *D = T == Tp ? C : buf;
	sb_cpu_gemm(D, Tp, X, ldx, 1, YT, Tp, T, Tp, hd, NULL, 0);
	for (int i = 0; i < T; i++) {
		const float *d = D + (size_t)i * Tp;
		float *c = C + (size_t)i * T;
		int j = 0;
		if (apply_scale && sc.exact)
			for (; j + VE <= T; j += VE)
				vstore_e(c + j, vload_e(d + j) * sc.mul);
		else if (apply_scale)
			for (; j + VE <= T; j += VE)
				vstore_e(c + j, vload_e(d + j) / sc.div);
		else if (D != C)
			for (; j + VE <= T; j += VE)
				vstore_e(c + j, vload_e(d + j));
		else
			j = T;
		for (; j < T; j++)
			c[j] = !apply_scale ? d[j] : sc.exact ? d[j] * sc.mul : d[j] / sc.div;
	}
}

/* the number of a[0..n) that are not 0 (NaN counts), VE at a time */
static inline int count_nonzero(const float *a, int n)
{
	vei acc = {0};
	int j = 0;
	for (; j + VE <= n; j += VE)
		acc -= (vei)(vload_e(a + j) != vzero_e()); /* -1 in each lane that is nonzero */
	int c = 0;
	for (int l = 0; l < VE; l++)
		c += acc[l];
	for (; j < n; j++)
		c += a[j] != 0.0f;
	return c;
}

/* nz[0..n) = the columns j < T with a[j] != 0 (NaN included), in order; returns n. Writes
 * nz[0..T) at most. With AVX-512, 16 columns at a time through a register compress (the
 * memory form is microcoded and slow on some CPUs); with AVX2, 8 compares at a time; the
 * same list either way. */
static inline int nonzero_list(int *nz, const float *a, int T)
{
	int n = 0, j = 0;
#if defined(__AVX512F__)
	__m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	for (; j + 16 <= T; j += 16) { /* n <= j: the 16 stored ints end by j + 16 <= T */
		__mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(a + j), _mm512_setzero_ps(), _CMP_NEQ_UQ);
		_mm512_storeu_si512(nz + n, _mm512_maskz_compress_epi32(m, idx));
		n += __builtin_popcount(m);
		idx = _mm512_add_epi32(idx, _mm512_set1_epi32(16));
	}
#elif defined(__AVX2__)
	for (; j + 8 <= T; j += 8) { /* 8 compares at once, then the set bits in order */
		unsigned m = (unsigned)_mm256_movemask_ps(
		    _mm256_cmp_ps(_mm256_loadu_ps(a + j), _mm256_setzero_ps(), _CMP_NEQ_UQ));
		for (; m; m &= m - 1)
			nz[n++] = j + __builtin_ctz(m);
	}
#endif
	for (; j < T; j++) {
		nz[n] = j;
		n += a[j] != 0.0f;
	}
	return n;
}

/* O[i, :hd] = sum_j A[i, j] Y[j, :hd]; A row stride lda. Blocks of 4 rows that are
 * mostly nonzero (softmax) are dense: a run of consecutive dense blocks is one
 * sb_cpu_gemm (one FMA chain over j per element, in order from 0, as the 4-row loop it
 * replaces); sparse rows (top-k, sparsemax, entmax) loop over a list of their nonzeros. */
static void rowmix(float *O, int ldo, const float *A, int lda, const float *Y, int ldy, int T, int hd, int *nz)
{
	int nvec = hd / VE; /* hd is a multiple of VL (16), so of VE */
	for (int i0 = 0; i0 < T;) {
		int i1 = i0; /* [i0, i1): the run of dense 4-row blocks */
		while (i1 + 4 <= T) {
			int cnt = 0;
			for (int r = 0; r < 4; r++)
				cnt += count_nonzero(A + (size_t)(i1 + r) * lda, T);
			if (2 * cnt <= 4 * T)
				break;
			i1 += 4;
		}
		if (i1 > i0) {
			sb_cpu_gemm(O + (size_t)i0 * ldo, ldo, A + (size_t)i0 * lda, lda, 1, Y, ldy, i1 - i0, hd, T, NULL,
			            0);
			i0 = i1;
			continue;
		}
		int nr = T - i0 < 4 ? T - i0 : 4;
		for (int r = 0; r < nr; r++) {
			int i = i0 + r;
			const float *a = A + (size_t)i * lda;
			int n = nonzero_list(nz, a, T);
			float *o = O + (size_t)i * ldo;
			for (int v = 0; v < nvec; v++) {
				/* two accumulators to halve the FMA dependency chain */
				ve acc0 = vzero_e(), acc1 = vzero_e();
				int q = 0;
				for (; q + 2 <= n; q += 2) {
					int j0 = nz[q], j1 = nz[q + 1];
					acc0 = vfma_e(vset1_e(a[j0]), vload_e(Y + (size_t)j0 * ldy + v * VE), acc0);
					acc1 = vfma_e(vset1_e(a[j1]), vload_e(Y + (size_t)j1 * ldy + v * VE), acc1);
				}
				if (q < n) {
					int j0 = nz[q];
					acc0 = vfma_e(vset1_e(a[j0]), vload_e(Y + (size_t)j0 * ldy + v * VE), acc0);
				}
				vstore_e(o + v * VE, acc0 + acc1);
			}
		}
		i0 += nr;
	}
}

/* ---- plain reference loops for head dims that are not multiples of 16 ---- */

static void rowdot_plain(float *C, const float *X, int ldx, const float *Y, int ldy, int T, int hd, struct qk_scale sc,
                         int apply_scale)
{
	for (int i = 0; i < T; i++)
		for (int j = 0; j < T; j++) {
			float s = 0;
			for (int c = 0; c < hd; c++)
				s = sfma(X[(size_t)i * ldx + c], Y[(size_t)j * ldy + c], s);
			if (apply_scale)
				s = sc.exact ? s * sc.mul : s / sc.div;
			C[(size_t)i * T + j] = s;
		}
}

static void rowmix_plain(float *O, int ldo, const float *A, int lda, const float *Y, int ldy, int T, int hd)
{
	for (int i = 0; i < T; i++)
		for (int c = 0; c < hd; c++) {
			float s = 0.0f;
			for (int j = 0; j < T; j++)
				s = sfma(A[(size_t)i * lda + j], Y[(size_t)j * ldy + c], s);
			O[(size_t)i * ldo + c] = s;
		}
}

/* ------------------------------------------------------------------ ops */

static float head_alpha(const struct sb_norm *nm, const float *alpha, int h)
{
	return alpha ? alpha[h] : (float)nm->alpha;
}

int sb_cpu_attention_forward(struct sb_ctx *ctx, float *out, float *S, float *P, float *aux, const float *qkv,
                             const int32_t *nvalid, const float *alpha, const struct sb_norm *nm, int B, int T, int d,
                             int NH, struct sb_err *err)
{
	int hd = d / NH, Tp = round16(T), d3 = 3 * d;
	int fast = hd % VL == 0;
	struct qk_scale sc = qk_scale_of(hd);
	float *KT = sb_cpu_scratch(ctx, ((size_t)hd * Tp + (size_t)T * Tp + (size_t)T) * sizeof(float) + 256);
	if (!KT)
		return SB_ERR(err, SB_EINTERNAL, "attention: out of memory for scratch");
	float *buf = KT + (size_t)hd * Tp; /* rowdot's [T][Tp] */
	int *nz = (int *)(buf + (size_t)T * Tp);
	size_t TT = (size_t)T * T;
	for (int b = 0; b < B; b++) {
		const float *qb = qkv + (size_t)b * T * d3;
		int nv = nvalid ? nvalid[b] : T;
		for (int h = 0; h < NH; h++) {
			const float *q = qb + h * hd, *k = qb + d + h * hd, *v = qb + 2 * d + h * hd;
			size_t blk = (size_t)b * NH + h;
			float *Sb = S + blk * TT, *Pb = P + blk * TT;
			if (fast) {
				pack_t(KT, k, d3, T, hd, Tp);
				rowdot(Sb, q, d3, KT, T, hd, Tp, sc, 1, buf);
			} else {
				rowdot_plain(Sb, q, d3, k, d3, T, hd, sc, 1);
			}
			int rc = sb_norm_forward(nm, Pb, aux + blk * (size_t)T * SB_NORM_AUX, Sb, T, T, nv,
			                         head_alpha(nm, alpha, h), err);
			if (rc) {
				sb_err_prefix(err, "attention (sample %d, head %d)", b, h);
				return rc;
			}
			float *o = out + (size_t)b * T * d + h * hd;
			if (fast)
				rowmix(o, d, Pb, T, v, d3, T, hd, nz);
			else
				rowmix_plain(o, d, Pb, T, v, d3, T, hd);
		}
	}
	return 0;
}

void sb_cpu_attention_backward(struct sb_ctx *ctx, float *dqkv, float *dalpha, const float *dout, const float *qkv,
                               const float *S, const float *P, const float *aux, const int32_t *nvalid,
                               const float *alpha, const struct sb_norm *nm, int B, int T, int d, int NH)
{
	int hd = d / NH, Tp = round16(T), d3 = 3 * d;
	int fast = hd % VL == 0;
	struct qk_scale sc = qk_scale_of(hd);
	size_t TT = (size_t)T * T;
	float *VT = sb_cpu_scratch(ctx, ((size_t)hd * Tp + TT + (size_t)T * Tp + (size_t)T) * sizeof(float) + 256);
	if (!VT)
		return; /* scratch is reserved by the forward pass of the same sizes */
	float *dP = VT + (size_t)hd * Tp;
	float *buf = dP + TT; /* rowdot's [T][Tp] */
	int *nz = (int *)(buf + (size_t)T * Tp);
	int has_alpha = nm->kind == SB_NORM_ADAPTIVE || nm->kind == SB_NORM_ENTMAX_BISECT;
	for (int b = 0; b < B; b++) {
		const float *qb = qkv + (size_t)b * T * d3;
		float *gb = dqkv + (size_t)b * T * d3;
		const float *gob = dout + (size_t)b * T * d;
		int nv = nvalid ? nvalid[b] : T;
		for (int h = 0; h < NH; h++) {
			const float *q = qb + h * hd, *k = qb + d + h * hd, *v = qb + 2 * d + h * hd;
			const float *go = gob + h * hd;
			float *dq = gb + h * hd, *dk = gb + d + h * hd, *dv = gb + 2 * d + h * hd;
			size_t blk = (size_t)b * NH + h;
			const float *Pb = P + blk * TT, *Sb = S + blk * TT;
			/* dP = dO V^T */
			if (fast) {
				pack_t(VT, v, d3, T, hd, Tp);
				rowdot(dP, go, d, VT, T, hd, Tp, sc, 0, buf);
			} else {
				rowdot_plain(dP, go, d, v, d3, T, hd, sc, 0);
			}
			/* dV = P^T dO: P read transposed through its strides */
			sb_cpu_gemm(dv, d3, Pb, 1, T, go, d, T, hd, T, NULL, 0);
			/* dS (in place) */
			double da = 0;
			sb_norm_backward(nm, dP, has_alpha ? &da : NULL, dP, Pb, aux + blk * (size_t)T * SB_NORM_AUX,
			                 Sb, T, T, nv, head_alpha(nm, alpha, h));
			if (dalpha && has_alpha)
				dalpha[h] += (float)da;
			/* through the 1/sqrt(hd) scaling */
			size_t e = 0;
			if (sc.exact) {
				for (; e + VE <= TT; e += VE)
					vstore_e(dP + e, vload_e(dP + e) * sc.mul);
				for (; e < TT; e++)
					dP[e] *= sc.mul;
			} else {
				for (; e + VE <= TT; e += VE)
					vstore_e(dP + e, vload_e(dP + e) / sc.div);
				for (; e < TT; e++)
					dP[e] /= sc.div;
			}
			/* dQ = dS K (sparse rows skip zeros), dK = dS^T Q (transposed through strides) */
			if (fast)
				rowmix(dq, d3, dP, T, k, d3, T, hd, nz);
			else
				rowmix_plain(dq, d3, dP, T, k, d3, T, hd);
			sb_cpu_gemm(dk, d3, dP, 1, T, q, d3, T, hd, T, NULL, 0);
		}
	}
}

void sb_cpu_attention_stats(struct sb_ctx *ctx, struct sb_attn_stats *st, const float *P, const int32_t *nvalid, int B,
                            int NH, int T)
{
	size_t TT = (size_t)T * T;
	for (int b = 0; b < B; b++) {
		int nv = nvalid ? nvalid[b] : T;
		for (int h = 0; h < NH; h++) {
			sb_norm_stats(P + ((size_t)b * NH + h) * TT, T, T, nv, &st->nonzero, &st->valid_total,
			              &st->entropy_sum);
			st->rows += T;
		}
	}
}

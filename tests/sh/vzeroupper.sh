#!/usr/bin/env bash
# vzeroupper.sh — no function of the programs uses ymm/zmm registers without ever executing
# vzeroupper. GCC 12 with -march=native (AVX-512) built lib/rng.c's Philox counter in a ymm
# register with an EVEX store and returned without vzeroupper; the dirty upper halves then
# made every SSE-encoded libm call after it (log, exp, cos) about 25 times slower until the
# next vzeroupper (sb_rng_normal: 569 ns, 127 ns after the fix). A static check of the
# disassembly (objdump): a function that writes a ymm/zmm register (the destination, AT&T's
# last operand) and contains no vzeroupper is listed, except the AVX-512 helpers below that take __m512 arguments (only ever called from
# AVX-512 functions, which end with vzeroupper). The check is shown to catch the old rng.c.
. "$(dirname "$0")/../shlib.sh"
command -v objdump >/dev/null || { t_result 1 "objdump (binutils) is installed"; t_done; }
# helpers with __m512 parameters, called only inside AVX-512 kernels (lib/attn_norm_avx512.c)
ALLOW='esum|arg_minmax'
scan() { # OBJECT...: "OBJECT <function>" for each function writing ymm/zmm, with no vzeroupper
	for o in "$@"; do
		objdump -d --no-show-raw-insn "$o" | awk -v B="$o" '
			/^[0-9a-f]+ <.*>:$/ { if (fn != "" && wide && !vz) print B, fn; fn = $2; wide = 0; vz = 0; next }
			/,%[yz]mm[0-9]+(\{%k[0-7]\})?(\{z\})?$/ { wide = 1 }
			/vzeroupper/ { vz = 1 }
			END { if (fn != "" && wide && !vz) print B, fn }'
	done | grep -Ev "<($ALLOW)>:"
}
bins=$(ls "$TOP"/bin/sb-* 2>/dev/null)
[ -n "$bins" ] || { t_result 1 "the programs are built (make)"; t_done; }
scan $bins >"$T/found"
[ ! -s "$T/found" ]
t_result $? "every function of bin/sb-* that writes ymm/zmm registers executes vzeroupper somewhere" "$(head -n 5 "$T/found" | tr '\n' ' ')"
# the check itself: rng.c as it was (cut down: the counter packed from 64-bit values into an array, the Philox function in the
# same file, so GCC drops the vzeroupper before the call and after it)
cat >"$T/old_rng.c" <<'C'
#include <stdint.h>
struct rng { uint32_t key[2], buf[4]; uint64_t stream, block; int pos; };
__attribute__((noinline)) void philox(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2])
{
	uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k0 = key[0], k1 = key[1];
	for (int i = 0; i < 10; i++) {
		uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
		c[0] = n0, c[1] = (uint32_t)p1, c[2] = n2, c[3] = (uint32_t)p0;
		k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
	}
	for (int i = 0; i < 4; i++)
		out[i] = c[i];
}
static void gen_block(uint32_t out[4], const uint32_t key[2], uint64_t stream, uint64_t block)
{
	uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
	philox(out, ctr, key);
}
uint32_t rng_u32(struct rng *r)
{
	if (r->pos >= 4) {
		gen_block(r->buf, r->key, r->stream, r->block++);
		r->pos = 0;
	}
	return r->buf[r->pos++];
}
C
if cc -O2 -march=native -c "$T/old_rng.c" -o "$T/old_rng.o" 2>/dev/null && objdump -d "$T/old_rng.o" | grep -q '%ymm'; then
	scan "$T/old_rng.o" | grep -q '<rng_u32>:'
	t_result $? "the scan flags the old counter packing (it compiled to ymm code without vzeroupper here)"
else
	t_result 0 "the old counter packing compiles without ymm on this machine (nothing for the scan to flag; the check above still holds)"
fi
t_done

"""A Python replay of lib/rng (Philox-4x32-10 keyed by (seed, purpose), counter
(block, stream)) and of sb_rng_below, used to recompute sb-stats' bootstrap draws
(the documented draw order of lib/stats.h) in the reference generators."""
M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF
SB_RNG_BOOTSTRAP = 7


def philox(ctr, key):
    c = list(ctr)
    k = list(key)
    for i in range(10):
        if i:
            k = [(k[0] + W0) & MASK, (k[1] + W1) & MASK]
        p0 = M0 * c[0]
        p1 = M1 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & MASK, p1 & MASK, ((p0 >> 32) ^ c[3] ^ k[1]) & MASK, p0 & MASK]
    return c


class Cursor:
    def __init__(self, seed, purpose, stream):
        self.key = [seed & MASK, (purpose ^ (((seed >> 32) * 0x9E3779B9) & MASK)) & MASK]
        self.stream = stream
        self.block = 0
        self.buf = []

    def u32(self):
        if not self.buf:
            ctr = [self.block & MASK, self.block >> 32, self.stream & MASK, self.stream >> 32]
            self.buf = philox(ctr, self.key)
            self.block += 1
        return self.buf.pop(0)

    def below(self, n):  # n < 2^32 (Lemire with rejection)
        if n <= 1:
            return 0
        m = self.u32() * n
        lo = m & MASK
        if lo < n:
            t = ((1 << 32) - n) % n
            while lo < t:
                m = self.u32() * n
                lo = m & MASK
        return m >> 32


def bootstrap_indices(seed, n, resamples, stream=0):
    """The index sets of sb_stats_bootstrap_ci: resample b, index i in order."""
    cur = Cursor(seed, SB_RNG_BOOTSTRAP, stream)
    return [[cur.below(n) for _ in range(n)] for _ in range(resamples)]

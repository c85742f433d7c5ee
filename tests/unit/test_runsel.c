/* test_runsel — the run-selection rule (lib/runsel.h) on hand-made sequences, against a direct
 * transcription of the rule on random ones, and the dense keys of sb_runsel_keys. */
#include <stdint.h>

#include "../harness.h"
#include "runsel.h"

enum { F = SB_RUNSEL_FILTERED, S = SB_RUNSEL_SUPERSEDED, W = SB_RUNSEL_WINNER, N = SB_RUNSEL_WINNER_NOT_WHOLE };

static const char *disp_name(int d)
{
	return d == F ? "filtered" : d == S ? "superseded" : d == W ? "winner" : d == N ? "winner-not-whole" : "?";
}

/* one hand-made case: runs "key completed whole" in input order; the dispositions, what each
 * run supersedes, and each key's run that the rule gives */
struct run {
	int key, completed, whole;
};
static void hand(const char *name, int n_keys, int n, const struct run *runs, const int *want_disp, const int *want_sup,
                 const int *want_key_run)
{
	struct sb_runsel_item it[16];
	int key_run[8];
	struct sb_err err = {0};
	for (int i = 0; i < n; i++)
		it[i] =
		    (struct sb_runsel_item){.key = runs[i].key, .completed = runs[i].completed, .whole = runs[i].whole};
	int rc = sb_runsel_resolve(it, (size_t)n, n_keys, key_run, &err);
	int ok = rc == 0;
	char got[512] = "";
	size_t len = 0;
	for (int i = 0; ok && i < n; i++) {
		ok = (int)it[i].disp == want_disp[i] && it[i].supersedes == want_sup[i];
		len += (size_t)snprintf(got + len, sizeof got - len, " %s/%d", disp_name((int)it[i].disp),
		                        it[i].supersedes);
	}
	for (int k = 0; ok && k < n_keys; k++)
		ok = key_run[k] == want_key_run[k];
	SB_CHECK(ok, "%s (rc %d%s; got%s; key runs %d %d %d)", name, rc, err.msg, got, key_run[0],
	         n_keys > 1 ? key_run[1] : -9, n_keys > 2 ? key_run[2] : -9);
}

static void hand_cases(void)
{
	hand("a failed rerun after a completed run: the completed run wins", 1, 2, (struct run[]){{0, 1, 1}, {0, 0, 0}},
	     (int[]){W, F}, (int[]){-1, -1}, (int[]){0});
	hand("a failed rerun (not whole either) before and after: the completed one wins", 1, 3,
	     (struct run[]){{0, 0, 0}, {0, 1, 1}, {0, 0, 1}}, (int[]){F, W, F}, (int[]){-1, -1, -1}, (int[]){1});
	hand("a completed rerun after a completed run: the later wins, the earlier is superseded", 1, 2,
	     (struct run[]){{0, 1, 1}, {0, 1, 1}}, (int[]){S, W}, (int[]){-1, 0}, (int[]){1});
	hand("a later completed but partial run: the key has no run, the earlier is superseded", 1, 2,
	     (struct run[]){{0, 1, 1}, {0, 1, 0}}, (int[]){S, N}, (int[]){-1, 0}, (int[]){-1});
	hand("a partial run, then a failed rerun: still no run (the partial one counts)", 1, 3,
	     (struct run[]){{0, 1, 1}, {0, 1, 0}, {0, 0, 1}}, (int[]){S, N, F}, (int[]){-1, 0, -1}, (int[]){-1});
	hand("a partial run, then a completed whole rerun: the rerun wins", 1, 2, (struct run[]){{0, 1, 0}, {0, 1, 1}},
	     (int[]){S, W}, (int[]){-1, 0}, (int[]){1});
	hand("only failed runs: no winner", 1, 3, (struct run[]){{0, 0, 1}, {0, 0, 0}, {0, 0, 1}}, (int[]){F, F, F},
	     (int[]){-1, -1, -1}, (int[]){-1});
	hand("three completed runs: each supersedes the one before", 1, 3,
	     (struct run[]){{0, 1, 1}, {0, 1, 1}, {0, 1, 1}}, (int[]){S, S, W}, (int[]){-1, 0, 1}, (int[]){2});
	hand("interleaved keys", 3, 8,
	     (struct run[]){{0, 1, 1}, {1, 1, 1}, {2, 0, 1}, {0, 0, 1}, {1, 1, 1}, {2, 1, 0}, {0, 1, 1}, {1, 0, 0}},
	     (int[]){S, S, F, F, W, N, W, F}, (int[]){-1, -1, -1, -1, 1, -1, 0, -1}, (int[]){6, 4, -1});
	hand("a key with no run at all", 3, 2, (struct run[]){{2, 1, 1}, {0, 1, 1}}, (int[]){W, W}, (int[]){-1, -1},
	     (int[]){1, -1, 0});

	struct sb_runsel_item it[2] = {{.key = 0, .completed = true, .whole = true}, {.key = 2, .completed = true}};
	struct sb_err err = {0};
	int rc = sb_runsel_resolve(it, 2, 2, NULL, &err);
	SB_CHECK(rc == SB_EINTERNAL && strstr(err.msg, "key 2"), "a key out of range is refused (rc %d: %s)", rc,
	         err.msg);
	rc = sb_runsel_resolve(NULL, 0, 0, NULL, &err);
	SB_CHECK(rc == 0, "no runs, no keys (rc %d)", rc);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t draw(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* The rule as PROTOCOL A6 step 2 / A7 state it, key by key: drop the runs whose training did
 * not complete; of the rest the last in input order wins, the others are superseded (each by
 * the next completed run of its key); the key has its run only when the winner is whole. */
static void reference(const struct sb_runsel_item *it, int n, int n_keys, int *disp, int *sup, int *key_run)
{
	for (int k = 0; k < n_keys; k++) {
		int last = -1;
		for (int i = n - 1; i >= 0 && last < 0; i--)
			if (it[i].key == k && it[i].completed)
				last = i;
		key_run[k] = last >= 0 && it[last].whole ? last : -1;
		for (int i = 0; i < n; i++) {
			if (it[i].key != k)
				continue;
			sup[i] = -1;
			if (!it[i].completed) {
				disp[i] = F;
				continue;
			}
			disp[i] = i == last ? (it[i].whole ? W : N) : S;
			for (int j = i - 1; j >= 0 && sup[i] < 0; j--)
				if (it[j].key == k && it[j].completed)
					sup[i] = j;
		}
	}
}

static void random_cases(void)
{
	enum { CASES = 5000, MAXN = 40, MAXK = 6 };
	int bad = 0, first_bad = -1, max_n = 0;
	for (int c = 0; c < CASES; c++) {
		int n = (int)draw(MAXN + 1), n_keys = 1 + (int)draw(MAXK);
		/* vary how often runs fail and are partial, so that every disposition is common */
		uint32_t p_fail = draw(4), p_part = draw(4);
		struct sb_runsel_item it[MAXN];
		int disp[MAXN], sup[MAXN], key_run[MAXK], want_key_run[MAXK];
		for (int i = 0; i < n; i++)
			it[i] = (struct sb_runsel_item){.key = (int)draw((uint32_t)n_keys),
			                                .completed = draw(4) >= p_fail,
			                                .whole = draw(4) >= p_part};
		reference(it, n, n_keys, disp, sup, want_key_run);
		struct sb_err err = {0};
		int ok = sb_runsel_resolve(it, (size_t)n, n_keys, key_run, &err) == 0;
		for (int i = 0; ok && i < n; i++)
			ok = (int)it[i].disp == disp[i] && it[i].supersedes == sup[i];
		for (int k = 0; ok && k < n_keys; k++)
			ok = key_run[k] == want_key_run[k];
		if (!ok && !bad++)
			first_bad = c;
		if (n > max_n)
			max_n = n;
	}
	SB_CHECK(bad == 0,
	         "%d random sequences (up to %d runs, %d keys) as the rule's transcription: %d differ "
	         "(first: case %d)",
	         CASES, max_n, MAXK, bad, first_bad);
}

/* sb_runsel_keys over small integers: equal values share a key, keys count first appearances */
static int int_cmp(int a, int b, void *ctx)
{
	const int *v = ctx;
	return (v[a] > v[b]) - (v[a] < v[b]);
}

static int keys_ok(const int *val, int n, int range, const struct sb_runsel_item *it, int n_keys)
{
	int *key_of = malloc((size_t)range * sizeof *key_of), next = 0, ok = 1;
	if (!key_of)
		return 0;
	for (int v = 0; v < range; v++)
		key_of[v] = -1;
	for (int i = 0; i < n && ok; i++) {
		if (key_of[val[i]] < 0)
			key_of[val[i]] = next++;
		ok = it[i].key == key_of[val[i]];
	}
	free(key_of);
	return ok && n_keys == next;
}

static void keys_cases(void)
{
	int sizes[] = {0, 1, 2, 3, 7, 31, 64, 97, 1000, 100003};
	for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
		int n = sizes[s], range = n < 10 ? 3 : n / 3 + 1;
		int *val = malloc((size_t)(n ? n : 1) * sizeof *val);
		struct sb_runsel_item *it = calloc((size_t)(n ? n : 1), sizeof *it);
		if (!val || !it) {
			SB_CHECK(0, "out of memory");
			return;
		}
		for (int i = 0; i < n; i++)
			val[i] = (int)draw((uint32_t)range);
		int n_keys = -1;
		struct sb_err err = {0};
		int rc = sb_runsel_keys(it, (size_t)n, int_cmp, val, &n_keys, &err);
		SB_CHECK(rc == 0 && keys_ok(val, n, range, it, n_keys),
		         "keys of %d runs over %d values: equal values share a key, numbered by first appearance "
		         "(%d keys, rc %d)",
		         n, range, n_keys, rc);
		free(val);
		free(it);
	}
}

int main(void)
{
	hand_cases();
	random_cases();
	keys_cases();
	return sb_test_done();
}

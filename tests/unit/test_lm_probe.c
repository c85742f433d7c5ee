/* test_lm_probe — the retrieval battery's generators and the training mixture:
 * exact lengths, well-formed turns, the answer really present in the haystack,
 * determinism, distinct keys, depths, and the corpus split guard.
 * SB_LM_DUMP=1 prints one probe per task (for eyes). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "../harness.h"
#include "lm_data.h"
#include "hash.h"
#include "json.h"
#include "lm_eval.h"
#include "lm_probe.h"
#include "tensor.h"
#include "rng.h"

/* A small essay haystack: deterministic English-like lines. */
static uint8_t *make_essay(size_t n)
{
	static const char *const words[] = {"the", "king", "shall", "speak", "of", "love", "and", "war",
					    "my",  "lord", "good", "night", "sweet", "prince", "come", "away"};
	uint8_t *b = malloc(n);
	struct sb_rng r;
	sb_rng_init(&r, 7, SB_RNG_USER, 0);
	size_t i = 0;
	int col = 0;
	while (i < n) {
		const char *w = words[sb_rng_below(&r, 16)];
		for (size_t j = 0; w[j] && i < n; j++)
			b[i++] = (uint8_t)w[j];
		col++;
		if (i < n)
			b[i++] = col % 9 == 0 ? '\n' : ' ';
	}
	return b;
}

static int count_sub(const uint8_t *t, int n, const char *s)
{
	int L = (int)strlen(s), c = 0;
	for (int i = 0; i + L <= n; i++)
		if (memcmp(t + i, s, (size_t)L) == 0)
			c++;
	return c;
}

int main(void)
{
	size_t n_hay = 20000;
	uint8_t *hay = make_essay(n_hay);
	int dump = getenv("SB_LM_DUMP") != NULL;
	const int lens[] = {256, 512, 513, 1024};

	for (int task = 0; task < SB_LM_NTASKS; task++) {
		int ok_len = 1, ok_turns = 1, ok_det = 1, ok_present = 1, ok_depth = 1;
		char why[256] = "";
		for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
			int len = lens[li];
			for (int i = 0; i < 40; i++) {
				struct sb_lm_probe p, q;
				struct sb_err err = {0};
				double d = sb_lm_probe_depth(i, 40);
				if (sb_lm_probe_make(task, len, hay, n_hay, 11, SB_RNG_SYNTH, (uint64_t)i, d, &p, &err)) {
					ok_len = 0;
					snprintf(why, sizeof why, "len %d probe %d: %s", len, i, err.msg);
					continue;
				}
				if (p.len != len)
					ok_len = 0;
				/* turns: contiguous, prompts non-empty, answers end in '\n' and hold no other '\n' */
				int pos = 0;
				for (int k = 0; k < p.n_turns; k++) {
					if (p.prompt_beg[k] != pos || p.answer_beg[k] <= p.prompt_beg[k] ||
					    p.answer_end[k] <= p.answer_beg[k] + 1 || p.text[p.answer_end[k] - 1] != '\n')
						ok_turns = 0;
					for (int j = p.answer_beg[k]; j < p.answer_end[k] - 1; j++)
						if (p.text[j] == '\n')
							ok_turns = 0;
					pos = p.answer_end[k];
				}
				if (pos != p.len)
					ok_turns = 0;
				/* needle answers are retrievable: "KEY=VALUE" occurs in the prompt of turn 0 */
				if (task <= SB_LM_NIAH_MULTIKEY_3 || task == SB_LM_NIAH_MULTIQUERY) {
					for (int k = 0; k < p.n_turns; k++) {
						char kv[128];
						int ql = p.answer_beg[k] - p.prompt_beg[k];
						/* the query is "\n?KEY=" at the end of the prompt */
						const uint8_t *qs = p.text + p.answer_beg[k];
						int j = 1;
						while (j < ql && qs[-j] != '?')
							j++;
						int klen = j - 1; /* KEY= */
						int alen = p.answer_end[k] - p.answer_beg[k] - 1;
						snprintf(kv, sizeof kv, "#%.*s%.*s\n", klen, (const char *)qs - klen, alen,
							 (const char *)qs);
						if (count_sub(p.text, p.answer_beg[0], kv) != 1) {
							ok_present = 0;
							snprintf(why, sizeof why, "task %s len %d probe %d: '%s' occurs %d times",
								 sb_lm_task_name(task), len, i, kv,
								 count_sub(p.text, p.answer_beg[0], kv));
						}
					}
				}
				if (sb_lm_task_is_needle(task) && fabs(p.depth - d) > 1e-12)
					ok_depth = 0;
				/* determinism */
				if (sb_lm_probe_make(task, len, hay, n_hay, 11, SB_RNG_SYNTH, (uint64_t)i, d, &q, &err) ||
				    q.len != p.len || memcmp(q.text, p.text, (size_t)p.len) != 0)
					ok_det = 0;
				if (dump && i == 3 && len == 512)
					printf("# ---- %s (depth %.3f)\n%.*s\n# ----\n", sb_lm_task_name(task), p.depth,
					       p.len, (const char *)p.text);
				sb_lm_probe_free(&q);
				sb_lm_probe_free(&p);
			}
		}
		const char *nm = sb_lm_task_name(task);
		SB_CHECK(ok_len, "%s: 160 probes made with the exact length %s", nm, why);
		SB_CHECK(ok_turns, "%s: turns contiguous, answers end in newline", nm);
		SB_CHECK(ok_present, "%s: every queried key-value line occurs exactly once in the haystack %s", nm, why);
		SB_CHECK(ok_depth, "%s: needle depth as requested", nm);
		SB_CHECK(ok_det, "%s: probes are deterministic", nm);
		/* the minimum length is honoured and a shorter one is refused */
		struct sb_lm_probe p;
		struct sb_err err = {0};
		int m = sb_lm_task_min_len(task);
		int rc_min = sb_lm_probe_make(task, m, hay, n_hay, 3, SB_RNG_SYNTH, 0, 0.5, &p, &err);
		sb_lm_probe_free(&p);
		int rc_short = sb_lm_probe_make(task, m - 1, hay, n_hay, 3, SB_RNG_SYNTH, 0, 0.5, &p, &err);
		SB_CHECK(rc_min == 0 && rc_short == SB_EUSAGE, "%s: min length %d works (%d), %d refused (%d)", nm, m,
			 rc_min, m - 1, rc_short);
	}

	/* training-only dense recall tasks */
	for (int task = SB_LM_NTASKS; task < SB_LM_NALLTASKS; task++) {
		int ok_len = 1, ok_det = 1, ok_q = 1, nq_min = 1 << 30;
		for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
			for (int i = 0; i < 20; i++) {
				struct sb_lm_probe p, q;
				struct sb_err err = {0};
				if (sb_lm_probe_make(task, lens[li], hay, n_hay, 4, SB_RNG_DATA, (uint64_t)i, -1, &p, &err)) {
					ok_len = 0;
					continue;
				}
				ok_len &= p.len == lens[li] && p.n_turns == 1 && p.answer_end[0] == p.len &&
					  p.text[p.len - 1] == '\n';
				if (sb_lm_probe_make(task, lens[li], hay, n_hay, 4, SB_RNG_DATA, (uint64_t)i, -1, &q, &err) ||
				    memcmp(p.text, q.text, (size_t)p.len))
					ok_det = 0;
				/* every query's answer is given by exactly one earlier line */
				int nq = 0;
				for (int j = 0; j + 1 < p.len; j++) {
					if (task == SB_LM_KV_RECALL && p.text[j] == '\n' && p.text[j + 1] == '?') {
						const uint8_t *e = memchr(p.text + j + 1, '\n', (size_t)(p.len - j - 1));
						char kv[64];
						snprintf(kv, sizeof kv, "\n#%.*s\n", (int)(e - (p.text + j + 2)), (const char *)p.text + j + 2);
						ok_q &= count_sub(p.text, p.len, kv) == 1;
						nq++;
					}
					if (task == SB_LM_QA_RECALL && p.text[j] == '\n' && p.text[j + 1] == 'Q')
						nq++;
				}
				if (nq < nq_min)
					nq_min = nq;
				sb_lm_probe_free(&p);
				sb_lm_probe_free(&q);
			}
		SB_CHECK(ok_len && ok_det, "%s: exact lengths, the last query is turn 0, deterministic", sb_lm_task_name(task));
		SB_CHECK(ok_q && nq_min >= 2, "%s: every query answered by exactly one earlier line; >= 2 queries per text (min %d)",
			 sb_lm_task_name(task), nq_min);
	}

	/* specific answers */
	{
		struct sb_lm_probe p;
		struct sb_err err = {0};
		sb_lm_probe_make(SB_LM_NIAH_MULTIVALUE, 512, hay, n_hay, 5, SB_RNG_SYNTH, 1, 0.3, &p, &err);
		/* the four values in order of appearance */
		const uint8_t *a = p.text + p.answer_beg[0];
		int ok = 1, prev = -1;
		for (int v = 0; v < 4; v++) {
			char needle[16];
			snprintf(needle, sizeof needle, "=%.5s\n", (const char *)a + 6 * v);
			int at = -1;
			for (int i = 0; i + 7 <= p.answer_beg[0]; i++)
				if (memcmp(p.text + i, needle, 7) == 0)
					at = i;
			if (at <= prev)
				ok = 0;
			prev = at;
		}
		SB_CHECK(ok, "niah_multivalue: answer lists the values in order of appearance ('%.23s')", (const char *)a);
		SB_CHECK(sb_lm_probe_match(&p, 0, a, p.answer_end[0] - p.answer_beg[0] - 1) &&
				 !sb_lm_probe_match(&p, 0, a, p.answer_end[0] - p.answer_beg[0] - 2),
			 "exact match: the answer matches, a truncated answer does not");
		sb_lm_probe_free(&p);
	}
	{
		/* fwe: the answer's words are the three most frequent, strictly */
		struct sb_lm_probe p;
		struct sb_err err = {0};
		int ok = 1;
		for (int i = 0; i < 20; i++) {
			sb_lm_probe_make(SB_LM_FWE, 512, NULL, 0, 5, SB_RNG_SYNTH, (uint64_t)i, -1, &p, &err);
			char ans[64], *save = NULL;
			snprintf(ans, sizeof ans, "%.*s", p.answer_end[0] - p.answer_beg[0] - 1,
				 (const char *)p.text + p.answer_beg[0]);
			int c[3], k = 0;
			char hay2[1024];
			snprintf(hay2, sizeof hay2, " %.*s", p.answer_beg[0], (const char *)p.text);
			for (char *x = hay2; *x; x++)
				if (*x == '\n')
					*x = ' ';
			for (char *w = strtok_r(ans, " ", &save); w && k < 3; w = strtok_r(NULL, " ", &save)) {
				char pat[32];
				snprintf(pat, sizeof pat, " %s ", w);
				c[k++] = count_sub((const uint8_t *)hay2, (int)strlen(hay2), pat);
			}
			if (k != 3 || !(c[0] > c[1] && c[1] > c[2] && c[2] >= 2))
				ok = 0;
			sb_lm_probe_free(&p);
		}
		SB_CHECK(ok, "fwe: answer = the three most frequent words, by strictly decreasing count");
	}

	/* evaluation task lists: a task given twice would be evaluated twice and its probes
	 * counted twice in lm.retrieval (records are keyed by task and probe_id): refused */
	{
		struct sb_lm_eval_opts o;
		struct sb_err err = {0};
		sb_lm_eval_defaults(&o);
		int rc1 = sb_lm_eval_set(&o, "tasks=vt,niah_single_1", &err);
		int n1 = o.n_tasks;
		int rc2 = sb_lm_eval_set(&o, "tasks=vt,niah_single_1,vt", &err);
		SB_CHECK(rc1 == 0 && n1 == 2 && rc2 == SB_EUSAGE, "tasks=vt,niah_single_1 taken (%d, %d tasks); "
			 "tasks=vt,niah_single_1,vt refused (%d: %s)", rc1, n1, rc2, err.msg);
		char all[1024] = "";
		for (int t = 0; t < SB_LM_NALLTASKS; t++)
			snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", t ? "," : "", sb_lm_task_name(t));
		int rc3 = sb_lm_eval_set_tasks(&o, all, &err), n3 = o.n_tasks;
		int last = n3 == SB_LM_NALLTASKS ? o.tasks[n3 - 1] : -1;
		SB_CHECK(rc3 == 0 && n3 == SB_LM_NALLTASKS && last == SB_LM_NALLTASKS - 1,
			 "all %d tasks (the battery's %d, kv_recall, qa_recall) taken, none cut (%d: %s; %d tasks, "
			 "the last %d)", SB_LM_NALLTASKS, SB_LM_NTASKS, rc3, err.msg, n3, last);
		int rc4 = sb_lm_eval_set(&o, "tasks=", &err), rc5 = sb_lm_eval_set_tasks(&o, ",", &err);
		SB_CHECK(rc4 == SB_EUSAGE && rc5 == SB_EUSAGE, "an empty task list refused as an empty mask list is "
			 "(%d, %d: %s)", rc4, rc5, err.msg);
	}

	/* the mixture */
	{
		struct sb_lm_corpus c[2];
		struct sb_err err = {0};
		sb_lm_corpus_from(&c[0], "essay", hay, n_hay, &err);
		uint8_t *other = make_essay(5000);
		sb_lm_corpus_from(&c[1], "other", other, 5000, &err);
		struct sb_lm_mix m;
		int rc = sb_lm_mix_parse(&m, "essay=0.3,other=0.2,retrieval=0.5", c, 2, "essay", 9, 256, &err);
		SB_CHECK(rc == 0 && m.n == 2 + SB_LM_NTASKS, "mixture parsed: %d items (%s)", m.n, err.msg);
		double tot = 0;
		for (int i = 0; i < m.n; i++)
			tot += m.item[i].weight;
		SB_CHECK(fabs(tot - 1) < 1e-12 && fabs(m.item[0].weight - 0.3) < 1e-12, "weights normalised (sum %.17g)",
			 tot);
		int counts[SB_LM_MIX_MAX] = {0}, ok = 1;
		uint8_t a[257], b[257];
		for (uint64_t i = 0; i < 2000; i++) {
			int it;
			if (sb_lm_mix_sample(&m, i, a, &it, &err)) {
				ok = 0;
				break;
			}
			counts[it]++;
			if (i < 50) {
				sb_lm_mix_sample(&m, i, b, NULL, &err);
				if (memcmp(a, b, 257))
					ok = 0;
			}
		}
		SB_CHECK(ok, "2000 examples drawn, deterministic (%s)", err.msg);
		int retr = 0;
		for (int i = 2; i < m.n; i++)
			retr += counts[i];
		SB_CHECK(abs(counts[0] - 600) < 90 && abs(retr - 1000) < 110,
			 "item frequencies follow the weights: essay %d (~600), retrieval %d (~1000)", counts[0], retr);
		rc = sb_lm_mix_parse(&m, "essay=1,bogus=2", c, 2, NULL, 9, 256, &err);
		SB_CHECK(rc == SB_EUSAGE, "unknown mixture item refused: %s", err.msg);
		sb_lm_corpus_free(&c[0]);
		sb_lm_corpus_free(&c[1]);
		free(other);
	}

	/* corpus split guard and fractions */
	{
		const char *top = getenv("SB_TOP");
		char path[4096];
		snprintf(path, sizeof path, "%s/tests/fixtures/lm/shakespeare-head.txt", top ? top : ".");
		struct sb_lm_corpus tr, va, all, te;
		struct sb_err err = {0};
		int r1 = sb_lm_corpus_read(path, "train", &tr, &err);
		int r2 = sb_lm_corpus_read(path, "valid", &va, &err);
		int r3 = sb_lm_corpus_read(path, "all", &all, &err);
		SB_CHECK(r1 == 0 && r2 == 0 && r3 == 0, "fixture read as train/valid/all (%s)", err.msg);
		if (!r1 && !r2 && !r3) {
			size_t n = all.n;
			SB_CHECK(tr.n == (size_t)floor(0.9 * n) && va.offset == tr.n &&
					 va.n == (size_t)floor(0.95 * n) - tr.n &&
					 memcmp(va.bytes, all.bytes + va.offset, va.n) == 0,
				 "split at floor(0.9 n), floor(0.95 n): n=%zu train %zu valid %zu@%zu", n, tr.n, va.n,
				 va.offset);
			SB_CHECK(strcmp(tr.name, "shakespeare-head") == 0, "corpus named after the file: %s", tr.name);
		}
		int r4 = sb_lm_corpus_read(path, "test", &te, &err);
		SB_CHECK(r4 == SB_EVERDICT, "the test part is refused (%d: %s)", r4, err.msg);
		sb_lm_corpus_free(&tr);
		sb_lm_corpus_free(&va);
		sb_lm_corpus_free(&all);
	}
	/* sb-fetch's corpus directory: {train,valid}.safetensors with sidecars */
	{
		char dir[] = "/tmp/sblmcorpus.XXXXXX";
		struct sb_err err = {0};
		if (!mkdtemp(dir)) {
			SB_CHECK(0, "mkdtemp");
		} else {
			const char *splits[2] = {"train", "valid"};
			for (int k = 0; k < 2; k++) {
				struct sb_tensors ts;
				sb_tensors_init(&ts);
				int64_t n = k ? 300 : 1000;
				sb_tensors_add(&ts, "bytes", SB_U8, 1, &n, hay + (k ? 1000 : 0), 0, &err);
				sb_tensors_set_meta(&ts, "format", "sparsebench.corpus", &err);
				sb_tensors_set_meta(&ts, "split", splits[k], &err);
				char p2[4200], hex[65];
				snprintf(p2, sizeof p2, "%s/%s.safetensors", dir, splits[k]);
				sb_st_write(p2, &ts, &err);
				sb_sha256_file(p2, hex, NULL, &err);
				sb_sidecar_write(p2, hex, &err);
				sb_tensors_free(&ts);
			}
			struct sb_lm_corpus tr, va, te;
			int r1 = sb_lm_corpus_read(dir, "train", &tr, &err);
			int r2 = sb_lm_corpus_read(dir, "valid", &va, &err);
			SB_CHECK(r1 == 0 && r2 == 0 && tr.n == 1000 && va.n == 300 && !memcmp(va.bytes, hay + 1000, 300),
				 "sb-fetch corpus directory read by split (%s)", err.msg);
			SB_CHECK(sb_lm_corpus_read(dir, "test", &te, &err) == SB_EVERDICT, "its test split is refused");
			char p2[4200];
			/* file_bytes (run.meta's size_bytes beside the file's SHA-256): the file's size, not
			 * its text's (it was the text's) */
			snprintf(p2, sizeof p2, "%s/valid.safetensors", dir);
			struct stat vst = {0};
			int sr = stat(p2, &vst);
			SB_CHECK(r2 == 0 && sr == 0 && va.file_bytes == (uint64_t)vst.st_size && va.file_bytes > 300,
				 "its file_bytes is the file's size (%llu of %lld bytes; text 300)",
				 (unsigned long long)va.file_bytes, (long long)vst.st_size);
			snprintf(p2, sizeof p2, "%s/valid.safetensors.sha256", dir);
			FILE *f = fopen(p2, "w");
			if (f) {
				fprintf(f, "%064d  valid.safetensors\n", 0);
				fclose(f);
			}
			struct sb_lm_corpus bad;
			SB_CHECK(sb_lm_corpus_read(dir, "valid", &bad, &err) == SB_EDATA, "a wrong sidecar is refused: %s",
				 err.msg);
			sb_lm_corpus_free(&tr);
			sb_lm_corpus_free(&va);
			char cmd[4300];
			snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
			if (system(cmd)) {
			}
		}
	}
	{ /* generated bytes in records: valid UTF-8 whatever the model emits */
		const uint8_t raw[] = {'4', '2', 0xc3, 0xa9, 0xc2, 0xff, 0xe2, 0x82, 0xac, 0xed, 0xa0, 0x80, 0xf0, 0x9f, 0x98};
		char out[64];
		size_t n = sb_lm_display_bytes(out, sizeof out, raw, sizeof raw);
		/* "42", é, U+FFFD (lone 0xc2), U+FFFD (0xff), €, 3 x U+FFFD (surrogate bytes), 3 x U+FFFD (cut 4-byte) */
		const char *want = "42\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xe2\x82\xac\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				   "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd";
		SB_CHECK(n == strlen(want) && !strcmp(out, want), "invalid bytes become U+FFFD, valid sequences kept (%zu bytes)",
			 n);
		struct sb_jw w;
		sb_jw_init(&w, NULL);
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "output", out);
		sb_jw_obj_end(&w);
		struct sb_json *v = NULL;
		struct sb_err e = {0};
		int rc = sb_json_parse(w.buf, w.len, &v, &e);
		SB_CHECK(rc == 0 && v && !strcmp(sb_json_str(sb_json_get(v, "output"), ""), want),
			 "the text reads back as JSON (%s)", e.msg);
		sb_json_free(v);
		sb_jw_free(&w);
		char small[7];
		n = sb_lm_display_bytes(small, sizeof small, raw, sizeof raw);
		SB_CHECK(n == 4 && !memcmp(small, "42\xc3\xa9", 5), "cut at a character boundary within the buffer (%zu)", n);
		uint8_t all[256];
		for (int i = 0; i < 256; i++)
			all[i] = (uint8_t)i;
		char big[1024];
		n = sb_lm_display_bytes(big, sizeof big, all, sizeof all);
		sb_jw_init(&w, NULL);
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "output", big);
		sb_jw_obj_end(&w);
		rc = sb_json_parse(w.buf, w.len, &v, &e);
		SB_CHECK(rc == 0 && n == 127 + 129 * 3 && strlen(big) == n, "every byte value, NUL too: %zu bytes of valid UTF-8 (%s)", n, e.msg);
		sb_json_free(v);
		sb_jw_free(&w);
	}
	free(hay);
	return sb_test_done();
}

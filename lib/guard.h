/* guard.h — the selection file and the guard in front of the test data
 * (DESIGN §5, PROTOCOL A6).
 *
 * selection.json (written by sb-freeze) is one JSON object, the payload, plus
 * a member "sha256": the SHA-256 of the canonical JSON of the payload (every
 * member but "sha256"; sorted keys, no spaces, ASCII escapes, numbers as
 * written — Python's json.dumps(payload, sort_keys=True,
 * separators=(",", ":")) of the parsed file gives the same bytes). The file is
 * indented for reading; the hash does not depend on the layout.
 *
 * The guard (sb_guard_check) refuses, with SB_EVERDICT and a message naming
 * the check, unless all of these hold, in this order:
 *   selection-exists   the selection file can be read
 *   selection-format   it is a JSON object of kind "freeze.selection",
 *                      schema 1, with a "sha256", "frozen_at_unix_s" and
 *                      "validation_logs" [{path, sha256, ...}]
 *   selection-hash     the payload hash recomputes to "sha256"
 *   log-present        every validation log it lists can be read (paths are
 *                      relative to the selection's directory unless absolute)
 *   log-hash           each still has its recorded SHA-256
 *   log-mtime          none was modified after the freeze (mtime >
 *                      frozen_at_unix_s); with a runs directory, the same for
 *                      every RUNS_DIR/STAR/val.ndjson, listed or not
 * The guard reads validation logs and the selection only: it never builds the
 * path of a dataset file.
 *
 * The test-read ledger, next to the selection (selection.json ->
 * selection.reads.ndjson; other names get ".reads.ndjson" appended), holds one
 * "test.read" record per event of a read: status "started" (written before
 * any test file is opened), then "completed" (with the output and its hash)
 * or "failed". A read counts from "started" on. sb_guard_reads reports earlier
 * reads so that the caller refuses a second one (check "single-read") unless
 * explicitly asked, and records that request too.
 */
#ifndef SB_GUARD_H
#define SB_GUARD_H

#include <stddef.h>

#include "err.h"
#include "hash.h"
#include "json.h"

/* Seal a payload: `payload` is the compact JSON text of an object without a
 * "sha256" member. Parses it, hashes its canonical form, and returns in *out
 * (newly allocated, *out_len bytes) the indented file text of the payload with
 * "sha256" appended; hex receives the hash. */
int sb_selection_seal(const char *payload, size_t len, char **out, size_t *out_len, char hex[SB_SHA256_HEX],
                      struct sb_err *err);

/* What the guard established. */
struct sb_guarded {
	struct sb_json *sel;        /* the parsed selection, owned */
	char sha256[SB_SHA256_HEX]; /* the payload hash (recomputed = recorded) */
	char file_sha256[SB_SHA256_HEX];
	double frozen_at; /* frozen_at_unix_s */
	char *sel_dir;    /* directory of the selection file */
	size_t n_logs;
};

/* Run every check above. runs_dir may be NULL (then only the listed logs are
 * checked for mtime). On refusal returns SB_EVERDICT with err->msg
 * "PATH: refused by the guard (CHECK): detail". */
int sb_guard_check(const char *selection, const char *runs_dir, struct sb_guarded *out, struct sb_err *err);
void sb_guarded_free(struct sb_guarded *g);

/* The log-mtime check for every RUNS_DIR/STAR/val.ndjson of one more runs directory
 * (sb_guard_check does it for the one it is given). */
int sb_guard_check_runs(const struct sb_guarded *g, const char *runs_dir, struct sb_err *err);

/* Resolve a path recorded in the selection (relative to its directory). Newly allocated. */
char *sb_guard_resolve(const struct sb_guarded *g, const char *recorded);

/* The ledger path for a selection path (newly allocated). */
char *sb_guard_ledger_path(const char *selection);

/* Earlier reads in the ledger: *n_reads = number of "started" records (of any
 * selection hash), *n_same = those of `sha256`; *first (if not NULL) receives a
 * one-line description of the first read ("at TIME by ARGV, status S")
 * (newly allocated, or NULL when there is none). A missing ledger is no read;
 * an unreadable or malformed one is SB_EVERDICT (check "single-read"). */
int sb_guard_reads(const char *ledger, const char *sha256, int *n_reads, int *n_same, char **first, struct sb_err *err);

/* Reads of the selection `sha256` recorded in the OTHER ledgers of the ledger's directory
 * (every NAME.reads.ndjson there but `ledger` itself): the same selection under another
 * name beside it (a hard link, a symbolic link, a copy) has a ledger of its own, and a read
 * through it is a read of this selection. *n_same: their "started" records of `sha256`;
 * *where (if not NULL) the first such ledger's path and read, or NULL. A damaged or
 * unreadable one is SB_EVERDICT (check "single-read"), as for the ledger itself. */
int sb_guard_reads_beside(const char *ledger, const char *sha256, int *n_same, char **where, struct sb_err *err);

/* Append one record (compact JSON text without the newline) to the ledger:
 * the whole ledger is rewritten atomically with the line added. */
int sb_guard_ledger_append(const char *ledger, const char *record, size_t len, struct sb_err *err);

#endif

#!/usr/bin/env bash
# The single read against the same selection under another name (DESIGN §5: "a second read of
# the same selection is refused unless asked for explicitly"). The ledger is named after the
# selection file (selection.json -> selection.reads.ndjson), so a hard link, a symbolic link
# or a copy of selection.json beside it had a ledger of its own, empty: each gave a second
# read without --reread and without touching any file the first read left. sb-test now follows
# a symbolic link to the selection's own ledger and counts the reads of this selection in every
# other NAME.reads.ndjson of its directory.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/guard/lib.sh"

mkstudy "$T/pristine"
t_result $? "a study is frozen"
fresh() { rm -rf "$T/s" "$T/o"; cp -a "$T/pristine" "$T/s"; }
# read NAME [sb-test args...]: one read of $T/s, from $T/s; prints the exit status
read_as() {
	local sel=$1
	shift
	(cd "$T/s" && sb-test -q -s "$sel" -d data -o "t.$RANDOM$RANDOM" "$@" runs >"$T/out" 2>"$T/err")
}
# the first read (it passes the guard, then fails on the stand-in checkpoints: it counts)
first_read() {
	read_as selection.json
	grep -q '"status":"started"' "$T/s/selection.reads.ndjson"
}
# second NAME WHAT: a second read through NAME must be refused single-read, nothing recorded
second() {
	local sel=$1 what=$2
	local before
	before=$(cat "$T/s"/*.reads.ndjson "$T/o"/*.reads.ndjson 2>/dev/null | grep -c '"status":"started"')
	read_as "$sel"
	local rc=$?
	local after
	after=$(cat "$T/s"/*.reads.ndjson "$T/o"/*.reads.ndjson 2>/dev/null | grep -c '"status":"started"')
	[ $rc -eq 1 ] && grep -q "refused by the guard (single-read)" "$T/err" && [ "$before" = "$after" ]
	t_result $? "a second read through $what: exit 1, single-read, no read recorded (exit $rc, reads $before -> $after: $(head -c 300 "$T/err"))"
}

fresh; first_read; t_result $? "the first read is recorded"
ln "$T/s/selection.json" "$T/s/again.json"
second again.json "a hard link beside the selection"

fresh; first_read
ln -s selection.json "$T/s/again.json"
second again.json "a symbolic link beside the selection"

fresh; first_read
cp "$T/s/selection.json" "$T/s/copy.json"
second copy.json "a copy beside the selection"

fresh; first_read
cp "$T/s/selection.json" "$T/s/copy"
second copy "a copy without .json beside the selection"

fresh; first_read
mkdir "$T/o"
ln -s "$T/s/selection.json" "$T/o/sel.json"
ln -s "$T/s/runs" "$T/o/runs"
second "$T/o/sel.json" "a symbolic link in another directory (its runs linked beside it)"

# a read through a symbolic link that an earlier sb-test recorded beside the link (it did not
# follow links): it still counts
fresh; first_read
mkdir "$T/o"
ln -s "$T/s/selection.json" "$T/o/sel.json"
ln -s "$T/s/runs" "$T/o/runs"
mv "$T/s/selection.reads.ndjson" "$T/o/sel.reads.ndjson"
second "$T/o/sel.json" "a symbolic link whose earlier read is recorded beside the link"

# with --reread the read goes on and is numbered after the first
fresh; first_read
cp "$T/s/selection.json" "$T/s/copy.json"
read_as copy.json --reread "testing"
rc=$?
[ $rc -ne 1 ] && grep -q '"status":"started","read":2' "$T/s/copy.reads.ndjson" &&
	grep -q '"reread_reason":"testing"' "$T/s/copy.reads.ndjson"
t_result $? "--reread through a copy: read 2, the reason recorded (exit $rc: $(head -c 200 "$T/err"))"

# controls: another selection in the same directory, never read, is not refused by this one's reads
fresh; first_read
sb-freeze -q --force --min-seeds 3 --patience 1 -o "$T/s/other.json" "$T"/s/runs/*/val.ndjson >/dev/null 2>&1
t_result $? "another selection frozen beside the first (--patience 1)"
read_as other.json
rc=$?
[ $rc -ne 1 ] && ! grep -q "refused by the guard" "$T/err"
t_result $? "control: another selection beside a read one passes the guard (exit $rc: $(head -c 200 "$T/err"))"
fresh
ln "$T/s/selection.json" "$T/s/again.json"
read_as again.json
rc=$?
[ $rc -ne 1 ] && ! grep -q "refused by the guard" "$T/err"
t_result $? "control: the first read through a link passes the guard (exit $rc: $(head -c 200 "$T/err"))"
# a damaged ledger of the same directory refuses, as the selection's own does
fresh
printf '{"kind":"test.read",\n' >"$T/s/junk.reads.ndjson"
read_as selection.json
rc=$?
[ $rc -eq 1 ] && grep -q "refused by the guard (single-read)" "$T/err" && grep -q damaged "$T/err"
t_result $? "a damaged ledger beside the selection: exit 1, single-read (exit $rc: $(head -c 200 "$T/err"))"
# the selection named by a relative path (the README's `-s selection.json`), read twice: the
# second plain read is refused as a read of this selection, not "under another name", and a
# --reread is read 2 (the ledger beside the path as given is the real file's: its reads were
# counted twice, so the second read was numbered 3)
fresh; first_read
read_as selection.json
rc=$?
[ $rc -eq 1 ] && grep -q "this selection was already read (1 time(s)" "$T/err" && ! grep -q "another name" "$T/err"
t_result $? "a second read by the same relative path: refused as this selection's second read (exit $rc: $(head -c 300 "$T/err"))"
read_as selection.json --reread "the audit's check"
n=$(jq -s -r '[.[] | select(.status == "started")] | map(.read | tostring) | join(",")' "$T/s/selection.reads.ndjson")
[ "$n" = "1,2" ]
t_result $? "a --reread by the same relative path is read 2 (the ledger's started reads: $n)"

t_done

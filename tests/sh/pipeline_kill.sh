#!/usr/bin/env bash
# pipeline_kill.sh — a make pipeline stopped in the middle of a recipe by SIGTERM, SIGINT
# or SIGHUP to its whole process group (a scheduler's kill, a terminal's Ctrl-C, a closed
# terminal) leaves no temporary file behind and no target: pipelines/stage.sh removes the
# files and directories it had not yet renamed into place (its EXIT trap), and so do the
# recipes of pipelines/{sas,n3a,lm-track}.mk that write TARGET.tmp ($(ATOMIC) in the
# Makefile), and so does the grid expansion (scripts/grid). The grid then finishes on a
# rerun. SIGKILL cannot be caught:
# pipeline_resume.sh shows what a rerun makes of what it leaves. About 60 s.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"
for p in sb-train perl setsid; do
	command -v $p >/dev/null || { t_result 1 "$p is there"; t_done; }
done

# make in its own process group, with the default actions of the signals (a test harness
# may have started us with SIGINT ignored, which a shell cannot undo for its children)
start() { # log make-args...
	local log=$1
	shift
	setsid perl -e '$SIG{$_} = "DEFAULT" for qw(INT HUP TERM QUIT); exec @ARGV or die "exec $ARGV[0]: $!\n"' \
		make -C "$TOP" --no-print-directory "$@" >"$log" 2>&1 &
	pg=$!
}
# wait (up to 60 s) until a file matches the glob
await() {
	local i
	for i in $(seq 1 600); do
		compgen -G "$1" >/dev/null && return 0
		kill -0 "$pg" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# signal the whole group, wait for make, then for the rest of the group
stop() { # SIGNAL
	local i
	kill -"$1" -- -"$pg" 2>/dev/null
	wait "$pg" 2>/dev/null
	rc=$?
	for i in $(seq 1 100); do
		kill -0 -- -"$pg" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL -- -"$pg" 2>/dev/null
	return 1
}
tmps() { find "$@" \( -name '*.tmp' -o -name '*.tmp.*' \) 2>/dev/null | sed "s|^$T/||" | head -n 5 | tr '\n' ' '; }

# 1-2. the stage script: sb-stats (a stub) hangs with its outputs written into
# BLOCK/stats.tmp/, which becomes BLOCK/stats/ only when complete. Both blocks run at once;
# the signal comes when both hang in their stats, i.e. after block main's test read (a read
# stopped half-way counts as a read: a rerun would need RETEST, as the guard tests show).
for sig in TERM INT; do
	rm -rf "$T/out" "$T/hang"
	STUB_HANG="sb-stats:$T/hang" start "$T/$sig.log" EXTRA_GRIDS="$PT_GRID" SB_OUT="$T/out" SB_DATA="$T/data" \
		SB_BIN="$FIX/stubs" SB_MIRRORS= pt
	await "$T/out/pt/main/stats.tmp/stats.ndjson" && await "$T/out/pt/budget/stats.tmp/stats.ndjson"
	t_result $? "SIG$sig: both blocks reached sb-stats ($(tail -n 1 "$T/$sig.log"))"
	during=$(tmps "$T/out")
	stop "$sig"
	t_result $? "SIG$sig: make and its recipes ended (make exit $rc)"
	[[ "$during" == *"out/pt/budget/stats.tmp out/pt/main/stats.tmp "* ]] && [ -z "$(tmps "$T/out")" ]
	t_result $? "SIG$sig: what was there during the stage ($during) is gone ($(tmps "$T/out"))"
	[ -z "$(find "$T/out/pt" -name stats -type d)" ]
	t_result $? "SIG$sig: no stats directory was published ($(find "$T/out/pt" -name stats -type d | tr '\n' ' '))"
done
pmake pt >"$T/rerun.log" 2>&1
t_result $? "the grid finishes on a rerun ($(tail -n 1 "$T/rerun.log"))"
[ -f "$T/out/pt/main/stats/table2.md" ] && [ -f "$T/out/pt/budget/stats/stats.ndjson" ] && [ -z "$(tmps "$T/out")" ]
t_result $? "with both blocks' stats and no temporary file ($(tmps "$T/out"))"

# a test read stopped half-way (sb-test hangs with its read in the ledger, as the real one
# records a read before it opens the split): the rerun refuses with the way out, which works
rm -rf "$T/out" "$T/hang"
STUB_HANG="sb-test:$T/hang" start "$T/testread.log" EXTRA_GRIDS="$PT_GRID" SB_OUT="$T/out" SB_DATA="$T/data" \
	SB_BIN="$FIX/stubs" SB_MIRRORS= pt
await "$T/hang"
t_result $? "the grid reached the test read ($(tail -n 1 "$T/testread.log"))"
stop INT
t_result $? "SIGINT during the test read: make and its recipes ended (make exit $rc)"
pmake pt >"$T/reread.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'perhaps by a read that was interrupted.*RETEST=REASON reads it again' "$T/reread.log" &&
	[ ! -e "$T/out/pt/main/test/test.ndjson" ]
t_result $? "a rerun refuses the second read and says how to ask for it (exit $rc: $(grep -m1 'test read pt/main: refused' "$T/reread.log" | cut -c1-160))"
pmake pt RETEST="the first read was interrupted" >"$T/retest.log" 2>&1
t_result $? "RETEST=REASON finishes the grid ($(tail -n 1 "$T/retest.log"))"
[ "$(grep -c '"kind":"test.read"' "$T/out/pt/main/selection.reads.ndjson")" = 2 ] &&
	grep -q '"reread_reason":"the first read was interrupted"' "$T/out/pt/main/selection.reads.ndjson" &&
	[ -f "$T/out/pt/main/test/test.ndjson" ] && [ -z "$(tmps "$T/out")" ]
t_result $? "the ledger holds both reads, the second with its reason; no temporary file ($(tmps "$T/out"))"

# make ARGS, signalled once GLOB exists: TMP (a path under $T) was there and is gone with
# every other temporary file under DIR, and TARGET was not made
interrupted() { # what SIGNAL DIR GLOB TMP TARGET -- make-args...
	local what=$1 sig=$2 dir=$3 glob=$4 tmp=$5 target=$6 during
	shift 7
	start "$T/${what// /-}.log" "$@"
	await "$glob" && sleep 1
	t_result $? "$what reached its program ($(tail -n 1 "$T/${what// /-}.log"))"
	during=$(tmps "$dir")
	stop "$sig"
	t_result $? "$what, SIG$sig: make, its recipe and programs ended (make exit $rc)"
	[[ "$during" == *"$tmp "* ]] && [ -z "$(tmps "$dir")" ] && [ ! -e "$target" ]
	t_result $? "$what, SIG$sig: $during is gone ($(tmps "$dir")), no ${target#"$T"/}"
}

# 3. a pipelines/*.mk recipe that writes TARGET.tmp: make sas, its sb-train hanging with a
# record written (SB_BIN holds a stand-in)
mkdir -p "$T/hangbin"
cat >"$T/hangbin/sb-train" <<'EOF'
#!/usr/bin/env bash
echo '{"kind":"run.meta","v":1}'
: >"$HANG_MARK"
sleep 300
EOF
chmod +x "$T/hangbin/sb-train"
: >"$T/corpus.txt"
rm -f "$T/hang"
export HANG_MARK=$T/hang
interrupted "make sas" HUP "$T/sas" "$T/hang" sas/train.ndjson.tmp "$T/sas/train.ndjson" -- \
	sas SB_BIN="$T/hangbin" SAS_OUT="$T/sas" SAS_SEEDS=1 SAS_CORPUS="c=$T/corpus.txt"
[ -f "$T/sas/cells.ndjson" ]
t_result $? "make sas: cells.ndjson, finished before, stays"

# 4. make n3a with the real sb-train (one registered cell, ~10 s): signalled once training has
# begun; sb-train's own temporary files go too (lib/io.c)
interrupted "make n3a" TERM "$T/n3a" "$T/n3a/runs/*/cell.json" n3a/train/query-r1-s64000.ndjson.tmp \
	"$T/n3a/train/query-r1-s64000.ndjson" -- -o bin/sb-train n3a N3A_OUT="$T/n3a" N3A_ARCHS=query N3A_RS=1 N3A_SEEDS=64000

# 5. make lm-train (pipelines/lm-track.mk) with the real sb-train on a tiny decoder: Ctrl-C
interrupted "make lm-train" INT "$T/lm" "$T/lm/runs/*/train.ndjson" lm/train.ndjson.tmp "$T/lm/train.ndjson" -- \
	-o bin/sb-train lm-train LM_OUT="$T/lm" LM_SHAKESPEARE="$TOP/tests/fixtures/lm/shakespeare-head.txt" \
	LM_JARGON= LM_D=16 LM_PATTERN=AC LM_T=192 LM_BATCH=4 LM_STEPS=100000 LM_WARM_STEPS=10 LM_WARM_T=32 LM_THREADS=1
# 6. the grid expansion that begins every make (scripts/grid expand): stopped at 30 moments
# spread over it, on a fresh tree and on a tree whose grid changed, it leaves no temporary
# file and no torn cell.json or parameter file (each is whole, as a complete expansion
# writes it, or absent); the next expansion completes. Before 2026-12-06 it left
# .grid/parsed.tmp and cells.mk.tmp behind, and wrote the files in place. The grid: the
# study's first lines with 2 tasks (140 cells), so that the trees stay small.
sed -e 's/^task .*/task    mnist usps/' -e '/^stage/d' "$TOP/pipelines/grids/study.grid" >"$T/gk.grid"
sed 's/lr=0.001/lr=0.002/' "$T/gk.grid" >"$T/gk2.grid"
"$TOP/scripts/grid" expand "$T/gk.grid" "$T/gref" 2>/dev/null
"$TOP/scripts/grid" expand "$T/gk2.grid" "$T/gref2" 2>/dev/null
t0=$(date +%s%N)
"$TOP/scripts/grid" expand "$T/gk.grid" "$T/gtime" 2>/dev/null
# the kills are spread over 1.1x the time of a whole expansion, measured here
span=$((($(date +%s%N) - t0) / 1000 * 11 / 10))
rm -rf "$T/gtime"
# every file of TREE must equal the one of REF or of OLD (the tree before); print the first
# that equals neither (cells.mk names the tree, so it is left out)
sums() { (cd "$1" 2>/dev/null && find . -type f ! -name lock ! -name cells.mk -print0 | xargs -0 -r md5sum); }
sums "$T/gref" >"$T/gref.sums"
sums "$T/gref2" >"$T/gref2.sums"
torn() { # TREE REFSUMS [OLDSUMS]
	sums "$1" | awk 'FILENAME != "-" { ok[$0] = 1; next } !($0 in ok) { print $2 " is torn"; exit }' "$2" ${3:+"$3"} -
}
bad=() nsig=0
for i in $(seq 0 29); do
	g=$T/g
	rm -rf "$g"
	grid=$T/gk.grid ref=$T/gref.sums old=
	# odd rounds: an expanded tree whose grid changed (every cell.json rewritten)
	if [ $((i % 2)) -eq 1 ]; then
		cp -a "$T/gref" "$g"
		grid=$T/gk2.grid ref=$T/gref2.sums old=$T/gref.sums
	fi
	setsid "$TOP/scripts/grid" expand "$grid" "$g" 2>/dev/null &
	gp=$!
	# from the moment setsid has made the group
	for w in $(seq 1 1000); do kill -0 -- -"$gp" 2>/dev/null && break; done
	sleep "$(printf '%d.%06d' $((span * i / 30 / 1000000)) $((span * i / 30 % 1000000)))"
	kill -"$([ $((i % 4)) -lt 2 ] && echo TERM || echo INT)" -- -"$gp" 2>/dev/null && nsig=$((nsig + 1))
	wait "$gp" 2>/dev/null
	left=$(find "$g" \( -name '*.tmp' -o -name '.cells.ndjson.*' \) 2>/dev/null | head -n 3 | tr '\n' ' ')
	[ -z "$left" ] || bad+=("round $i: $left")
	t=$(torn "$g" "$ref" "$old")
	[ -z "$t" ] || bad+=("round $i: $t")
done
[ ${#bad[@]} -eq 0 ]
t_result $? "grid expansion signalled at 30 moments over $((span / 1000)) ms ($nsig while it ran): no temporary file or torn file (${bad[*]:0:3})"
"$TOP/scripts/grid" expand "$T/gk2.grid" "$g" 2>/dev/null && [ -z "$(torn "$g" "$T/gref2.sums")" ] &&
	[ "$(find "$g" -name cell.json | wc -l)" -eq 140 ]
t_result $? "after the last interrupted expansion, the next one completes: 140 cell.json as the reference"
rm -rf "$g" "$T/gref" "$T/gref2"
t_done

#!/usr/bin/env bash
# pipelines/stage.sh — the recipes of the make pipelines (pipelines/common.mk), one
# subcommand per stage. Each verifies the SHA-256 sidecars of its inputs first and
# refuses (exit 3, naming the file) when one no longer matches; each writes its
# outputs under a temporary name and renames them into place, so a target exists
# only when complete. Progress goes to stderr; the programs' own output goes to
# logs beside the outputs.
#
#   stage.sh fetch TASK                 sb-fetch  -> $SB_DATA/TASK/{pool,test}.safetensors
#   stage.sh train BLOCKDIR KEY         sb-train  -> BLOCKDIR/runs/CELL_ID, cells/KEY/train.ndjson
#   stage.sh eval BLOCKDIR KEY          sb-eval   -> runs/CELL_ID/val.ndjson, cells/KEY/val.ndjson
#   stage.sh freeze BLOCKDIR            sb-freeze -> BLOCKDIR/selection.json
#   stage.sh test BLOCKDIR              sb-test   -> BLOCKDIR/test/test.ndjson
#   stage.sh stats BLOCKDIR             sb-stats  -> BLOCKDIR/stats/{stats.ndjson,*.md,*.csv,*.tex,*.svg}
#   stage.sh a8 BLOCKDIR                sb-a8     -> BLOCKDIR/a8/{a8.ndjson,a8.md} (PROTOCOL A8 verdicts)
#   stage.sh report GRIDDIR             GRIDDIR/report.md
#   stage.sh group < "BLOCKDIR KEY" lines   each cell's training group (TASK.ARCH.TIER)
#                                       or "-" (trained alone): pipelines/slurm.sh
#   stage.sh failed GRIDDIR             list failed / unfinished cells (exit 1 if any)
#   stage.sh adopt GRIDDIR FROM         take the finished cells of another grid's tree
#                                       FROM whose cell.json is the same (exit 3 if one
#                                       verified badly)
#   stage.sh check FILE...              verify FILE.sha256 sidecars
#   stage.sh seal FILE...               write FILE.sha256 sidecars
#   stage.sh manifest TREE | verify TREE   TREE/MANIFEST.csv (path,size_bytes,sha256)
#   stage.sh digest TREE                the results of a tree without volatile fields
#                                       (timings, hosts, paths): compares two runs
#
# Environment (set by pipelines/common.mk): SB_BIN SB_DATA SB_CACHE SB_MIRRORS
# TRAIN_THREADS ACCEPT_FAILED REFREEZE RETEST RESUME SB_VERBOSE, and for training on
# a GPU DEVICE DEVICE_CELLS DEVICE_RETRIES DEVICE_GROUPS SB_MAKE_RUN (do_train_group), EVAL_DEVICE.
set -eu -o pipefail
export LC_ALL=C
SB_BIN=${SB_BIN:-bin}
SB_OUT=${SB_OUT:-out}
SB_DATA=${SB_DATA:-data}
SB_CACHE=${SB_CACHE:-$SB_DATA/.cache}
SB_MIRRORS=${SB_MIRRORS:-}
TRAIN_THREADS=${TRAIN_THREADS:-1}
ACCEPT_FAILED=${ACCEPT_FAILED:-0}
REFREEZE=${REFREEZE:-0}
RETEST=${RETEST:-}
SB_VERBOSE=${SB_VERBOSE:-0}

# The temporary files and directories a stage writes before renaming them into place:
# removed when the stage exits, however it exits (an error, or SIGTERM, SIGINT or SIGHUP),
# so an interrupted stage leaves none behind; one renamed into place is gone already. A run
# directory in training (cells/KEY/work) is not one of them: it is kept for the resume.
# The signals are trapped explicitly: left to bash's default handling, about 1 in 100
# SIGTERMs arriving while it waits for a program ended it without the EXIT trap; and a
# second signal (make passes its own on to the recipe) must not cut the clean-up short.
# (tests/sh/pipeline_kill.sh)
SCRATCH=()
scratch() { SCRATCH+=("$@"); }
clean_scratch() {
	trap '' HUP INT TERM
	[ ${#SCRATCH[@]} -eq 0 ] || rm -rf -- "${SCRATCH[@]}"
}
trap clean_scratch EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

say() { echo "$*" >&2; }
die() { local rc=$1; shift; echo "pipeline: $*" >&2; exit "$rc"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
prog() { # the path of a stage program, which must exist
	local p="$SB_BIN/sb-$1"
	[ -x "$p" ] || die 4 "$p: not found or not executable (build it with 'make', or set SB_BIN)"
	echo "$p"
}
# run a program with its stdout to OUT and stderr to LOG (also to our stderr
# with SB_VERBOSE=1); on failure show the end of the log
run_logged() { # out log cmd...
	local out=$1 log=$2 rc=0
	shift 2
	if [ "$SB_VERBOSE" = 1 ]; then
		"$@" >"$out" 2> >(tee "$log" >&2) || rc=$?
	else
		"$@" >"$out" 2>"$log" || rc=$?
	fi
	if [ $rc -ne 0 ]; then
		say "pipeline: $(basename "$1") exited $rc; end of $log:"
		tail -n 8 "$log" | sed 's/^/  | /' >&2
	fi
	return $rc
}

# ---- sidecars: "HEX  NAME\n" in sha256sum format, as lib/hash.h writes them ----
seal() {
	local f d n h
	for f in "$@"; do
		d=$(dirname "$f") n=$(basename "$f")
		h=$(sha256sum <"$f" | cut -d' ' -f1)
		scratch "$d/.$n.sha256.tmp"
		printf '%s  %s\n' "$h" "$n" >"$d/.$n.sha256.tmp"
		mv -f "$d/.$n.sha256.tmp" "$f.sha256"
	done
}
# verify every FILE against FILE.sha256, hashing them in one pass
check() {
	[ $# -gt 0 ] || return 0
	local f
	for f in "$@"; do
		[ -e "$f" ] || die 3 "$f: missing (an input of this step; rebuild it)"
		[ -f "$f.sha256" ] || die 3 "$f: no SHA-256 sidecar ($f.sha256): not made by this pipeline, or interrupted between its writing and its sealing; delete it and make again (a test.ndjson: with RETEST=REASON)"
	done
	printf '%s\0' "$@" | xargs -0 sha256sum -- | awk '
	{
		h = $1; f = substr($0, 67)
		sc = f ".sha256"
		line = ""; getline line < sc; close(sc)
		split(line, p, "  ")
		n = f; sub(/.*\//, "", n)
		if (length(p[1]) != 64 || p[2] != n) { printf "pipeline: %s: malformed sidecar %s\n", f, sc > "/dev/stderr"; bad = 1; exit }
		if (p[1] != h) {
			printf "pipeline: %s: SHA-256 mismatch: expected %s (from %s), actual %s\n", f, p[1], sc, h > "/dev/stderr"
			if (system("test -L \"" f "\"") == 0) {
				cmd = "readlink -f \"" f "\""; cmd | getline real; close(cmd)
				printf "pipeline: (%s links to %s)\n", f, real > "/dev/stderr"
			}
			printf "pipeline: %s changed after it was made and what depends on it was not rebuilt; refusing to use it.\n", f > "/dev/stderr"
			printf "pipeline: restore it, or delete it (make rebuilds it and everything made from it).\n" > "/dev/stderr"
			bad = 1; exit
		}
	}
	END { exit bad ? 3 : 0 }'
}
# check for one cell: a refusal marks the cell FAILED, so the final listing names it
check_cell() { # celldir stage file...
	local d=$1 st=$2 msg
	shift 2
	if ! msg=$(check "$@" 2>&1); then
		echo "$msg" >&2
		fail_cell "$d" "$st" "input refused: $(echo "$msg" | head -n 1 | sed 's/^pipeline: //; s/ (from .*//')"
	fi
}
# link LINK -> TARGET atomically (ln to a temporary name, rename over)
relink() { # target link
	local tmp
	tmp="$(dirname "$2")/.$(basename "$2").lnk.$$"
	ln -sfn "$1" "$tmp"
	mv -fT "$tmp" "$2"
}
# the options of a stage from BLOCKDIR/params/STAGE: key=value -> --key value
# ("_" becomes "-"; a value "true" gives the bare flag)
stage_opts() { # file [key to leave out]...
	[ -f "$1" ] || return 0
	local f=$1
	shift
	awk -F= -v skip=" $* " 'NF >= 2 && $1 ~ /^[a-z_]+$/ && index(skip, " " $1 " ") == 0 {
		k = $1; gsub(/_/, "-", k); v = substr($0, length($1) + 2)
		if (v == "true") print "--" k; else { print "--" k; print v }
	}' "$f"
}
param() { # file key default
	local v
	v=$(awk -F= -v k="$2" '$1 == k { print substr($0, length(k) + 2); exit }' "$1" 2>/dev/null || true)
	echo "${v:-$3}"
}
# the keys of a block, from the grid's cells.ndjson
block_keys() { # blockdir
	local g b
	g=$(dirname "$1") b=$(basename "$1")
	[ -f "$g/.grid/cells.ndjson" ] || die 2 "$g/.grid/cells.ndjson: missing (the grid was not expanded)"
	sed -n "s/^{\"grid\":\"[^\"]*\",\"block\":\"$b\",\"key\":\"\([^\"]*\)\".*/\1/p" "$g/.grid/cells.ndjson"
}
last_kind() { # ndjson -> kind of its last record
	tail -n 1 "$1" | sed -n 's/^{"kind":"\([^"]*\)".*/\1/p'
}
json_field() { # file field -> first string value of "field" in the file
	sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" "$1" | head -n 1
}
label() { # blockdir -> grid/block, for progress lines
	echo "$(basename "$(dirname "$1")")/$(basename "$1")"
}
count_done() { # blockdir suffix
	local n=0 f
	for f in "$1"/cells/*/"$2"; do [ -e "$f" ] && n=$((n + 1)); done
	echo $n
}
# cells whose training failed and was accepted as their outcome (ACCEPT_FAILED=1)
outcome() { # celldir -> completed | failed:STATUS
	if [ -f "$1/OUTCOME" ]; then cat "$1/OUTCOME"; else echo completed; fi
}

# ---- fetch ----
do_fetch() {
	local task=$1 t0 m mopts=() log
	t0=$(now)
	for m in $SB_MIRRORS; do [ -d "$m" ] && mopts+=(-m "$m"); done
	mkdir -p "$SB_DATA/.logs" "$SB_CACHE"
	log="$SB_DATA/.logs/fetch-$task"
	say "fetch $task ..."
	run_logged "$log.ndjson" "$log.log" "$(prog fetch)" "${mopts[@]}" -c "$SB_CACHE" -o "$SB_DATA" "$task" ||
		die 1 "fetch $task failed (log: $log.log)"
	check "$SB_DATA/$task/pool.safetensors" "$SB_DATA/$task/test.safetensors"
	say "fetch $task ok ($(elapsed "$t0"))"
}

# ---- train: one cell ----
# sb-train writes into cells/KEY/work/CELL_ID; only a finished run is moved to
# runs/CELL_ID and linked as cells/KEY/train.ndjson (make's target). An attempt
# that was interrupted (work/ left behind) is resumed by sb-train from its last
# epoch whose checkpoint still has the recorded SHA-256 (RESUME=1, the default; the
# result is bit-identical) or set aside under cells/KEY/attempts/ (RESUME=0, or
# when the cell's parameters changed since).
set_aside() { # celldir what...
	local d=$1 n
	shift
	n=$(date -u +%Y%m%dT%H%M%SZ).$$
	mkdir -p "$d/attempts/$n"
	mv "$@" "$d/attempts/$n/"
	echo "$d/attempts/$n"
}
# the pre-run part: inputs checked, an unpublished run set aside, an interrupted
# attempt resumed or set aside, the work directory made
prepare_cell() { # blockdir key
	local B=$1 key=$2 d task runs work rid where
	d="$B/cells/$key" task=${key%%.*} runs="$B/runs" work="$B/cells/$key/work"
	[ -f "$d/cell.json" ] || die 2 "$d/cell.json: missing"
	check_cell "$d" train "$SB_DATA/$task/pool.safetensors"
	mkdir -p "$runs"
	# a run moved to runs/ but never linked (killed in between): not trusted
	if [ -f "$d/pending" ]; then
		rid=$(cat "$d/pending")
		if [ -n "$rid" ] && [ -d "$runs/$rid" ] && [ "$(readlink "$d/train.ndjson" 2>/dev/null)" != "../../runs/$rid/train.ndjson" ]; then
			where=$(set_aside "$d" "$runs/$rid")
			say "train $key: set aside an unpublished run in $where"
		fi
		rm -f "$d/pending"
	fi
	if [ -e "$work" ]; then
		if [ "${RESUME:-1}" = 1 ] && cmp -s "$work/.cell.json" "$d/cell.json"; then
			say "train $key: resuming an interrupted attempt (sb-train continues from its last verified epoch)"
		else
			where=$(set_aside "$d" "$work")
			say "train $key: set aside an unfinished attempt in $where"
		fi
	fi
	rm -f "$d/FAILED" "$d/OUTCOME" "$d/.OUTCOME.tmp"
	mkdir -p "$work"
	cp "$d/cell.json" "$work/.cell.json"
}
do_train() {
	local B=$1 key=$2 d t0 rc=0
	d="$B/cells/$key"
	if group_mode "$d"; then
		do_train_group "$B" "$key"
		return
	fi
	t0=$(now)
	prepare_cell "$B" "$key"
	say "train $(label "$B") $key ..."
	run_logged "$d/train.out" "$d/train.log" "$(prog train)" -d "$SB_DATA" -o "$d/work" -j "$TRAIN_THREADS" "$d/cell.json" || rc=$?
	publish_run "$B" "$key" "$rc" "sb-train exit $rc"
	say "train $(label "$B") $key ok ($(elapsed "$t0")) [$(count_done "$B" train.ndjson)/$(block_keys "$B" | wc -l) trained]"
}
# the post-run part: the run directory sb-train made in cells/KEY/work/ becomes
# runs/CELL_ID (the cell's outcome), or the cell fails (fail_cell, which exits).
# RC: what the cell's run came to (0: sb-train reported no error for it).
publish_run() { # blockdir key rc what
	local B=$1 key=$2 rc=$3 what=$4 d runs work rid status st old
	d="$B/cells/$key" runs="$B/runs" work="$B/cells/$key/work"
	# the run directory sb-train made
	shopt -s nullglob
	local made=("$work"/*/)
	shopt -u nullglob
	if [ ${#made[@]} -ne 1 ] || [ ! -f "${made[0]}train.ndjson" ]; then
		fail_cell "$d" train "$what; expected one run directory with train.ndjson in $work (found ${#made[@]})"
	fi
	rid=$(basename "${made[0]}")
	status=$(last_kind "${made[0]}train.ndjson")
	st=$(json_field "${made[0]}train.ndjson" status | tail -n 1)
	scratch "$d/.OUTCOME.tmp"
	if [ "$rc" -eq 0 ] && [ "$status" = train.done ]; then
		:
	elif [ "$rc" -eq 0 ] && [ "$status" = train.failed ] && [ "$st" = failed_nonfinite_loss ]; then
		# a result of the protocol (PROTOCOL A4), not an accident: recorded, not retried
		say "train $key: ended with a non-finite loss; recorded as the cell's outcome"
		echo "failed:$st" >"$d/.OUTCOME.tmp"
	elif [ "$ACCEPT_FAILED" = 1 ] && [ "$status" = train.failed ]; then
		say "train $key: failed (${st:-failed}); ACCEPT_FAILED=1 records it as the cell's outcome"
		echo "failed:${st:-failed}" >"$d/.OUTCOME.tmp"
	else
		fail_cell "$d" train "$what, last record ${status:-none}${st:+ (status $st)}"
	fi
	# publish: runs/CELL_ID, then the sidecar, then the link that is make's target
	old=$(readlink "$d/train.ndjson" 2>/dev/null || true)
	old=${old#../../runs/}
	old=${old%%/*}
	echo "$rid" >"$d/pending"
	if [ -e "$runs/$rid" ]; then
		# the same cell made again: CELL_ID hashes the complete cell, and the grid
		# expansion refuses two identical cells in a block, so this is its old result
		retire_run "$B" "$rid"
	fi
	mv "${made[0]%/}" "$runs/$rid"
	rm -rf "$work"
	seal "$runs/$rid/train.ndjson"
	mv -f "$runs/$rid/train.ndjson.sha256" "$d/train.ndjson.sha256"
	if [ -f "$d/.OUTCOME.tmp" ]; then mv -f "$d/.OUTCOME.tmp" "$d/OUTCOME"; fi
	relink "../../runs/$rid/train.ndjson" "$d/train.ndjson"
	relink "../../runs/$rid" "$d/run"
	rm -f "$d/pending" "$d/ADOPTED" # trained here: no longer another grid's run
	if [ -n "$old" ] && [ "$old" != "$rid" ] && [ -d "$runs/$old" ]; then retire_run "$B" "$old"; fi
}
# a run replaced by a new one of its cell: deleted, unless the block was frozen (a
# selection, a test read and statistics may cite its logs and checkpoints): then it is kept
# in runs.superseded/CELL_ID.TIME, where the evidence stays auditable
retire_run() { # blockdir cell_id
	local B=$1 rid=$2 n
	if [ -e "$B/selection.json" ]; then
		n=$(date -u +%Y%m%dT%H%M%SZ).$$
		mkdir -p "$B/runs.superseded"
		mv "$B/runs/$rid" "$B/runs.superseded/$rid.$n"
		say "train $(label "$B"): the replaced run $rid is kept in $B/runs.superseded/$rid.$n (the frozen selection may cite it)"
	else
		rm -rf "${B:?}/runs/$rid"
	fi
}

# ---- train on a GPU: the cells of a grid row in one process ----
# With DEVICE=cuda[:N][,tf32] (or SB_TRAIN_GROUPS=1, which tests it on the CPU) the
# encoder cells of a block that share task, architecture and tier train in one
# sb-train process (docs/cuda.md, multi-cell training). make still has one target per
# cell: the first recipe of a group takes the group's lock and trains every cell of
# the group that is out of date; the others wait for the lock and find their cell
# made. Cells that end with failed_device (a lost device context ends every cell of
# its process) are retried in a new process, DEVICE_RETRIES times; a cell that still
# fails gets its FAILED file, marked with this make's SB_MAKE_RUN so that its own
# recipe does not train it again in the same make.
group_mode() { # celldir
	{ [ "${DEVICE:-cpu}" != cpu ] || [ "${SB_TRAIN_GROUPS:-0}" = 1 ]; } && ! grep -q '"family"' "$1/cell.json"
}
group_of() { # key -> TASK.ARCH.TIER
	local IFS=.
	# shellcheck disable=SC2086
	set -- $1
	echo "$1.$4.$5"
}
# for each "BLOCKDIR KEY" line on stdin, the cell's group, or "-" when it trains alone
# (on the CPU, or a cell of another family): pipelines/slurm.sh makes an array task of a group
do_group() {
	local block key
	while read -r block key; do
		if group_mode "$block/cells/$key"; then group_of "$key"; else echo -; fi
	done
}
# as make sees it: train.ndjson exists and is not older than the cell or its dataset
cell_current() { # blockdir key
	local d="$1/cells/$2" task=${2%%.*}
	[ -e "$d/train.ndjson" ] && ! [ "$d/cell.json" -nt "$d/train.ndjson" ] &&
		! [ "$SB_DATA/$task/pool.safetensors" -nt "$d/train.ndjson" ]
}
failed_this_run() { # blockdir key
	[ -n "${SB_MAKE_RUN:-}" ] && [ -f "$1/cells/$2/FAILED" ] && grep -qxF "run: $SB_MAKE_RUN" "$1/cells/$2/FAILED"
}
last_status() { # ndjson -> the status of its last record (none when it has none)
	local s
	s=$(tail -n 1 "$1" 2>/dev/null | sed -n 's/.*"status":"\([^"]*\)".*/\1/p')
	echo "${s:-none}"
}
do_train_group() {
	local B=$1 key=$2 d gid G k t0 i crc attempt tries rc st
	d="$B/cells/$key" gid=$(group_of "$key")
	G="$B/groups/$gid"
	mkdir -p "$G"
	exec 9>>"$G/lock"
	if ! flock -n 9; then
		say "train $key: waiting for its group's process ($gid)"
		flock 9
	fi
	if cell_current "$B" "$key"; then
		say "train $(label "$B") $key ok (trained with its group $gid)"
		return 0
	fi
	if failed_this_run "$B" "$key"; then
		die 1 "train $key FAILED with its group $gid: $(sed -n 's/^error: //p' "$d/FAILED") (records kept; see $d/FAILED)"
	fi
	t0=$(now)
	# the group: this block's encoder cells of the same task, architecture and tier
	# that are out of date (and did not fail in this make)
	local todo=()
	while read -r k; do
		[ "$(group_of "$k")" = "$gid" ] || continue
		group_mode "$B/cells/$k" || continue
		if [ "$k" = "$key" ] || { ! cell_current "$B" "$k" && ! failed_this_run "$B" "$k"; }; then
			todo+=("$k")
		fi
	done < <(block_keys "$B")
	for k in "${todo[@]}"; do prepare_cell "$B" "$k"; done
	# every cell's run directory stays cells/KEY/work/CELL_ID, as with one cell per
	# process; the process writes them through links in the group's work directory
	local -a ids
	for k in "${todo[@]}"; do cat "$B/cells/$k/cell.json"; done >"$G/cells.ndjson"
	"$(prog train)" --ids "$G/cells.ndjson" >"$G/ids" || die 1 "train $gid: sb-train --ids failed on $G/cells.ndjson"
	mapfile -t ids <"$G/ids"
	[ ${#ids[@]} -eq ${#todo[@]} ] || die 1 "train $gid: sb-train --ids gave ${#ids[@]} ids for ${#todo[@]} cells"
	rm -rf "$G/work"
	mkdir -p "$G/work"
	for i in "${!todo[@]}"; do
		mkdir -p "$B/cells/${todo[$i]}/work/${ids[$i]}"
		ln -s "../../../cells/${todo[$i]}/work/${ids[$i]}" "$G/work/${ids[$i]}"
	done
	# one process per attempt; the device's slots bound the processes on it at once
	local -a left=("${!todo[@]}") again outs=() logs=()
	local P
	tries=$((1 + ${DEVICE_RETRIES:-2}))
	for ((attempt = 1; attempt <= tries; attempt++)); do
		for i in "${left[@]}"; do cat "$B/cells/${todo[$i]}/cell.json"; done >"$G/cells.ndjson"
		device_slot
		say "train $(label "$B") group $gid: ${#left[@]} cell(s) in one process on ${DEVICE:-cpu}$([ $attempt -eq 1 ] || echo " (attempt $attempt of $tries)") ..."
		rc=0
		# the group's processes are numbered (train-P.out, train-P.log), never overwritten
		P=$(($(find "$G" -maxdepth 1 -name 'train-*.log' | wc -l) + 1))
		outs+=("$G/train-$P.out") logs+=("$G/train-$P.log")
		run_logged "$G/train-$P.out" "$G/train-$P.log" "$(prog train)" -d "$SB_DATA" -o "$G/work" \
			--device "${DEVICE:-cpu}" -j "${DEVICE_CELLS:-0}" "$G/cells.ndjson" || rc=$?
		exec 7>&-
		again=()
		for i in "${left[@]}"; do
			st=$(last_status "$B/cells/${todo[$i]}/work/${ids[$i]}/train.ndjson")
			# a lost device; or a process that died by a signal (a driver abort, the OOM
			# killer) before the cell recorded its end
			if [ "$st" = failed_device ] || { [ $rc -ge 128 ] && [ "$st" = none ]; }; then again+=("$i"); fi
		done
		[ ${#again[@]} -gt 0 ] && [ $attempt -lt $tries ] || break
		if [ $rc -ge 128 ]; then
			say "train $gid: the process died (exit $rc, signal $((rc - 128))); retrying its ${#again[@]} unfinished cell(s) in a new process"
		else
			say "train $gid: ${#again[@]} cell(s) ended with failed_device (sb-train exit $rc); retrying them in a new process"
		fi
		left=("${again[@]}")
	done
	rm -rf "$G/work"
	# each cell: its records, then published or failed (a failure does not stop the others)
	local failed=0 mine=0
	for i in "${!todo[@]}"; do
		k=${todo[$i]}
		grep -hF "\"cell_id\":\"${ids[$i]}\"" "${outs[@]}" >"$B/cells/$k/train.out" 2>/dev/null || true
		{
			echo "trained with its group $gid in one sb-train process per attempt (logs: ${logs[*]})"
			grep -hF "${ids[$i]}" "${logs[@]}" 2>/dev/null || true
		} >"$B/cells/$k/train.log"
		st=$(last_status "$B/cells/$k/work/${ids[$i]}/train.ndjson")
		case $st in
		completed | failed_nonfinite_loss) crc=0 ;;
		*) crc=1 ;;
		esac
		# in a subshell: fail_cell exits, and only this cell fails
		if ! (publish_run "$B" "$k" "$crc" "sb-train exit $rc in its group's process ($gid)"); then
			failed=$((failed + 1))
			[ "$k" = "$key" ] && mine=1
		fi
	done
	say "train $(label "$B") group $gid: ${#todo[@]} cell(s), $failed failed ($(elapsed "$t0")) [$(count_done "$B" train.ndjson)/$(block_keys "$B" | wc -l) trained]"
	[ $mine = 0 ] || die 1 "train $key FAILED (records kept; see $d/FAILED)"
}
# hold one of the device's DEVICE_GROUPS slots on fd 7 (one group process at a time
# per device by default; the slots are per output tree; not under Slurm)
device_slot() {
	[ -z "${SLURM_JOB_ID:-}" ] || return 0 # under Slurm the job's allocation is the device
	local n=${DEVICE_GROUPS:-1} i dir="$SB_OUT/.device"
	mkdir -p "$dir"
	local dev=${DEVICE:-cpu}
	dev=${dev//[^A-Za-z0-9_.-]/_}
	for ((i = 0; i < n; i++)); do
		exec 7>>"$dir/$dev.$i.lock"
		flock -n 7 && return 0
		exec 7>&-
	done
	say "train: waiting for a free slot of the device ($dev, DEVICE_GROUPS=$n)"
	exec 7>>"$dir/$dev.0.lock"
	flock 7
}
fail_cell() { # celldir stage message
	{
		echo "stage: $2"
		echo "error: $3"
		echo "time: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "log: $1/$2.log"
		[ -z "${SB_MAKE_RUN:-}" ] || echo "run: $SB_MAKE_RUN"
	} >"$1/FAILED"
	# keep the attempt's records: move the work directory aside
	if [ -d "$1/work" ]; then
		echo "records: $(set_aside "$1" "$1/work")/work" >>"$1/FAILED"
	fi
	die 1 "$2 $(basename "$1") FAILED: $3 (records kept; see $1/FAILED)"
}

# ---- eval: one cell ----
do_eval() {
	local B=$1 key=$2 d rid t0 run
	d="$B/cells/$key"
	t0=$(now)
	check_cell "$d" eval "$d/train.ndjson"
	rid=$(readlink "$d/train.ndjson")
	rid=${rid#../../runs/}
	rid=${rid%%/*}
	run="$B/runs/$rid"
	rm -f "$d/FAILED"
	# the checkpoints sb-train sealed
	shopt -s nullglob
	local ck=("$run"/epoch-[0-9][0-9][0-9].safetensors)
	shopt -u nullglob
	if [ ${#ck[@]} -eq 0 ] && [ "$(outcome "$d")" != completed ]; then
		# a failure accepted as the outcome, before any epoch: a marker stands in
		scratch "$d/.val.tmp"
		printf '{"kind":"pipeline.cell_failed","v":1,"key":"%s","cell_id":"%s","outcome":"%s"}\n' \
			"$key" "$rid" "$(outcome "$d")" >"$d/.val.tmp"
		mv -f "$d/.val.tmp" "$d/val.ndjson"
		seal "$d/val.ndjson"
		return 0
	fi
	[ ${#ck[@]} -eq 0 ] || check_cell "$d" eval "${ck[@]}"
	say "eval $(label "$B") $key ..."
	run_logged "$d/eval.out" "$d/eval.log" "$(prog eval)" -q -d "$SB_DATA" -j "$TRAIN_THREADS" $([ "${EVAL_DEVICE:-cpu}" = cpu ] || echo "--device ${EVAL_DEVICE}") "$run" ||
		fail_cell "$d" eval "sb-eval failed"
	[ -s "$run/val.ndjson" ] || fail_cell "$d" eval "sb-eval wrote no $run/val.ndjson"
	seal "$run/val.ndjson"
	mv -f "$run/val.ndjson.sha256" "$d/val.ndjson.sha256"
	relink "../../runs/$rid/val.ndjson" "$d/val.ndjson"
	say "eval $(label "$B") $key ok ($(elapsed "$t0")) [$(count_done "$B" val.ndjson)/$(block_keys "$B" | wc -l) evaluated]"
}

# the validation logs of a block, for the programs (which read each cell's
# training status themselves); a marker of a failure before any epoch is left out.
# Every cells/KEY/val.ndjson that is not a link must be such a marker, sealed: a log
# edited in place (sed -i replaces the link by a file) is refused, not left out. Run in
# the stage's own shell (val_inputs runs in a process substitution, where die stops
# only the substitution).
check_val_markers() { # blockdir
	local B=$1 key f
	while read -r key; do
		f="$B/cells/$key/val.ndjson"
		[ -e "$f" ] && [ ! -L "$f" ] || continue
		check "$f"
		head -c 33 "$f" | grep -q '^{"kind":"pipeline.cell_failed"' ||
			die 3 "$f: a file where the link to its run's val.ndjson should be, and not a failure marker (edited in place? 'sed -i' replaces a link by a file): restore the link, or delete it and make to evaluate again"
	done < <(block_keys "$B")
}
val_inputs() { # blockdir -> lines "cells/KEY/val.ndjson<TAB>runs/ID/val.ndjson"
	local B=$1 key d rid
	while read -r key; do
		d="$B/cells/$key"
		[ -L "$d/val.ndjson" ] || continue
		rid=$(readlink "$d/val.ndjson")
		rid=${rid#../../runs/}
		printf '%s\t%s\n' "$d/val.ndjson" "$B/runs/$rid"
	done < <(block_keys "$B")
}
# the grid file a grid directory was expanded from (for options relative to it)
grid_file() { # griddir
	sed -n 's/^# generated by scripts\/grid from \([^ ]*\) .*/\1/p' "$1/.grid/cells.mk"
}
resolve_beside_grid() { # griddir path -> path (relative ones are beside the grid file)
	case "$2" in /*) echo "$2" ;; *) echo "$(dirname "$(grid_file "$1")")/$2" ;; esac
}
# the other blocks of the grid a stage also reads (option with_blocks=B1,B2 in PARAMS)
with_blocks() { # blockdir params-file
	local w
	for w in $(param "$2" with_blocks "" | tr , ' '); do
		[ -f "$(dirname "$1")/$w/params/criteria" ] || [ -d "$(dirname "$1")/$w/cells" ] || die 2 "$2: with_blocks names '$w', not a block of this grid"
		echo "$(dirname "$1")/$w"
	done
}

# threads of a single-process stage (freeze, test, stats): the CPUs Slurm gave
# the job, else every core
stage_threads() { echo "${SLURM_CPUS_PER_TASK:-0}"; }

# ---- freeze ----
do_freeze() {
	local B=$1 t0 links=() reals=() a b opts=() rc=0
	t0=$(now)
	local W m
	for W in "$B" $(with_blocks "$B" "$B/params/freeze"); do
		check_val_markers "$W"
		while IFS=$'\t' read -r a b; do links+=("$a"); reals+=("$b"); done < <(val_inputs "$W")
	done
	[ ${#links[@]} -gt 0 ] || die 1 "freeze $(label "$B"): no validation logs"
	check "${links[@]}"
	mapfile -t opts < <(stage_opts "$B/params/freeze" with_blocks switch_map)
	m=$(param "$B/params/freeze" switch_map "")
	if [ -n "$m" ]; then
		m=$(resolve_beside_grid "$(dirname "$B")" "$m")
		[ -f "$m" ] || die 1 "freeze $(label "$B"): the switch map $m is missing"
		opts+=(--switch-map "$m")
	fi
	if [ -f "$B/selection.json" ] && [ ! -e "$B/selection.json.sha256" ] && [ ! -e "$B/selection.reads.ndjson" ]; then
		# never sealed (a freeze killed between sb-freeze's write and the seal) and never
		# read (sb-test takes only a sealed selection): not a result, made again from scratch
		say "freeze $(label "$B"): $B/selection.json was never sealed (an interrupted freeze); freezing again"
		rm -f "$B/selection.json"
	fi
	if [ -f "$B/selection.json" ]; then
		# sb-freeze refuses to overwrite a selection; --force is recorded in the new one
		if [ -f "$B/selection.reads.ndjson" ] && [ "$REFREEZE" != 1 ]; then
			die 1 "freeze $(label "$B"): the validation records changed after the test read of $B/selection.json; refusing to re-freeze (REFREEZE=1 forces it, and the new selection records that it was forced)"
		fi
		opts+=(--force)
	fi
	say "freeze $(label "$B"): ${#reals[@]} validation logs ..."
	rm -f "$B"/.selection.json.tmp.* # a freeze killed outright left it half-written
	run_logged "$B/freeze.out" "$B/freeze.log" "$(prog freeze)" -q "${opts[@]}" -o "$B/selection.json" "${reals[@]}" || rc=$?
	[ $rc -eq 0 ] || die 1 "freeze $(label "$B") failed or refused (exit $rc; log: $B/freeze.log)"
	[ -s "$B/selection.json" ] || die 5 "sb-freeze wrote no $B/selection.json"
	seal "$B/selection.json"
	say "freeze $(label "$B") ok ($(elapsed "$t0"))"
}

# ---- test read ----
# Is the read in place (test/test.ndjson, sealed) the read of this selection (the payload
# SHA-256 its test.read record names) and of these test files (the SHA-256 each had then,
# against their sidecars, checked just before)? Then newer timestamps alone (a touched or
# copied selection or test file) do not make it stale.
read_is_current() { # blockdir testfile...
	local B=$1 f=$1/test/test.ndjson rec want got t h
	shift
	[ -f "$f" ] && [ -f "$f.sha256" ] && (cd "$(dirname "$f")" && sha256sum -c --status test.ndjson.sha256) || return 1
	rec=$(grep -m1 '"kind":"test.read"' "$f") || return 1
	want=$(grep -o '"sha256": *"[0-9a-f]\{64\}"' "$B/selection.json" | tail -n 1 | grep -o '[0-9a-f]\{64\}')
	got=$(printf '%s' "$rec" | grep -o '"selection_sha256":"[0-9a-f]\{64\}"' | grep -o '[0-9a-f]\{64\}')
	[ -n "$want" ] && [ "$want" = "$got" ] || return 1
	# the tasks the read read (a task of the block that was not selected is not in it)
	for t in "$@"; do
		printf '%s' "$rec" | grep -q "\"task\":\"$(basename "$(dirname "$t")")\"," || continue
		h=$(cut -d' ' -f1 "$t.sha256")
		printf '%s' "$rec" | grep -q "\"task\":\"$(basename "$(dirname "$t")")\",\"path\":\"[^\"]*\",\"sha256\":\"$h\"" || return 1
	done
}
ledger_lines() { # blockdir -> the lines of its selection's test-read ledger (0 without one)
	if [ -f "$1/selection.reads.ndjson" ]; then wc -l <"$1/selection.reads.ndjson"; else echo 0; fi
}
do_test() {
	local B=$1 t0 opts=() links=() a b task tf=() n reason=""
	t0=$(now)
	local W runs=("$B/runs")
	check_val_markers "$B"
	while IFS=$'\t' read -r a b; do links+=("$a"); done < <(val_inputs "$B")
	# the cells of the blocks the freeze also read (with_blocks) are part of the read too
	for W in $(with_blocks "$B" "$B/params/freeze"); do
		check_val_markers "$W"
		while IFS=$'\t' read -r a b; do links+=("$a"); done < <(val_inputs "$W")
		runs+=("$W/runs")
	done
	for task in $(block_keys "$B" | cut -d. -f1 | sort -u); do tf+=("$SB_DATA/$task/test.safetensors"); done
	check "$B/selection.json" "${links[@]}" "${tf[@]}"
	mapfile -t opts < <(stage_opts "$B/params/test")
	if { [ -z "$RETEST" ] || [ "$RETEST" = 0 ]; } && read_is_current "$B" "${tf[@]}"; then
		touch "$B/test/test.ndjson"
		say "test read $(label "$B"): the read in place is of this selection and these test files (only timestamps are newer): it stands"
		return 0
	fi
	local moved=""
	if [ -f "$B/test/test.ndjson" ]; then
		if [ "$B/selection.json" -nt "$B/test/test.ndjson" ]; then
			# a new selection (REFREEZE=1): its read replaces the old one, which is kept
			[ "$REFREEZE" = 1 ] && reason="the selection was re-frozen (make REFREEZE=1)"
		else
			# the same selection again: only when asked for (sb-test records the reason)
			[ -n "$RETEST" ] && [ "$RETEST" != 0 ] || die 1 "test read $(label "$B"): $B/test/test.ndjson is not the sealed read of this selection and these test files (it, its sidecar or a test file changed), and the test split is read once; RETEST=REASON asks for a recorded re-read"
		fi
		n=$(date -u +%Y%m%dT%H%M%SZ)
		mv "$B/test" "$B/test.superseded.$n"
		moved="$B/test.superseded.$n"
		say "test read $(label "$B"): the previous read is kept in $moved"
	fi
	if [ -n "$RETEST" ] && [ "$RETEST" != 0 ]; then
		reason=$RETEST
		[ "$reason" = 1 ] && reason="make RETEST=1"
	fi
	[ -z "$reason" ] || opts+=(--reread "$reason")
	local lines0
	lines0=$(ledger_lines "$B")
	mkdir -p "$B/test"
	# what a read killed outright (SIGKILL) left half-written: sb-test's temporary output
	rm -f "$B/test"/.test.ndjson.tmp.* "$B/test/bits"/.*.tmp.*
	say "test read $(label "$B") ..."
	if ! run_logged "$B/test.out" "$B/test.log" "$(prog test)" -q "${opts[@]}" -s "$B/selection.json" -d "$SB_DATA" \
		-o "$B/test" -j "$(stage_threads)" "${runs[@]}"; then
		# stopped before the read was recorded (refused by the guard, or a device or test file
		# that would not do: the ledger did not grow): the previous read goes back
		if [ -n "$moved" ] && [ "$(ledger_lines "$B")" = "$lines0" ] && [ ! -e "$B/test/test.ndjson" ]; then
			rm -rf "${B:?}/test" && mv "$moved" "$B/test"
			say "test read $(label "$B"): stopped before the read was recorded; the previous read is back in $B/test"
		fi
		# a read that began counts, finished or not (the split was opened; an interrupted
		# make leaves such a read in the ledger): another needs a reason, recorded
		grep -qE 'single-read.*(already read|read before)' "$B/test.log" &&
			die 1 "test read $(label "$B"): refused: this selection's test split was read before, perhaps by a read that was interrupted (the ledger: ${B%/}/selection.reads.ndjson); RETEST=REASON reads it again, recording the reason"
		die 1 "test read $(label "$B") failed or was refused (log: $B/test.log)"
	fi
	[ -s "$B/test/test.ndjson" ] || die 5 "sb-test wrote no $B/test/test.ndjson"
	seal "$B/test/test.ndjson"
	say "test read $(label "$B") ok ($(elapsed "$t0"))"
}

# ---- statistics: tables and figures ----
stats_run() { # blockdir outdir opts... -- inputs...
	local B=$1 o=$2 opts=() rc=0
	shift 2
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	say "stats $(label "$B"): $# record files -> $o ..."
	run_logged "$o/stats.out" "$o/stats.log" "$(prog stats)" -q "${opts[@]}" -o "$o" -p "$o" "$@" || rc=$?
	[ $rc -eq 0 ] && return 0
	# with --rule, exit 2 (power condition not met) and 3 (the rule failed) are results, told
	# from a usage error or malformed input (also 2 and 3) by the stats.ndjson that sb-stats
	# writes (into this fresh directory) before it exits with a rule's status, and never on
	# those errors
	if [ "$(param "$B/params/stats" rule false)" = true ] && { [ $rc -eq 2 ] || [ $rc -eq 3 ]; } &&
		[ -s "$o/stats.ndjson" ]; then
		echo "$rc" >"$o/rule-exit"
		return 0
	fi
	die 1 "stats $(label "$B") failed (exit $rc; log: $o/stats.log)"
}
do_stats() {
	local B=$1 t0 links=() reals=() a b inputs=() opts=() S rc=0 f
	t0=$(now)
	S="$B/stats"
	check_val_markers "$B"
	while IFS=$'\t' read -r a b; do links+=("$a"); reals+=("$b"); done < <(val_inputs "$B")
	inputs=("${reals[@]}")
	if [ -f "$B/test/test.ndjson" ]; then
		check "$B/test/test.ndjson"
		inputs+=("$B/test/test.ndjson")
	fi
	check "${links[@]}"
	# published=FILE: the published values to measure against (published.value records,
	# docs/sb-stats.md), read with the records; a repository file, hashed in run.meta
	local pub
	pub=$(param "$B/params/stats" published "")
	if [ -n "$pub" ]; then
		pub=$(resolve_beside_grid "$(dirname "$B")" "$pub")
		[ -f "$pub" ] || die 2 "$B/params/stats: published=$pub: no such file"
		inputs+=("$pub")
	fi
	mapfile -t opts < <(stage_opts "$B/params/stats" group_by published)
	scratch "$S.tmp"
	rm -rf "$S.tmp"
	mkdir -p "$S.tmp"
	if [ "$(param "$B/params/stats" group_by "")" = epochs ]; then
		# one analysis per budget: cells of different budgets are different runs of
		# the same (task, method, seed), which sb-stats would take for reruns
		local e ins
		for e in $(block_keys "$B" | sed 's/.*\.e//' | sort -n -u); do
			ins=()
			for a in "${reals[@]}"; do
				grep -q "\"epochs\":$e[,}]" "$(dirname "$a")/cell.json" && ins+=("$a")
			done
			[ ${#ins[@]} -gt 0 ] || continue
			[ -n "$pub" ] && ins+=("$pub")
			mkdir -p "$S.tmp/e$e"
			stats_run "$B" "$S.tmp/e$e" "${opts[@]}" -- "${ins[@]}"
			sed "s/^{/{\"budget_epochs\":$e,/" "$S.tmp/e$e/stats.ndjson" >>"$S.tmp/stats.ndjson"
		done
	else
		stats_run "$B" "$S.tmp" "${opts[@]}" -- "${inputs[@]}"
	fi
	[ -s "$S.tmp/stats.ndjson" ] || die 5 "sb-stats wrote no $S.tmp/stats.ndjson"
	while IFS= read -r -d '' f; do
		case "$f" in *.sha256 | */stats.out | */stats.log) ;; *) seal "$f" ;; esac
	done < <(find "$S.tmp" -type f -print0)
	rm -rf "$S"
	mv "$S.tmp" "$S"
	say "stats $(label "$B") ok ($(elapsed "$t0"))"
}

# ---- PROTOCOL A8's analyses (stage a8 analysis=m1|m2|bottomk|lineardecay|m3map|m3
#      [switch_epochs=FILE, relative to the grid file] [trajectory=GRID/BLOCK m2=GRID/BLOCK]
#      [with_blocks=B,...]; docs/sb-a8.md) ----
do_a8() {
	local B=$1 G t0 links=() reals=() a b mode inc A opts=()
	t0=$(now)
	G=$(dirname "$B")
	local W k x
	for W in "$B" $(with_blocks "$B" "$B/params/a8"); do
		check_val_markers "$W"
		while IFS=$'\t' read -r a b; do links+=("$a"); reals+=("$b"); done < <(val_inputs "$W")
	done
	check "${links[@]}"
	mode=$(param "$B/params/a8" analysis "")
	[ -n "$mode" ] || die 2 "$B/params/a8: no analysis= (m1, m2, bottomk, lineardecay, m3map or m3)"
	inc=$(param "$B/params/a8" switch_epochs "")
	if [ -n "$inc" ]; then
		inc=$(resolve_beside_grid "$G" "$inc")
		opts+=(--switch-epochs "$inc")
	fi
	# m3map's inputs from other grids: trajectory=GRID/BLOCK, m2=GRID/BLOCK (their a8 records)
	for k in trajectory m2; do
		x=$(param "$B/params/a8" $k "")
		[ -n "$x" ] || continue
		x="$SB_OUT/$x/a8/a8.ndjson"
		check "$x"
		opts+=(--$k "$x")
	done
	# m3: the test read of this block
	if [ "$mode" = m3 ]; then
		check "$B/test/test.ndjson"
		reals+=("$B/test/test.ndjson")
	fi
	A="$B/a8"
	scratch "$A.tmp"
	rm -rf "$A.tmp"
	mkdir -p "$A.tmp"
	say "a8 $(label "$B"): sb-a8 $mode on ${#reals[@]} validation logs ..."
	run_logged "$A.tmp/a8.ndjson" "$A.tmp/a8.log" "$(prog a8)" -q "$mode" --md "$A.tmp/a8.md" "${opts[@]}" "${reals[@]}" ||
		die 1 "a8 $(label "$B") failed (log: $A.tmp/a8.log)"
	seal "$A.tmp/a8.ndjson" "$A.tmp/a8.md"
	rm -rf "$A"
	mv "$A.tmp" "$A"
	[ -z "$inc" ] || say "a8 $(label "$B"): switch epochs -> $inc"
	say "a8 $(label "$B") ok: $(json_field "$A/a8.ndjson" verdict) ($(elapsed "$t0"))"
}

# ---- the grid's report ----
title() {
	case "$1" in
	table2) echo "Table 2: validation accuracy, sparse minus softmax (PROTOCOL A7)" ;;
	test) echo "The test read (PROTOCOL A6)" ;;
	budget) echo "Training budget: best validation accuracy within the first E epochs (PROTOCOL A9)" ;;
	detail) echo "Paired statistics in detail" ;;
	test_detail) echo "The test read in detail" ;;
	curves) echo "Validation accuracy by epoch" ;;
	published) echo "Ours against the published values (PROTOCOL A9)" ;;
	figure) echo "Figure" ;;
	*) echo "$1" ;;
	esac
}
do_report() {
	local G=$1 name b B f nc nf na
	name=$(basename "$G")
	local blocks
	blocks=$(sed -n 's/^{"grid":"[^"]*","block":"\([^"]*\)".*/\1/p' "$G/.grid/cells.ndjson" | uniq | awk '!s[$0]++')
	# everything the report quotes or links is checked against its sidecar first
	local ins=() sd0
	for b in $blocks; do
		for f in "$G/$b/selection.json" "$G/$b/test/test.ndjson" "$G/$b/a8/a8.md"; do [ -f "$f" ] && ins+=("$f"); done
		for sd0 in "$G/$b/stats" "$G/$b"/stats/e[0-9]*; do
			[ -d "$sd0" ] || continue
			for f in "$sd0"/*.md "$sd0"/*.svg "$sd0"/rule-exit; do [ -f "$f" ] && ins+=("$f"); done
		done
	done
	check "${ins[@]}"
	scratch "$G/.report.md.tmp"
	{
		echo "# sparsebench — $name"
		echo
		echo "Made by \`make $name\` from \`$(sed -n 's/^# generated by scripts\/grid from \([^ ]*\).*/\1/p' "$G/.grid/cells.mk")\`."
		echo "Every output has a \`.sha256\` sidecar; \`make out-verify OUTTREE=DIR\`, DIR being the directory of this report, checks them all."
		for b in $blocks; do
			B="$G/$b"
			nc=$(block_keys "$B" | wc -l)
			nf=0
			for f in "$B"/cells/*/OUTCOME; do [ -f "$f" ] && nf=$((nf + 1)); done
			echo
			echo "## $b"
			echo
			if [ $nf -gt 0 ]; then
				echo "$nc cells: $((nc - nf)) completed, $nf failed (recorded as their outcome: a non-finite loss, or ACCEPT_FAILED=1; the selection and statistics use completed cells only)."
			else
				echo "$nc cells, all completed."
			fi
			# cells taken from another grid's tree (make GRID-adopt): how many, from where
			na=$(find "$B/cells" -mindepth 2 -maxdepth 2 -name ADOPTED 2>/dev/null | wc -l)
			if [ "$na" -gt 0 ]; then
				echo "Of these, $na were trained by another grid and adopted (\`make $name-adopt\`; \`cells/KEY/ADOPTED\`), from: $(
					sed -n 's/^from: //p' "$B"/cells/*/ADOPTED | sed 's|/[^/]*/cells/[^/]*$||' | sort | uniq -c |
						awk '{ printf "%s`%s` (%d)", (NR > 1 ? ", " : ""), $2, $1 }')."
			fi
			[ -f "$B/selection.json" ] && echo "Selection: \`$b/selection.json\` (SHA-256 \`$(cut -d' ' -f1 "$B/selection.json.sha256")\`)."
			[ -f "$B/test/test.ndjson" ] && echo "Test read: \`$b/test/test.ndjson\` (SHA-256 \`$(cut -d' ' -f1 "$B/test/test.ndjson.sha256")\`)."
			if [ -s "$B/params/criteria" ]; then
				echo
				echo "Predeclared criteria (fixed in the grid file before the run; judge them against the statistics below):"
				echo
				sed 's/^/- /' "$B/params/criteria"
			fi
			if [ -f "$B/a8/a8.md" ]; then
				echo
				echo "Computed against these criteria by sb-a8 (docs/sb-a8.md; records: \`$b/a8/a8.ndjson\`):"
				echo
				cat "$B/a8/a8.md"
			fi
			[ -f "$B/stats/rule-exit" ] && echo "The PROTOCOL A7 rule: sb-stats --rule exited $(cat "$B/stats/rule-exit") (2: power condition not met; 3: the rule failed)."
			# sb-stats' tables (aggregate/: table2 detail budget test test_detail probes probe_pairs)
			local sd g
			for sd in "$B/stats" "$B"/stats/e[0-9]*; do
				[ -d "$sd" ] || continue
				g=""
				[ "$sd" = "$B/stats" ] || g=" (budget ${sd##*/e} epochs)"
				for f in table2 published test budget detail test_detail probes probe_pairs table; do
					[ -f "$sd/$f.md" ] || continue
					echo
					# sb-stats starts its tables with their own heading
					if head -n 1 "$sd/$f.md" | grep -q '^#'; then
						sed '1s/^#* */### /; 1s/$/'"$g"'/' "$sd/$f.md"
					else
						echo "### $(title "$f")$g"
						echo
						cat "$sd/$f.md"
					fi
					echo
					echo "CSV and LaTeX: \`${sd#"$G/"}/$f.csv\`, \`${sd#"$G/"}/$f.tex\`."
				done
				for f in "$sd"/*.svg; do
					[ -f "$f" ] || continue
					echo
					echo "![$(title "$(basename "$f" .svg)")$g](${f#"$G/"})"
				done
			done
		done
		# blocks that wait for a file an earlier block's stage writes (scripts/grid "await")
		sed -n "s/^$name\.\([a-z0-9_]*\)\.AWAITS := \(.*\)/\1 \2/p" "$G/.grid/cells.mk" | while read -r b f; do
			echo
			echo "## $b"
			echo
			echo "Waiting for \`$f\`, which an earlier block's stage writes; \`make $name\` runs this block once it exists."
		done
	} >"$G/.report.md.tmp"
	mv -f "$G/.report.md.tmp" "$G/report.md"
	seal "$G/report.md"
	say "report: $G/report.md"
}

# ---- failed and unfinished cells ----
pool_intact() { # task: its pool still hashes as its sidecar says (not only its time restored)
	local p="$SB_DATA/$1/pool.safetensors"
	[ -f "$p.sha256" ] && (cd "$(dirname "$p")" && sha256sum -c --status pool.safetensors.sha256)
}
do_failed() {
	local G=$1 name b key d nfail=0 nmiss=0 nacc=0 total=0
	name=$(basename "$G")
	[ -f "$G/.grid/cells.ndjson" ] || die 2 "$G: not an expanded grid"
	while read -r b key; do
		total=$((total + 1))
		d="$G/$b/cells/$key"
		if [ -f "$d/FAILED" ] && ! failed_this_run "$G/$b" "$key" && cell_current "$G/$b" "$key" &&
			[ -e "$d/val.ndjson" ] && ! [ "$d/train.ndjson" -nt "$d/val.ndjson" ] && pool_intact "${key%%.*}"; then
			# a failure of an earlier make whose cause went away without a recipe running
			# (an input restored with its old time, so make finds the cell up to date)
			say "  $b/$key: up to date; its FAILED of an earlier make ($(sed -n 's/^error: //p' "$d/FAILED" | cut -c1-120)) no longer applies: removed"
			rm -f "$d/FAILED"
		fi
		if [ -f "$d/FAILED" ]; then
			nfail=$((nfail + 1))
			[ $nfail -le 50 ] && say "  FAILED $b/$key: $(sed -n 's/^error: //p' "$d/FAILED") ($(sed -n 's/^stage: //p' "$d/FAILED"); $d/FAILED)"
		elif [ ! -e "$d/val.ndjson" ]; then
			nmiss=$((nmiss + 1))
		elif [ -f "$d/OUTCOME" ]; then
			nacc=$((nacc + 1))
			[ $nacc -le 50 ] && say "  recorded failure $b/$key: $(cat "$d/OUTCOME")"
		fi
	done < <(sed -n 's/^{"grid":"[^"]*","block":"\([^"]*\)","key":"\([^"]*\)".*/\1 \2/p' "$G/.grid/cells.ndjson")
	[ $nfail -gt 50 ] && say "  ... and $((nfail - 50)) more (make $name-failed)"
	if [ $nfail -gt 0 ] || [ $nmiss -gt 0 ]; then
		say "$name: $nfail of $total cells FAILED (records kept), $nmiss not finished; 'make $name' again retries only these"
		return 1
	fi
	[ $nacc -gt 0 ] && say "$name: $nacc cells ended in a failure recorded as their outcome (a non-finite loss, or ACCEPT_FAILED=1)"
	say "$name: all $total cells trained and evaluated"
}

# ---- adopt: the finished cells of another grid's tree ----
# A cell is its cell.json: the same file, byte for byte, is the same cell (the same cell
# id, the same run). `stage.sh adopt GRIDDIR FROM` takes into GRIDDIR every cell that has
# no run yet and that FROM, another grid's output directory (e.g. out/fmnist_check),
# finished: the run directory (hard links where FROM is on the same file system, else a
# copy), the sidecars, logs and links, with their times, so that make takes the cell as
# made and trains only the others. A cell is taken only when it verifies: its run id is
# the cell id of the cell.json (sb-train --ids), its sidecars match, its checkpoints have
# the SHA-256 train.ndjson records, and its records name the pool file this tree's SB_DATA
# holds now (its SHA-256).
# Freeze, test and stats outputs are never taken: they belong to a grid. cells/KEY/ADOPTED
# says where a cell came from.
# FROM may be a block's directory, a grid's, or an output tree of several grids (this
# grid's own tree, GRIDDIR, is passed over)
adopt_source() { # from key celljson griddir -> the source cell directory
	local c
	for c in "$1"/cells/"$2" "$1"/*/cells/"$2" "$1"/*/*/cells/"$2"; do
		[ -f "$c/cell.json" ] && [ -L "$c/train.ndjson" ] && [ ! -f "$c/FAILED" ] && cmp -s "$c/cell.json" "$3" || continue
		# a failure that grid accepted (ACCEPT_FAILED=1) is its decision, not a result: not
		# taken (a non-finite loss is a result of the protocol, PROTOCOL A4: taken)
		[ ! -f "$c/OUTCOME" ] || [ "$(cat "$c/OUTCOME")" = failed:failed_nonfinite_loss ] || continue
		case "$(cd "$c" && pwd -P)/" in "$4"/*) continue ;; esac
		echo "$c"
		return 0
	done
	return 1
}
# why SOURCE cannot be adopted into CELLDIR (printed; exit 1), or nothing (exit 0)
adopt_check() { # celldir source
	local d=$1 s=$2 key rid task pool want have f files msg
	key=$(basename "$d") task=${key%%.*}
	rid=$(readlink "$s/train.ndjson")
	[[ $rid =~ ^\.\./\.\./runs/([^/]+)/train\.ndjson$ ]] || { echo "$s/train.ndjson: not a link into runs/"; return 1; }
	rid=${BASH_REMATCH[1]}
	[ -d "$(dirname "$(dirname "$s")")/runs/$rid" ] || { echo "$(dirname "$(dirname "$s")")/runs/$rid: missing"; return 1; }
	[ ! -e "$(dirname "$(dirname "$d")")/runs/$rid" ] || { echo "$(dirname "$(dirname "$d")")/runs/$rid exists already (left alone)"; return 1; }
	# the run is this cell.json's (its cell id), not one trained before the source's
	# cell.json was rewritten to the same bytes as ours (re-expanded, not trained again)
	want=$("$(prog train)" --ids "$d/cell.json" 2>&1) || { echo "$d/cell.json: sb-train --ids: ${want%%$'\n'*}"; return 1; }
	[ "$want" = "$rid" ] || { echo "$s: its run $rid was not made from this cell.json (cell id $want): the cell changed there and was not trained again"; return 1; }
	files=("$s/train.ndjson")
	[ ! -e "$s/val.ndjson" ] || files+=("$s/val.ndjson")
	if ! msg=$(check "${files[@]}" 2>&1); then echo "${msg%%$'\n'*}"; return 1; fi
	# every checkpoint as train.ndjson (verified just above) records it (the last record of each)
	while read -r f want; do
		[ -f "$(dirname "$(dirname "$s")")/runs/$rid/$f" ] || { echo "$(dirname "$(dirname "$s")")/runs/$rid/$f: missing (train.ndjson records it)"; return 1; }
		have=$(sha256sum <"$(dirname "$(dirname "$s")")/runs/$rid/$f" | cut -d' ' -f1)
		[ "$have" = "$want" ] || { echo "$(dirname "$(dirname "$s")")/runs/$rid/$f: SHA-256 $have, train.ndjson records $want"; return 1; }
	done < <(sed -n 's/^{"kind":"train\.epoch".*"checkpoint":"\([^"/]*\)","checkpoint_sha256":"\([0-9a-f]*\)".*/\1 \2/p' "$s/train.ndjson" |
		awk '{ h[$1] = $2 } END { for (f in h) print f, h[f] }')
	pool=$SB_DATA/$task/pool.safetensors
	[ -f "$pool.sha256" ] || { echo "$pool: missing (fetch it first: make GRID-data)"; return 1; }
	have=$(cut -d' ' -f1 "$pool.sha256")
	for f in "${files[@]}"; do
		want=$(grep -m 1 '"kind":"run.meta"' "$f" | grep -o "/$task/pool\.safetensors\",\"sha256\":\"[0-9a-f]*\"" | head -n 1 | sed 's/.*"sha256":"//; s/"$//' || true)
		[ "$want" = "$have" ] || { echo "$f: made from a pool file with SHA-256 ${want:-(none recorded)}; this tree's $pool has $have"; return 1; }
	done
}
# take SOURCE into CELLDIR (adopt_check said yes): the run directory, then the cell's own
# files (the same cell.json, older; sidecars, logs), then the links, as publish_run does
adopt_copy() { # celldir source
	local d=$1 s=$2 key rid runs src f v=
	key=$(basename "$d")
	rid=$(readlink "$s/train.ndjson") rid=${rid#../../runs/} rid=${rid%/train.ndjson}
	runs=$(dirname "$(dirname "$d")")/runs src=$(dirname "$(dirname "$s")")/runs/$rid
	[ ! -e "$s/val.ndjson" ] || v=val
	mkdir -p "$runs"
	[ ! -e "$d/work" ] || say "adopt $key: set aside an unfinished attempt in $(set_aside "$d" "$d/work")"
	scratch "$runs/.$rid.adopt.tmp"
	cp -al "$src" "$runs/.$rid.adopt.tmp" 2>/dev/null || { rm -rf "$runs/.$rid.adopt.tmp" && cp -a "$src" "$runs/.$rid.adopt.tmp"; }
	mv "$runs/.$rid.adopt.tmp" "$runs/$rid"
	for f in cell.json train.ndjson.sha256 train.log train.out OUTCOME ${v:+val.ndjson.sha256 eval.log eval.out}; do
		[ -e "$s/$f" ] || continue
		scratch "$d/.$f.adopt.tmp"
		cp -p "$s/$f" "$d/.$f.adopt.tmp"
		mv -f "$d/.$f.adopt.tmp" "$d/$f"
	done
	rm -f "$d/FAILED"
	scratch "$d/.ADOPTED.tmp"
	printf 'from: %s\nrun: %s\nat: %s\n' "$(cd "$s" && pwd -P)" "$rid" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$d/.ADOPTED.tmp"
	mv -f "$d/.ADOPTED.tmp" "$d/ADOPTED"
	relink "../../runs/$rid" "$d/run"
	relink "../../runs/$rid/train.ndjson" "$d/train.ndjson"
	[ -z "$v" ] || relink "../../runs/$rid/val.ndjson" "$d/val.ndjson"
	[ ! "$SB_DATA/${key%%.*}/pool.safetensors" -nt "$d/train.ndjson" ] ||
		say "adopt $key: $SB_DATA/${key%%.*}/pool.safetensors is newer than the run, so make will train the cell again"
}
do_adopt() {
	local G=$1 F=${2:-} b key d s why gp n=0 have=0 none=0 refused=0 total=0
	[ -n "$F" ] || die 2 "adopt: FROM=DIR is needed: the output directory of the grid whose finished cells to take (e.g. out/fmnist_check)"
	[ -f "$G/.grid/cells.ndjson" ] || die 2 "$G: not an expanded grid"
	[ -d "$F" ] || die 2 "$F: no such directory"
	gp=$(cd "$G" && pwd -P)
	while read -r b key; do
		total=$((total + 1))
		d="$G/$b/cells/$key"
		if [ -e "$d/train.ndjson" ]; then have=$((have + 1)); continue; fi
		s=$(adopt_source "$F" "$key" "$d/cell.json" "$gp") || { none=$((none + 1)); continue; }
		if why=$(adopt_check "$d" "$s"); then
			adopt_copy "$d" "$s"
			n=$((n + 1))
		else
			refused=$((refused + 1))
			say "adopt $b/$key: refused: $why"
		fi
	done < <(sed -n 's/^{"grid":"[^"]*","block":"\([^"]*\)","key":"\([^"]*\)".*/\1 \2/p' "$G/.grid/cells.ndjson")
	say "adopt $(basename "$G"): $n of $total cells taken from $F ($have had a run already, $none not finished there or not the same cell, $refused refused)"
	[ $refused -eq 0 ] || return 3
}

# ---- output manifests ----
manifest_gen() { # tree
	echo "path,size_bytes,sha256"
	(cd "$1" && find . -type f ! -name MANIFEST.csv ! -name '*.tmp' ! -name '.*.tmp.*' ! -path '*.grid/*lock' -printf '%P\n' | sort |
		while IFS= read -r f; do
			case "$f" in *,* | *'"'*) die 2 "manifest: unsupported file name: $f" ;; esac
			printf '%s,%s,%s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum <"$f" | cut -d' ' -f1)"
		done)
}
do_manifest() {
	[ -d "$1" ] || die 2 "$1: no such output tree"
	scratch "$1/.MANIFEST.csv.tmp"
	manifest_gen "$1" >"$1/.MANIFEST.csv.tmp"
	mv -f "$1/.MANIFEST.csv.tmp" "$1/MANIFEST.csv"
	say "$1/MANIFEST.csv: $(($(wc -l <"$1/MANIFEST.csv") - 1)) files"
}
do_verify() {
	local T=$1 bad=0 n=0 f
	[ -d "$T" ] || die 2 "$T: no such output tree"
	# every sidecar in the tree, but those of attempts set aside (kept, not trusted)
	# and of a cell in training (matched below the tree only: a tree that lies under a
	# directory named work, e.g. /work/out, was once passed over whole)
	while IFS= read -r -d '' f; do
		n=$((n + 1))
		f=${f#./}
		(check "$T/${f%.sha256}") || bad=1
	done < <(cd "$T" && find . \( -path './*/attempts/*' -o -path './*/work/*' \) -prune -o -name '*.sha256' -print0)
	say "$T: $n sidecars checked"
	if [ -f "$T/MANIFEST.csv" ]; then
		scratch "$T/.manifest.diff.tmp"
		if ! diff <(manifest_gen "$T") "$T/MANIFEST.csv" >"$T/.manifest.diff.tmp"; then
			say "$T/MANIFEST.csv does not match the tree (< now, > manifest):"
			head -n 20 "$T/.manifest.diff.tmp" >&2
			bad=1
		else
			say "$T/MANIFEST.csv matches $(($(wc -l <"$T/MANIFEST.csv") - 1)) files"
		fi
		rm -f "$T/.manifest.diff.tmp"
	fi
	[ $bad -eq 0 ] || die 3 "$T: verification failed"
}
# digest: the results of a tree, for comparing two runs of the same cells (the
# -j, resume and Slurm tests). Records lose the fields that legitimately vary
# (run.meta, times, hosts, paths, argv, threads, devices, versions) and every
# SHA-256 (those of files are compared through the files themselves); binary
# files (checkpoints, bitmaps) count by their hash.
do_digest() {
	local T=$1
	(cd "$T" && find . \( -name '*.ndjson' -o -name '*.md' -o -name '*.csv' -o -name '*.tex' -o -name '*.svg' -o -name '*.json' \
		-o -name '*.safetensors' -o -name '*.bits' \) ! -path './.grid/*' ! -path '*/groups/*' ! -path '*/attempts/*' ! -path '*/work/*' -printf '%P\n' | sort |
		while IFS= read -r f; do
			[ -e "$f" ] || continue
			echo "== $f"
			case "$f" in
			*.safetensors | *.bits) sha256sum <"$f" ;;
			*) grep -v '"kind":"run.meta"' "$f" |
				sed -E -e 's/"[a-z_]*(seconds|_s|time|host|path|argv|threads|device|version|samples_per_s|peak_memory_mb|mtime|size_bytes|frozen_at[a-z_]*)": ?("[^"]*"|[-0-9.eE+]+|null|\[[^]]*\])/"\1":"~"/g' \
					-e 's/[0-9a-f]{64}/~/g' || true ;;
			esac
		done) | if [ "${2:-}" = -v ]; then cat; else sha256sum | cut -d' ' -f1; fi
}

main() {
cmd=${1:-}
[ -n "$cmd" ] || die 2 "usage: pipelines/stage.sh fetch|train|eval|freeze|test|stats|a8|report|group|failed|adopt|check|seal|manifest|verify|digest ..."
shift
case "$cmd" in
fetch) do_fetch "$@" ;;
train) do_train "$@" ;;
eval) do_eval "$@" ;;
freeze) do_freeze "$@" ;;
test) do_test "$@" ;;
stats) do_stats "$@" ;;
a8) do_a8 "$@" ;;
report) do_report "$@" ;;
group) do_group "$@" ;;
failed) do_failed "$@" ;;
check) check "$@" ;;
seal) seal "$@" ;;
manifest) do_manifest "$@" ;;
verify) do_verify "$@" ;;
digest) do_digest "$@" ;;
adopt) do_adopt "$@" ;;
*) die 2 "unknown subcommand '$cmd'" ;;
esac
}
# one line, read whole before it runs: editing this file while a grid runs
# cannot make a running recipe execute half-read text
main "$@"; exit

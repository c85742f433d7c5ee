#!/usr/bin/env bash
# pipelines/slurm.sh — `make GRID SCHEDULER=slurm`: the same cells as the local run,
# submitted as Slurm job arrays (one cell per array task, throttled), then one job
# per block stage chained with dependencies: cells -> freeze -> test -> stats + report.
#
#   pipelines/slurm.sh submit GRID GRIDDIR [--dry-run]
#   pipelines/slurm.sh wait GRIDDIR [TIMEOUT_S]     wait for the last submission's jobs;
#                                                   exit 0 when all completed
#
# It runs from a make recipe (pipelines/common.mk), in the repository root, with
# the pipeline's variables in the environment. What it does:
#   1. fetches the datasets here, on the submitting host (compute nodes are often offline);
#   2. asks make which cell targets are out of date (make -n -k GRID-cells), so a
#      resubmission sends only unfinished or failed cells;
#   3. writes GRIDDIR/.slurm/ID/{cells.txt,array.sh,stage.sh job scripts} and
#      submits them; every job runs pipelines/stage.sh (array tasks) or make (the
#      stage jobs) in this same directory, which must be on a shared filesystem.
#
# Settings (make variables or environment), see docs/pipelines.md:
#   SB_SLURM_PARTITION SB_SLURM_ACCOUNT SB_SLURM_QOS  where to run
#   SB_SLURM_TIME      time limit per job (default 04:00:00)
#   SB_SLURM_CPUS      CPUs per cell (default TRAIN_THREADS)
#   SB_SLURM_MEM       memory per cell (default 4G)
#   SB_SLURM_THROTTLE  at most this many cells at once per array (default 64)
#   SB_SLURM_MAX_ARRAY array size limit of the cluster (MaxArraySize - 1; default 1000)
#   SB_SLURM_ARGS      extra sbatch arguments for every job (e.g. "--gres=gpu:1")
set -eu -o pipefail
export LC_ALL=C
MAKE=${MAKE:-make}

die() { echo "slurm: $*" >&2; exit "${rc:-1}"; }
say() { echo "slurm: $*" >&2; }

sbatch_common() {
	local a=()
	[ -n "${SB_SLURM_PARTITION:-}" ] && a+=(--partition "$SB_SLURM_PARTITION")
	[ -n "${SB_SLURM_ACCOUNT:-}" ] && a+=(--account "$SB_SLURM_ACCOUNT")
	[ -n "${SB_SLURM_QOS:-}" ] && a+=(--qos "$SB_SLURM_QOS")
	a+=(--time "${SB_SLURM_TIME:-04:00:00}")
	a+=(--cpus-per-task "${SB_SLURM_CPUS:-${TRAIN_THREADS:-1}}")
	a+=(--mem "${SB_SLURM_MEM:-4G}")
	a+=(--nodes 1 --ntasks 1)
	# shellcheck disable=SC2206
	[ -n "${SB_SLURM_ARGS:-}" ] && a+=($SB_SLURM_ARGS)
	printf '%s\n' "${a[@]}"
}

# the environment every job script sets (never inherit make's jobserver)
job_env() {
	local v
	echo 'unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES'
	echo 'set -eu -o pipefail'
	echo 'export LC_ALL=C'
	for v in SB_OUT SB_DATA SB_CACHE SB_MIRRORS SB_BIN TRAIN_THREADS ACCEPT_FAILED REFREEZE RETEST RESUME EXTRA_GRIDS \
		DEVICE DEVICE_CELLS DEVICE_RETRIES DEVICE_GROUPS EVAL_DEVICE SB_TRAIN_GROUPS; do
		printf 'export %s=%q\n' "$v" "${!v:-}"
	done
	printf 'cd %q\n' "$PWD"
}
# the continuation of the final job (SB_SLURM_AFTER, from sb_after_slurm.GRID in
# pipelines/common.mk): what a local make runs next in a new make (the switching grid after
# the extension grid, a grid's blocks that await a file an earlier block writes) is, under
# Slurm, a new submission made by the final job once every file of SB_SLURM_AFTER_WHEN
# exists. It is forced (SB_SLURM_FORCE=1) because this final job is still running.
after_lines() {
	local f
	echo "# then, as the local run's new make would: submit $SB_SLURM_AFTER"
	# the grid itself (blocks awaiting a file): without the file the grid is incomplete (exit
	# 1, as the local run's after-await); another grid (extension -> switching): a note only
	local miss=0
	[ "$SB_SLURM_AFTER" = "$grid" ] && miss=1
	for f in ${SB_SLURM_AFTER_WHEN:-}; do
		printf '[ -e %q ] || { echo "final: %s was not written (see the analysis that makes it), so %s was not submitted" >&2; exit %d; }\n' "$f" "$f" "$SB_SLURM_AFTER" "$miss"
	done
	printf 'echo "final: submitting %s" >&2\n' "$SB_SLURM_AFTER"
	after_submit
}

# the submission's settings, for a submission made by the final job
slurm_settings() {
	local v
	for v in SB_SLURM_PARTITION SB_SLURM_ACCOUNT SB_SLURM_QOS SB_SLURM_TIME SB_SLURM_CPUS SB_SLURM_MEM SB_SLURM_THROTTLE SB_SLURM_MAX_ARRAY SB_SLURM_ARGS; do
		[ -z "${!v:-}" ] || printf 'export %s=%q\n' "$v" "${!v}"
	done
}
# The awaited files normally appear during the final make (an analysis stage writes them);
# if they exist already when the final job starts, its make would expand the waiting blocks
# and train their cells here, one after another: submit the grid again instead (its final job
# then makes everything).
early_lines() {
	local f c=""
	for f in ${SB_SLURM_AFTER_WHEN:-}; do c+=" && [ -e $(printf '%q' "$f") ]"; done
	echo "# the awaited files exist already: the blocks that waited are submitted, not run here"
	echo "if true$c; then"
	echo "	echo \"final: the awaited files exist already; submitting $grid for the blocks that waited for them\" >&2"
	echo "	$(after_submit)"
	echo "	exit \$?"
	echo "fi"
}
after_submit() {
	echo "SB_SLURM_FORCE=1 $(job_make | sed 's/ SCHEDULER=local / SCHEDULER=slurm /') $SB_SLURM_AFTER"
}

# the make command line of a stage job: the same variables as this run
job_make() {
	local v s
	s="$(printf '%q' "$MAKE") --no-print-directory SCHEDULER=local"
	for v in SB_OUT SB_DATA SB_CACHE SB_MIRRORS SB_BIN TRAIN_THREADS ACCEPT_FAILED REFREEZE RETEST RESUME EXTRA_GRIDS \
		DEVICE DEVICE_CELLS DEVICE_RETRIES DEVICE_GROUPS EVAL_DEVICE; do
		s+=" $(printf '%q' "$v=${!v:-}")"
	done
	echo "$s"
}

submit() {
	local grid=$1 G=$2 dry=0
	[ "${3:-}" = --dry-run ] && dry=1
	if [ $dry = 0 ]; then
		command -v sbatch >/dev/null || rc=4 die "sbatch not found: SCHEDULER=slurm needs the Slurm client commands (Debian: slurm-client)"
	fi
	# a previous submission still queued or running would race with this one
	if [ $dry = 0 ] && [ -f "$G/.slurm/last/jobs" ] && [ "${SB_SLURM_FORCE:-0}" != 1 ]; then
		local ids active
		ids=$(cut -d' ' -f2 "$G/.slurm/last/jobs" | paste -sd, -)
		active=$(squeue -h -j "$ids" -o %i 2>/dev/null | head -n 1 || true)
		[ -z "$active" ] || rc=1 die "the previous submission ($G/.slurm/last) still has jobs queued or running ($ids); wait for it (pipelines/slurm.sh wait $G) or set SB_SLURM_FORCE=1"
	fi

	# 1. datasets, here
	say "$grid: fetching datasets on $(hostname)"
	"$MAKE" --no-print-directory "$grid-data" >&2

	# 2. the out-of-date cells, as make sees them
	local pend
	pend=$(mktemp)
	"$MAKE" --no-print-directory -n -k "$grid-cells" 2>/dev/null | awk '
		$1 == "pipelines/stage.sh" && ($2 == "train" || $2 == "eval") && NF == 4 {
			k = $3 " " $4
			if (!(k in st)) { order[++n] = k; st[k] = $2 } else st[k] = st[k] "," $2
		}
		END { for (i = 1; i <= n; i++) print st[order[i]], order[i] }' >"$pend" || true
	# on a GPU (DEVICE, docs/pipelines.md "On a GPU"): one array task per group of cells
	# that train in one sb-train process (block, task, architecture, tier), its keys
	# joined by commas; cells of other families, and every cell on the CPU, stay one per
	# task. The groups are stage.sh's (`stage.sh group`), the rule the recipes follow.
	local merged
	merged=$(mktemp)
	awk '{ print $2, $3 }' "$pend" | pipelines/stage.sh group | paste -d' ' "$pend" - | awk '
		{ k = ($1 ~ /(^|,)train(,|$)/ && $4 != "-") ? $2 " " $4 : $2 " " $3
		  if (!(k in line)) { order[++n] = k; line[k] = $1 " " $2 " " $3 } else line[k] = line[k] "," $3 }
		END { for (i = 1; i <= n; i++) print line[order[i]] }' >"$merged"
	mv -f "$merged" "$pend"
	local ncells nkeys
	ncells=$(wc -l <"$pend")   # array tasks: a cell each, or a group of cells on a GPU
	nkeys=$(awk '{ n += split($3, k, ",") } END { print n + 0 }' "$pend")
	if [ "$ncells" -eq 0 ] && "$MAKE" --no-print-directory -q "$G/report.md" 2>/dev/null; then
		say "$grid: everything is up to date; nothing to submit"
		rm -f "$pend"
		return 0
	fi

	# 3. the submission directory
	local id S
	id=$(date -u +%Y%m%dT%H%M%SZ).$$
	[ $dry = 1 ] && id=dry-run
	S="$G/.slurm/$id"
	rm -rf "$S"
	mkdir -p "$S/logs"
	mv "$pend" "$S/cells.txt"
	local -a common
	mapfile -t common < <(sbatch_common)
	local throttle=${SB_SLURM_THROTTLE:-64} maxarr=${SB_SLURM_MAX_ARRAY:-1000}

	{
		echo '#!/usr/bin/env bash'
		echo "# array task -> one cell of $S/cells.txt (line OFFSET + SLURM_ARRAY_TASK_ID + 1)"
		job_env
		echo 'line=$(sed -n "$((${1:?offset} + SLURM_ARRAY_TASK_ID + 1))p" '"$(printf '%q' "$S/cells.txt")"')'
		echo '[ -n "$line" ] || { echo "no cell for task $SLURM_ARRAY_TASK_ID" >&2; exit 2; }'
		echo 'read -r stages block keys <<<"$line"'
		echo '# a line is one cell, or on a GPU the cells of one sb-train process (KEY,KEY,...)'
		echo 'echo "cell(s) $keys ($stages) on $(hostname), job ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" >&2'
		echo 'for key in ${keys//,/ }; do for st in ${stages//,/ }; do pipelines/stage.sh "$st" "$block" "$key"; done; done'
	} >"$S/array.sh"
	chmod +x "$S/array.sh"

	local blocks b stages fz=() te=() targets
	blocks=$(sed -n "s/^$grid\.BLOCKS := //p" "$G/.grid/cells.mk")
	for b in $blocks; do
		stages=$(sed -n "s/^$grid\.$b\.STAGES := *//p" "$G/.grid/cells.mk")
		case " $stages " in *" freeze "*) fz+=("$G/$b/selection.json") ;; esac
		case " $stages " in *" test "*) te+=("$G/$b/test/test.ndjson") ;; esac
	done
	stage_job() { # name targets...
		local n=$1
		shift
		{
			echo '#!/usr/bin/env bash'
			echo "# the $n stage of $grid, after the cells"
			job_env
			if [ "$n" = final ]; then
				# runs after the others whatever became of them: lists the failed
				# cells (kept; resubmitting retries only them), else finishes
				echo "pipelines/stage.sh failed $(printf '%q' "$G") || exit 1"
				[ -z "${SB_SLURM_AFTER:-}" ] || slurm_settings
				[ "${SB_SLURM_AFTER:-}" != "$grid" ] || early_lines
				echo "$(job_make) $*"
				[ -z "${SB_SLURM_AFTER:-}" ] || after_lines
			else
				echo "$(job_make) $*"
			fi
		} >"$S/$n.sh"
		chmod +x "$S/$n.sh"
	}

	# submit (or print, with --dry-run)
	local jobs="$S/jobs" dep="" jid off=0 chunk
	: >"$jobs"
	sb() { # name deps args... -> job id
		local name=$1 d=$2
		shift 2
		local cmd=(sbatch --parsable --job-name "sb-$grid-$name" "${common[@]}")
		[ -n "$d" ] && cmd+=(--dependency "$d" --kill-on-invalid-dep=yes)
		cmd+=("$@")
		echo "${cmd[*]}" >>"$S/sbatch.txt"
		if [ $dry = 1 ]; then
			echo "dry-run-$name"
		else
			"${cmd[@]}" | cut -d';' -f1
		fi
	}
	local arrays=()
	while [ $off -lt "$ncells" ]; do
		chunk=$((ncells - off))
		[ $chunk -gt "$maxarr" ] && chunk=$maxarr
		jid=$(sb "cells" "" --array "0-$((chunk - 1))%$throttle" --output "$S/logs/cells-%A_%a.log" "$S/array.sh" "$off")
		echo "cells $jid $off $chunk" >>"$jobs"
		arrays+=("$jid")
		off=$((off + chunk))
	done
	dep=$(IFS=:; echo "${arrays[*]:-}")
	local all=$dep
	if [ ${#fz[@]} -gt 0 ]; then
		stage_job freeze "${fz[@]}"
		jid=$(sb freeze "${dep:+afterok:$dep}" --output "$S/logs/freeze-%j.log" "$S/freeze.sh")
		echo "freeze $jid" >>"$jobs"
		dep=$jid all=${all:+$all:}$jid
	fi
	if [ ${#te[@]} -gt 0 ]; then
		stage_job test "${te[@]}"
		jid=$(sb test "${dep:+afterok:$dep}" --output "$S/logs/test-%j.log" "$S/test.sh")
		echo "test $jid" >>"$jobs"
		all=${all:+$all:}$jid
	fi
	stage_job final "$grid-final-run"
	jid=$(sb final "${all:+afterany:$all}" --output "$S/logs/final-%j.log" "$S/final.sh")
	echo "final $jid" >>"$jobs"
	[ $dry = 1 ] || { ln -sfn "$id" "$G/.slurm/last.tmp" && mv -fT "$G/.slurm/last.tmp" "$G/.slurm/last"; }

	if [ $dry = 1 ]; then
		say "$grid: dry run: would submit $nkeys cells$([ "$nkeys" = "$ncells" ] || echo " in $ncells sb-train processes") and the stage jobs:"
		sed 's/^/  /' "$S/sbatch.txt" >&2
		[ -z "${SB_SLURM_AFTER:-}" ] || say "$grid: then the final job would submit make $SB_SLURM_AFTER SCHEDULER=slurm once ${SB_SLURM_AFTER_WHEN:-nothing} exists" 
	else
		say "$grid: submitted $nkeys cells$([ "$nkeys" = "$ncells" ] || echo " in $ncells array tasks") as $(grep -c '^cells ' "$jobs") array job(s) (at most $throttle at once), then $(grep -v '^cells ' "$jobs" | cut -d' ' -f1 | paste -sd' ' -)"
		say "$grid: jobs: $(cut -d' ' -f1,2 "$jobs" | tr '\n' ' ')"
		say "$grid: follow with: squeue -j $(cut -d' ' -f2 "$jobs" | paste -sd, -); logs in $S/logs"
		say "$grid: pipelines/slurm.sh wait $G  waits; afterwards 'make $grid' here is a no-op"
		[ -z "${SB_SLURM_AFTER:-}" ] || say "$grid: then the final job submits make $SB_SLURM_AFTER SCHEDULER=slurm once ${SB_SLURM_AFTER_WHEN:-nothing} exists$([ "$SB_SLURM_AFTER" = "$grid" ] && echo " (the wait follows it)")"
	fi
}

# wait for the jobs of the last submission; 0 when every one completed
wait_jobs() {
	local G=$1 timeout=${2:-3600} t0 ids left st bad=0 j cur
	[ -f "$G/.slurm/last/jobs" ] || die "$G: no submission"
	t0=$SECONDS
	while :; do
		cur=$(readlink "$G/.slurm/last")
		ids=$(cut -d' ' -f2 "$G/.slurm/last/jobs" | paste -sd, -)
		wait_ids
		# the final job may have submitted the grid again (blocks that awaited a file its
		# stages wrote): follow the new submission
		[ "$(readlink "$G/.slurm/last")" != "$cur" ] || break
		say "the final job submitted $G again ($(readlink "$G/.slurm/last")); waiting for it too"
	done
	return $bad
}
wait_ids() { # ids, t0, timeout -> bad
	while :; do
		left=$(squeue -h -j "$ids" -o %i 2>/dev/null | wc -l || true)
		[ "$left" -eq 0 ] && break
		[ $((SECONDS - t0)) -lt "$timeout" ] || die "$G: jobs still queued after ${timeout}s: $ids"
		sleep 1
	done
	for j in ${ids//,/ }; do
		st=$(scontrol -o show job "$j" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | sort -u | cut -d= -f2 | paste -sd, -)
		say "job $j: ${st:-unknown (no longer known to slurmctld)}"
		case "$st" in COMPLETED) ;; *) bad=1 ;; esac
	done
}

main() {
case "${1:-}" in
submit) shift; submit "$@" ;;
wait) shift; wait_jobs "$@" ;;
*) rc=2 die "usage: pipelines/slurm.sh submit GRID GRIDDIR [--dry-run] | wait GRIDDIR [TIMEOUT_S]" ;;
esac
}
# read whole before it runs (safe to edit this file while a grid runs)
main "$@"; exit

#!/usr/bin/env bash
# arena_check.sh — SB_ARENA_CHECK: red zones after every activation buffer of the encoder's
# arenas, checked after each training step and pass (lib/encoder.c). One allocation holds all
# the buffers, so a kernel that writes past one buffer's end into the next is invisible to
# ASan and to the CUDA emulator's guard pages; with the check it fails the run naming the
# buffer. The encoder's parameter table (parameters, gradients, gradient slots, moments: one
# allocation each, tensors packed) gets zones of zero bytes after every tensor as well, so its
# tensors move and the checkpoints written tensor by tensor must still be the same bytes.
# Here every normaliser, both architectures, images and text, two tiers, one and two
# worker threads train and are evaluated with the check, and must give the same records and
# checkpoints as without it (the zones change no result); so must the decoder (lib/lm_model.c:
# the trainer's arenas and the decoding caches), trained and evaluated with every mask,
# make sas (lib/sas.c's workspace) and two N3-A cells (lib/n3a_model.c's buffers' slack).
# test_encoder's and test_lm_model's own cases plant a write in a zone and check the report;
# tests/sh/cuda_emu_pipeline.sh runs the check on the emulated CUDA backend.
. "$(dirname "$0")/../shlib.sh"
cd "$T"
SB_ARENA_CHECK=1 "$TOP/build/tests/test_encoder" >enc.out 2>&1
rc=$?
t_result $rc "test_encoder with SB_ARENA_CHECK=1: every model case checks its red zones ($(tail -n 1 enc.out))" \
	"$(grep -m3 '^not ok' enc.out)"
/usr/bin/python3 "$TOP/tests/fixtures/m3/gen_data.py" data ga
sb-fetch -q -o data synthetic_marker >/dev/null 2>fetch.err
t_result $? "sb-fetch synthetic_marker (text, 97 tokens)" "$(cat fetch.err)"
same() { # A B MIN: the records (timing, memory and paths aside) and checkpoints of two output
	# trees, every .ndjson and .safetensors file under them, at least MIN files compared
	/usr/bin/python3 - "$@" <<'PY'
import filecmp, json, os, re, sys
TIMING = re.compile(r"seconds|_ms|ms_|speedup|per_s|memory|time|argv|inputs|run_dir|path|sha256")
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not TIMING.search(k)}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
def recs(p):
    return [strip(r) for r in map(json.loads, open(p)) if r.get("kind") not in ("run.meta", "lm.efficiency")]
def files(top):
    return sorted(os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(top) for f in fs
                  if f.endswith((".ndjson", ".safetensors")))
a, b, least = sys.argv[1], sys.argv[2], int(sys.argv[3])
fa, fb = files(a), files(b)
bad = [] if fa == fb else ["files: %s vs %s" % (sorted(set(fa) - set(fb))[:2], sorted(set(fb) - set(fa))[:2])]
for f in fa if not bad else []:
    pa, pb = os.path.join(a, f), os.path.join(b, f)
    if not (recs(pa) == recs(pb) if f.endswith(".ndjson") else filecmp.cmp(pa, pb, shallow=False)):
        bad.append(f)
if not bad and len(fa) < least:
    bad.append("only %d files compared" % len(fa))
print(" ".join(bad[:4]))
sys.exit(1 if bad else 0)
PY
}
run_pair() { # label task limit args...
	local label=$1 task=$2 limit=$3
	shift 3
	rm -rf on off
	SB_ARENA_CHECK=1 sb-train -q -d data -o on --task "$task" --seed 3 --epochs 2 --batch 32 --limit "$limit" "$@" \
		>on.out 2>on.err
	local rc1=$?
	sb-train -q -d data -o off --task "$task" --seed 3 --epochs 2 --batch 32 --limit "$limit" "$@" >off.out 2>off.err
	local rc2=$?
	local rc3=0 rc4=0
	if [ $rc1 = 0 ] && [ $rc2 = 0 ]; then
		SB_ARENA_CHECK=1 sb-eval -q -d data on/* >/dev/null 2>on.eval.err || rc3=$?
		sb-eval -q -d data off/* >/dev/null 2>off.eval.err || rc4=$?
	fi
	local diff
	diff=$([ $rc1$rc2$rc3$rc4 = 0000 ] && same on off 3)
	[ $rc1$rc2$rc3$rc4 = 0000 ] && [ -z "$diff" ]
	t_result $? "$label: trained and evaluated with the red zones checked, the same records and checkpoints as without" \
		"exit $rc1/$rc2/$rc3/$rc4; $(head -c 300 on.err on.eval.err 2>/dev/null | tr '\n' ' ') ${diff:+differ: $diff}"
}
# every normaliser once on text, the architectures, masks and thread counts taken in turn
i=0
for m in softmax topk_softmax_0125 topk_softmax_025 topk_softmax_05 bottomk_softmax_025 sparsemax entmax15 \
	headwise_adaptive_entmax; do
	if [ $((i % 2)) = 0 ]; then
		run_pair "text $m plain, 2 threads" synthetic_marker 300 --method "$m" -j 2
	else
		run_pair "text $m local_hybrid, exclusion mask, 1 thread" synthetic_marker 300 --method "$m" --arch local_hybrid \
			--mask exclude -j 1
	fi
	i=$((i + 1))
done
run_pair "image sparsemax plain, 2 threads" ga 0 --method sparsemax -j 2
run_pair "image entmax15 local_hybrid wide, 2 threads" ga 0 --method entmax15 --arch local_hybrid --tier wide -j 2
run_pair "text entmax_bisect medium, 2 threads" synthetic_marker 300 --method entmax_bisect --alpha 1.3 --tier medium -j 2

# the decoder (lib/lm_model.c): a tiny CALA decoder trained and evaluated with every mask,
# its trainer's arenas and the decoding caches checked, against the same without the check
SB_ARENA_CHECK=1 "$TOP/build/tests/test_lm_model" >lm.out 2>&1
rc=$?
t_result $rc "test_lm_model with SB_ARENA_CHECK=1: every decoder case checks its red zones ($(tail -n 1 lm.out))" \
	"$(grep -m3 '^not ok' lm.out)"
corpus=$TOP/tests/fixtures/lm/shakespeare-head.txt
cat >lm.json <<JSON
{"family":"lm","seed":1,"model":{"d":32,"pattern":"CALA","heads":2,"ffn":64},"T":256,"batch":2,"steps":20,"warmup":5,"lr":0.003,"log_every":10,"corpora":["shakespeare=$corpus"],"mixture":"shakespeare=0.5,retrieval=0.5"}
JSON
for k in on off; do
	rm -rf "lm$k"
	if [ $k = on ]; then export SB_ARENA_CHECK=1; else unset SB_ARENA_CHECK; fi
	sb-train -q -j 2 -o "lm$k" lm.json >"lm$k.train" 2>"lm$k.err" &&
		sb-eval -q -j 2 --set probes=2 --set windows=2 --set bench_reps=1 lm$k/* >"lm$k.eval" 2>>"lm$k.err"
	echo $? >"lm$k.rc"
done
unset SB_ARENA_CHECK
diff=$([ "$(cat lmon.rc lmoff.rc)" = "$(printf '0\n0')" ] && same lmon lmoff 3)
rc=$?
[ "$(cat lmon.rc lmoff.rc)" = "$(printf '0\n0')" ] && [ $rc -eq 0 ]
t_result $? "a CALA decoder trained (sb-train) and evaluated with every mask (sb-eval) with the red zones checked: the same records and checkpoint as without" \
	"exit $(cat lmon.rc)/$(cat lmoff.rc); $(head -c 300 lmon.err | tr '\n' ' ') ${diff:+differ: $diff}"
# SAS (PROTOCOL B): make sas's three seeds pretrain, train the selector and evaluate with the
# workspace's red zones checked after every window (lib/sas.c), against the same without
cat "$TOP"/README.md "$TOP"/docs/*.md >corpus.txt
for k in on off; do
	rm -rf "sas$k"
	if [ $k = on ]; then export SB_ARENA_CHECK=1; else unset SB_ARENA_CHECK; fi
	make -s -C "$TOP" sas SAS_OUT="$T/sas$k" SAS_CORPUS="docs=$T/corpus.txt" >"sas$k.out" 2>&1
	echo $? >"sas$k.rc"
done
unset SB_ARENA_CHECK
diff=$([ "$(cat sason.rc sasoff.rc)" = "$(printf '0\n0')" ] && same sason sasoff 9)
rc=$?
[ "$(cat sason.rc sasoff.rc)" = "$(printf '0\n0')" ] && [ $rc -eq 0 ]
t_result $? "make sas (3 seeds: pretraining, selector training, evaluation) with the SAS workspace's red zones checked: the same records and checkpoints as without" \
	"exit $(cat sason.rc)/$(cat sasoff.rc); $(tail -n 3 sason.out | tr '\n' ' ') ${diff:+differ: $diff}"
# N3-A (PROTOCOL A8): a query and a transformer cell (main arms, forks, evaluations) with the
# red zones in their buffers' slack checked after every pass, against the same without
SMALL='"train":256,"validation":96,"batch":32,"updates":16,"eval_steps":[0,4,8,12,16],"parents":[8],"fork_updates":4'
{
	echo "{\"family\":\"n3a\",\"arch\":\"query\",\"r\":16,\"seed\":64000,$SMALL}"
	echo "{\"family\":\"n3a\",\"arch\":\"transformer\",\"r\":4,\"seed\":64001,$SMALL}"
} >n3a.ndjson
rm -rf n3aon n3aoff
SB_ARENA_CHECK=1 sb-train -q -o n3aon n3a.ndjson >n3aon.out 2>n3aon.err
rc1=$?
sb-train -q -o n3aoff n3a.ndjson >n3aoff.out 2>n3aoff.err
rc2=$?
diff=$([ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && same n3aon n3aoff 2)
rc=$?
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc -eq 0 ]
t_result $? "N3-A query and transformer cells with the red zones in their buffers' slack checked: the same records as without" \
	"exit $rc1/$rc2; $(head -c 300 n3aon.err | tr '\n' ' ') ${diff:+differ: $diff}"
t_done

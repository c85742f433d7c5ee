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
# make sas (lib/sas.c's workspace, the backbone's table, the selector's matrices), a scaled SAS
# cell (lib/sas_lm.c's selector) and two N3-A cells (lib/n3a_model.c's buffers' slack).
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
# SAS: every case of test_sas (lib/sas.c) with the zones of the backbone's table, of the
# selector's two matrices and of the workspace; of test_sas_lm (lib/sas_lm.c) with the zones
# after each A layer's selector matrices
for t in sas sas_lm; do
	SB_ARENA_CHECK=1 "$TOP/build/tests/test_$t" >$t.out 2>&1
	rc=$?
	t_result $rc "test_$t with SB_ARENA_CHECK=1: selector training and evaluation check their red zones ($(tail -n 1 $t.out))" \
		"$(grep -m3 '^not ok' $t.out)"
done
pair() { # name min label command: the command (a shell line writing its output under $out)
	# run with the check and without, the two output trees compared (same)
	local name=$1 least=$2 label=$3 cmd=$4 k diff rc
	for k in on off; do
		rm -rf "$name$k"
		(
			if [ $k = on ]; then export SB_ARENA_CHECK=1; else unset SB_ARENA_CHECK; fi
			out=$T/$name$k
			eval "$cmd"
		) >"$name$k.log" 2>&1
		echo $? >"$name$k.rc"
	done
	diff=$([ "$(cat "${name}on.rc" "${name}off.rc")" = "$(printf '0\n0')" ] && same "${name}on" "${name}off" "$least")
	rc=$?
	[ "$(cat "${name}on.rc" "${name}off.rc")" = "$(printf '0\n0')" ] && [ $rc -eq 0 ]
	t_result $? "$label with the red zones checked: the same records and checkpoints as without" \
		"exit $(cat "${name}on.rc")/$(cat "${name}off.rc"); $(tail -n 3 "${name}on.log" | tr '\n' ' ' | cut -c1-300) ${diff:+differ: $diff}"
}
corpus=$TOP/tests/fixtures/lm/shakespeare-head.txt
cat >lm.json <<JSON
{"family":"lm","seed":1,"model":{"d":32,"pattern":"CALA","heads":2,"ffn":64},"T":256,"batch":2,"steps":20,"warmup":5,"lr":0.003,"log_every":10,"corpora":["shakespeare=$corpus"],"mixture":"shakespeare=0.5,retrieval=0.5"}
JSON
pair lm 3 "a CALA decoder trained (sb-train) and evaluated with every mask (sb-eval)" \
	'sb-train -q -j 2 -o "$out" lm.json && sb-eval -q -j 2 --set probes=2 --set windows=2 --set bench_reps=1 "$out"/*'
# SAS (PROTOCOL B): make sas's three seeds pretrain, train the selector and evaluate with the
# workspace's red zones checked after every window, the parameter tables' after every step
# (lib/sas.c)
cat "$TOP"/README.md "$TOP"/docs/*.md >corpus.txt
pair sas 9 "make sas (3 seeds: pretraining, selector training, evaluation)" \
	'make -s -C "$TOP" sas SAS_OUT="$out" SAS_CORPUS="docs=$T/corpus.txt"'
# scaled SAS (lib/sas_lm.c): a selector on the CALA decoder above (its A layers), trained with
# its parameters', gradient's and moments' zones checked after every pass and step, then
# evaluated; its checkpoint is written from the packed parameters, so must be the same bytes
backbone=$(ls -d "$T"/lmoff/lm.*/ | head -n 1)
echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"${backbone%/}\",\"blocks\":[8],\"dsel\":8,\"sel_steps\":3,\"sel_batch\":2,\"windows\":2,\"probes\":1,\"tasks\":[\"niah_single_1\"],\"budget\":\"recipe:s=2,w=16,k=16\",\"masks\":\"recipe\"}" >scaled.ndjson
pair scaled 3 "a scaled SAS cell (selector training, evaluation) on that decoder" \
	'sb-train -q -o "$out" scaled.ndjson && sb-eval -q "$out"/*'
# N3-A (PROTOCOL A8): a query and a transformer cell (main arms, forks, evaluations) with the
# red zones in their buffers' slack checked after every pass
SMALL='"train":256,"validation":96,"batch":32,"updates":16,"eval_steps":[0,4,8,12,16],"parents":[8],"fork_updates":4'
{
	echo "{\"family\":\"n3a\",\"arch\":\"query\",\"r\":16,\"seed\":64000,$SMALL}"
	echo "{\"family\":\"n3a\",\"arch\":\"transformer\",\"r\":4,\"seed\":64001,$SMALL}"
} >n3a.ndjson
pair n3a 2 "N3-A query and transformer cells" 'sb-train -q -o "$out" n3a.ndjson'
t_done

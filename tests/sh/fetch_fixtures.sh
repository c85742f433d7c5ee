#!/usr/bin/env bash
# Every registry task decodes from fixtures built in its upstream format (same
# member names, headers and compression), and the arrays equal the ones the
# builder wrote (tests/fixtures/fetch/build.py, check.py). Also: re-running is a
# no-op that re-verifies; pins are written on first fetch and then required; an
# output that no longer verifies is rewritten.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/fetch/lib.sh"
need_py
build_fixtures
cd "$T"
reg=fx/registry.json
run() { sb-fetch -q --offline --registry "$reg" -m fx/mirror -c cache -o data "$@"; }

for t in $ALL_TASKS $CORPORA; do
	[ "$t" = synthetic_marker ] && continue
	run "$t" >"out.$t" 2>"err.$t"; rc=$?
	t_result $rc "$t decodes from its fixture (exit $rc: $(head -c 300 "err.$t"))"
	msg=$("$PY" "$FX/check.py" data fx/expect "$t" 2>&1); t_result $? "$t: outputs equal the fixture's arrays" "$msg"
	n=$(json_field "out.$t" fetch.split status | sort -u)
	[ "$n" = written ]; t_result $? "$t: fetch.split records say written ($n)"
done

# fetch.archive records name every file with its verification
v=$(json_field out.fashion_mnist fetch.archive verified_by | sort -u)
[ "$v" = content_sha256 ]; t_result $? "re-compressed fashion_mnist fixture accepted by its decompressed content ($v)"
v=$(json_field out.k49 fetch.archive verified_by | sort -u)
[ "$v" = first-fetch ]; t_result $? "k49 (no published SHA-256) pinned on first fetch ($v)"
grep -q '"file":"k49/k49-train-imgs.npz"' cache/pins.ndjson; t_result $? "pins file records k49 files"
grep -q '"md5_checked":true' cache/pins.ndjson; t_result $? "pins record that the published MD5 was checked"
! grep -qv '^{"kind":"fetch.pin","v":1,' cache/pins.ndjson; t_result $? "every pin is a fetch.pin record (kind, v)"

# re-run: no rewrite, re-verified, pins now required
before=$(stat -c %Y.%i data/mnist/pool.safetensors data/k49/test.safetensors)
sleep 1
run mnist k49 >out.again 2>err.again; rc=$?
after=$(stat -c %Y.%i data/mnist/pool.safetensors data/k49/test.safetensors)
[ $rc -eq 0 ] && [ "$before" = "$after" ]; t_result $? "re-run leaves verified outputs untouched (exit $rc)"
s=$(json_field out.again fetch.split status | sort -u)
[ "$s" = verified ]; t_result $? "re-run reports status verified ($s)"
v=$(json_field out.again fetch.archive verified_by | sort -u | tr '\n' ' ')
[ "$v" = "pin sha256 " ]; t_result $? "second fetch of pinned files is verified against the pin ($v)"

# a pinned file that changes is refused
cp -r fx/mirror mir2
printf 'x' >>mir2/k49/k49-test-labels.npz
run_m2() { sb-fetch -q --offline --registry "$reg" -m mir2 -c cache -o data2 "$@"; }
run_m2 k49 >/dev/null 2>err.pin; rc=$?
[ $rc -eq 3 ] && grep -q "SHA-256 mismatch: expected .*pinned.*actual" err.pin && [ ! -e data2/k49 ]
t_result $? "a file that differs from its pin: exit 3, expected/actual in the message, nothing written (exit $rc: $(head -c 300 err.pin))"

# an output corrupted after the fact is detected and rewritten
printf 'junk' >>data/mnist/test.safetensors
run mnist >out.fix 2>err.fix; rc=$?
s=$(json_field out.fix fetch.split status | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$s" = "written written " ] && "$PY" "$FX/check.py" data fx/expect mnist >/dev/null
t_result $? "a corrupted output is rewritten ($s; exit $rc)"

# a changed registry entry (different decoder input) makes outputs stale
"$PY" - "$reg" reg2.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for t in r["tasks"]:
    if t["task"] == "mnist":
        t["patch"] = 7
json.dump(r, open(sys.argv[2], "w"))
PY
sb-fetch -q --offline --registry reg2.json -m fx/mirror -c cache -o data mnist >out.reg2 2>&1
s=$(json_field out.reg2 fetch.split status | sort -u)
[ "$s" = written ]; t_result $? "a changed task entry rewrites the outputs ($s)"

# mirrors and cache from the environment: SB_MIRROR (colon-separated) after -m, SB_CACHE
mkdir -p empty
SB_MIRROR="empty:fx/mirror" SB_CACHE=cache.env sb-fetch -q --offline --registry "$reg" -m empty -o data.env kmnist >out.env 2>err.env; rc=$?
p=$(json_field out.env fetch.archive path | head -c 9)
[ $rc -eq 0 ] && [ "$p" = fx/mirror ]; t_result $? "SB_MIRROR directories are searched (exit $rc, $p: $(head -c 200 err.env))"
SB_CACHE=cache.env sb-fetch -q --offline --registry "$reg" -m fx/mirror -o data.env k49 >/dev/null 2>&1
[ -f cache.env/pins.ndjson ]; t_result $? "SB_CACHE sets the cache (pins written there)"

# several tasks in one run, one of them failing: the others are done, the first failure's status
mkdir -p part && cp -r fx/mirror/mnist part/
sb-fetch -q --offline --registry "$reg" -m part -c cache.p -o data.p cifar10 mnist >out.p 2>err.p; rc=$?
[ $rc -eq 4 ] && [ -f data.p/mnist/pool.safetensors ] && [ ! -e data.p/cifar10 ] &&
	[ "$(json_field out.p fetch.failed task)" = cifar10 ] && [ "$(wc -l <err.p)" -eq 1 ]
t_result $? "cifar10 missing, mnist present: mnist written, fetch.failed for cifar10, exit 4 (exit $rc)"

run mnist no_such_task >/dev/null 2>err.unk; rc=$?
[ $rc -eq 2 ] && grep -q "unknown task 'no_such_task'" err.unk; t_result $? "unknown task: usage error, exit 2 (exit $rc)"
t_done

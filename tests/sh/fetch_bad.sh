#!/usr/bin/env bash
# Bad inputs are refused cleanly: truncated archives, wrong magic numbers,
# inconsistent image/label counts, archive members that escape the target
# directory (../, absolute paths, links), absurd header sizes, malformed text,
# and wrong hashes. Each: exit 3, one line on stderr naming the file, no output.
# The broken files are built by tests/fixtures/fetch/build.py --bad; a test
# registry gives each the hash of the broken bytes, so that verification passes
# and the decoder itself must refuse them.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/fetch/lib.sh"
need_py
build_fixtures --bad
cd "$T"
ncases=$("$PY" -c 'import json; print(len(json.load(open("fx/bad/cases.json"))))')
[ "$ncases" -ge 30 ]; t_result $? "fixture builder made $ncases broken inputs"
while IFS=$'\t' read -r case task file expect; do
	"$PY" "$FX/regedit.py" fx/registry.json "reg.$case.json" --match "$file" "fx/bad/$case/$file"
	sb-fetch -q --offline --registry "reg.$case.json" -m "fx/bad/$case" -m fx/mirror -c "cache.$case" \
		-o "data.$case" "$task" >"out.$case" 2>"err.$case"
	rc=$?
	lines=$(wc -l <"err.$case")
	name=${file##*/}
	ok=0
	[ $rc -eq 3 ] || ok=1
	[ "$lines" -eq 1 ] || ok=1
	grep -qF -- "$expect" "err.$case" || ok=1
	grep -qF -- "$name" "err.$case" || ok=1
	[ ! -e "data.$case/$task" ] || ok=1
	grep -q '"kind":"fetch.split"' "out.$case" && ok=1
	grep -q '"kind":"fetch.failed"' "out.$case" || ok=1
	t_result $ok "$case ($task): exit 3, one line naming $name with '$expect', no output" \
		"exit $rc, $lines lines: $(head -c 400 "err.$case")"
done < <("$PY" -c '
import json
for c in json.load(open("fx/bad/cases.json")):
    print("\t".join([c["case"], c["task"], c["file"], c["expect"]]))')

# A file whose hash does not match the registry (mirror): refused, left in place.
mkdir -p wrong/mnist
cp fx/mirror/mnist/* wrong/mnist/
printf 'X' | dd of=wrong/mnist/t10k-labels-idx1-ubyte.gz bs=1 seek=100 conv=notrunc 2>/dev/null
want=$("$PY" -c 'import json; print(json.load(open("fx/registry.json"))["files"]["mnist/t10k-labels-idx1-ubyte.gz"]["sha256"])')
got=$(sha256sum wrong/mnist/t10k-labels-idx1-ubyte.gz | cut -d' ' -f1)
sb-fetch -q --offline --registry fx/registry.json -m wrong -c cache.w -o data.w mnist >out.w 2>err.w; rc=$?
[ $rc -eq 3 ] && grep -q "SHA-256 mismatch: expected $want, actual $got" err.w && [ ! -e data.w/mnist ] &&
	[ -f wrong/mnist/t10k-labels-idx1-ubyte.gz ] && [ "$(wc -l <err.w)" -eq 1 ]
t_result $? "wrong hash in a mirror: exit 3, expected and actual hash, mirror file left, nothing written" \
	"exit $rc: $(head -c 400 err.w)"

# A refused M/ID does not hide a good M/NAME in the same mirror; M/NAME that is M/ID
# itself (a link) is not refused twice.
mkdir -p both/mnist
cp wrong/mnist/* both/mnist/
cp fx/mirror/mnist/t10k-labels-idx1-ubyte.gz both/
sb-fetch -q --offline --registry fx/registry.json -m both -c cache.b -o data.b mnist >out.b 2>err.b; rc=$?
[ $rc -eq 0 ] && grep -q "expected $want, actual $got" err.b && [ -f data.b/mnist/pool.safetensors ]
t_result $? "a bad M/ID and a good M/NAME in one mirror: the refusal warned, M/NAME used" "exit $rc: $(head -c 400 err.b)"
mkdir -p linked/mnist
cp wrong/mnist/* linked/mnist/
ln -s mnist/t10k-labels-idx1-ubyte.gz linked/t10k-labels-idx1-ubyte.gz
sb-fetch -q --offline --registry fx/registry.json -m linked -c cache.l -o data.l mnist >out.l 2>err.l; rc=$?
[ $rc -eq 3 ] && [ "$(grep -c "expected $want" err.l)" -eq 1 ] && [ "$(wc -l <err.l)" -eq 1 ]
t_result $? "M/NAME a link to a refused M/ID: exit 3, refused once" "exit $rc: $(head -c 400 err.l)"

# The same file in the cache: renamed to NAME.wrong.
mkdir -p cache.c/mnist
cp wrong/mnist/* cache.c/mnist/
sb-fetch -q --offline --registry fx/registry.json -c cache.c -o data.c mnist >out.c 2>err.c; rc=$?
[ $rc -eq 3 ] && grep -q "expected $want, actual $got" err.c && [ -f cache.c/mnist/t10k-labels-idx1-ubyte.gz.wrong ] &&
	[ ! -e cache.c/mnist/t10k-labels-idx1-ubyte.gz ] && [ ! -e data.c/mnist ]
t_result $? "wrong hash in the cache: exit 3, renamed to NAME.wrong, nothing written" "exit $rc: $(head -c 400 err.c)"

# ... and with a good mirror behind it, the bad cache file is set aside and the mirror used.
cp wrong/mnist/t10k-labels-idx1-ubyte.gz cache.c/mnist/
sb-fetch -q --offline --registry fx/registry.json -c cache.c -m fx/mirror -o data.c mnist >out.c2 2>err.c2; rc=$?
[ $rc -eq 0 ] && grep -q "renamed to" err.c2 && [ -f data.c/mnist/pool.safetensors ]
t_result $? "a bad cache file with a good mirror: warned, renamed, mirror used (exit $rc)"

# A malformed pins file is an error of its own: exit 3 naming it, and the good cached
# download of a pinned file is not set aside as if it had failed verification.
mkdir -p cache.p/usps
cp fx/mirror/usps/usps.bz2 fx/mirror/usps/usps.t.bz2 cache.p/usps/
printf 'not json\n' >cache.p/pins.ndjson
sb-fetch -q --offline --registry fx/registry.json -c cache.p -o data.p usps >out.p 2>err.p; rc=$?
[ $rc -eq 3 ] && grep -q "pins.ndjson:1:" err.p && [ "$(wc -l <err.p)" -eq 1 ] && [ -f cache.p/usps/usps.bz2 ] &&
	! ls cache.p/usps/*.wrong >/dev/null 2>&1 && [ ! -e data.p/usps ]
t_result $? "a malformed pins file: exit 3 naming it, cached files left in place, nothing written" \
	"exit $rc: $(head -c 400 err.p); $(ls cache.p/usps)"

# Not found anywhere: exit 4 (I/O), nothing written.
sb-fetch -q --offline --registry fx/registry.json -c cache.n -o data.n cifar10 >/dev/null 2>err.n; rc=$?
[ $rc -eq 4 ] && grep -q "not found" err.n && [ ! -e data.n/cifar10 ]
t_result $? "missing file offline: exit 4, nothing written (exit $rc: $(head -c 300 err.n))"

# A read-only cache (a read-only bind mount in a mount namespace; skipped where unshare or the
# mount is not allowed): exit 4 with a hint, and the hint holds: the same directory serves as a mirror.
mkdir -p cache.ro && cp -r fx/mirror/mnist cache.ro/ # the cache's layout: CACHE/ID
if unshare -m sh -c 'mkdir -p mnt.probe && mount --bind mnt.probe mnt.probe && mount -o remount,bind,ro mnt.probe' 2>/dev/null; then
	unshare -m sh -c 'mount --bind cache.ro cache.ro && mount -o remount,bind,ro cache.ro &&
		{ sb-fetch -q --offline --registry fx/registry.json -c cache.ro -o data.ro1 mnist >/dev/null 2>err.ro1; echo $? >rc.ro1;
		  sb-fetch -q --offline --registry fx/registry.json -m cache.ro -c cache.rw -o data.ro2 mnist >/dev/null 2>err.ro2; echo $? >rc.ro2; }'
	[ "$(cat rc.ro1)" -eq 4 ] && grep -q "Read-only file system (the cache must be writable; a read-only copy of a cache serves as a mirror: -m DIR)" err.ro1 &&
		[ "$(wc -l <err.ro1)" -eq 1 ] && [ ! -e data.ro1/mnist ]
	t_result $? "a read-only cache: exit 4, one line with the hint (exit $(cat rc.ro1): $(head -c 300 err.ro1))"
	[ "$(cat rc.ro2)" -eq 0 ] && [ -f data.ro2/mnist/pool.safetensors ]
	t_result $? "the read-only cache as a mirror (-m): fetched (exit $(cat rc.ro2): $(head -c 300 err.ro2))"
else
	t_result 0 "# SKIP unshare -m with a read-only bind mount is not allowed here (a read-only cache)"
fi
t_done

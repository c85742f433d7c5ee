#!/usr/bin/env bash
# Real data reachable offline (shared/DATASETS.md): Fashion-MNIST from Debian's
# dataset-fashion-mnist as a mirror (re-gzipped by Debian, accepted by the
# decompressed SHA-256s, which equal upstream's), Tiny Shakespeare from the
# workspace's shared data, the Jargon File from Debian's jargon-text; all through
# the built-in registry. Also: the built-in registry is fetch/registry.json.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/fetch/lib.sh"
cd "$T"
fm=/usr/share/datasets/fashion-mnist
sb-fetch -m $fm -c cache -o data fashion_mnist >out.fm 2>err.fm; rc=$?
t_result $rc "sb-fetch -m $fm fashion_mnist (exit $rc: $(tail -c 300 err.fm))"
for h in c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888 bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9 \
	5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b 0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34; do
	grep -q "\"verified_by\":\"content_sha256\",\"content_sha256\":\"$h\"" out.fm
	t_result $? "decompressed SHA-256 $h (DATASETS.md) verified"
done
grep -q '"split":"pool".*"n":60000,"status":"written"' out.fm && grep -q '"split":"test".*"n":10000,"status":"written"' out.fm
t_result $? "60000 pool and 10000 test images"
(cd data/fashion_mnist && sha256sum -c --quiet pool.safetensors.sha256 test.safetensors.sha256); t_result $? "sidecars check with sha256sum -c"
head -n 1 out.fm | grep -q '"kind":"run.meta".*"program":"sb-fetch"'; t_result $? "stdout starts with run.meta"
grep -q "fashion_mnist: done in" err.fm; t_result $? "a progress line on stderr"

# Tiny Shakespeare: the canonical copy in the workspace's shared data, when present
ts=""
for d in "$TOP/../shared/data/tinyshakespeare" "$TOP/../../shared/data/tinyshakespeare" ; do
	[ -f "$d/input.txt" ] && { ts=$d; break; }
done
if [ -n "$ts" ]; then
	sb-fetch -q -m "$ts" -c cache -o data tinyshakespeare >out.ts 2>err.ts; rc=$?
	n=$(json_field out.ts fetch.split n | tr '\n' ' ')
	[ $rc -eq 0 ] && [ "$n" = "1003854 55770 55770 " ]
	t_result $? "tinyshakespeare: 1,115,394 bytes cut 90/5/5 ($n; exit $rc: $(head -c 200 err.ts))"
	"$PY" - <<'PY'
import json, struct
out = b""
for s in ("train", "valid", "test"):
    raw = open(f"data/tinyshakespeare/{s}.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    out += raw[8 + n:]
open("joined", "wb").write(out)
PY
	cmp -s joined "$ts/input.txt"; t_result $? "the three splits concatenate to input.txt"
else
	echo "# shared/data/tinyshakespeare not found beside the repository: real Tiny Shakespeare not tested"
fi

jg=/usr/share/doc/jargon-text
if [ -f $jg/jargon.txt.gz ]; then
	sb-fetch -q -m $jg -c cache -o data jargon >out.jg 2>err.jg; rc=$?
	v=$(json_field out.jg fetch.archive verified_by)
	[ $rc -eq 0 ] && [ "$v" = sha256 ]; t_result $? "jargon from Debian's jargon-text (exit $rc, $v: $(head -c 200 err.jg))"
else
	t_result 1 "Debian's jargon-text is installed (scripts/deps.sh installs it)"
fi

# the built-in registry is the committed fetch/registry.json (rebuild if this fails)
sb-fetch --list | tail -n +2 >list.builtin
sb-fetch --list --registry "$TOP/fetch/registry.json" | tail -n +2 >list.file
cmp -s list.builtin list.file; t_result $? "built-in registry equals fetch/registry.json"
sha=$(sha256sum "$TOP/fetch/registry.json" | cut -d' ' -f1)
sb-fetch --list | head -n 1 | grep -q "\"sha256\":\"$sha\""; t_result $? "run.meta names the registry's SHA-256"
t_done

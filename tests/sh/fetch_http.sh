#!/usr/bin/env bash
# The URL path, against a local HTTP server on 127.0.0.1 serving a mirror of
# fixtures (tests/fixtures/fetch/httpd.py: http.server plus byte ranges): a
# fallback URL after one that fails (404, refused connection), a resumed partial
# download, a transfer cut off mid-way and resumed on retry, wrong bytes from a
# URL (exit 3, NAME.wrong), http_proxy honoured, and two concurrent sb-fetch
# processes on one cache and data directory. The servers are killed on exit.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/fetch/lib.sh"
need_py
build_fixtures
cd "$T"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

start_server() { # name extra-args... -> sets PORT
	local name=$1
	shift
	"$PY" "$FX/httpd.py" --root srv --port-file "port.$name" --log "log.$name" --lifetime 240 "$@" &
	pids+=($!)
	for _ in $(seq 100); do [ -s "port.$name" ] && break; sleep 0.05; done
	PORT=$(cat "port.$name")
}
mkdir -p srv
cp -r fx/mirror srv/m
start_server main --drop /m/cifar10/cifar-10-binary.tar.gz:3000
P=$PORT
[ -n "$P" ]; t_result $? "test server listens on 127.0.0.1:$P"
closed=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

"$PY" "$FX/regedit.py" fx/registry.json reg.json --urls "http://127.0.0.1:$P/missing/{id}" --urls "http://127.0.0.1:$P/m/{id}"
run() { sb-fetch -q --registry reg.json --retries 2 --timeout 5 -c cache -o data "$@"; }

# 1. fallback after a 404, every task of a kind
run mnist >out.1 2>err.1; rc=$?
o=$(json_field out.1 fetch.archive origin | sort -u)
[ $rc -eq 0 ] && [ "$o" = url ] && "$PY" "$FX/check.py" data fx/expect mnist >/dev/null
t_result $? "mnist over HTTP after a failing first URL (exit $rc, origin $o: $(head -c 300 err.1))"
n404=$(grep -c "^GET /missing/mnist/.* 404" log.main); n200=$(grep -c "^GET /m/mnist/.* 200" log.main)
[ "$n404" -eq 4 ] && [ "$n200" -eq 4 ]; t_result $? "server saw 4 failing and 4 good requests ($n404, $n200)"
u=$(json_field out.1 fetch.archive url)
u=${u%%$'\n'*}
[[ $u == "http://127.0.0.1:$P/m/mnist/"* ]]; t_result $? "fetch.archive records the URL used ($u)"
[ -f cache/mnist/train-images-idx3-ubyte.gz ] && ! ls cache/mnist/*.part >/dev/null 2>&1
t_result $? "downloads land in the cache by name, no .part left"

# 1b. a redirect is followed; the record keeps the registry's URL and where the bytes came from
"$PY" "$FX/regedit.py" fx/registry.json reg.redir.json --urls "http://127.0.0.1:$P/redirect/m/{id}"
sb-fetch -q --registry reg.redir.json --retries 0 -c cache.redir -o data.redir kmnist >out.1b 2>err.1b; rc=$?
u=$(json_field out.1b fetch.archive url | head -n 1); uf=$(json_field out.1b fetch.archive url_final | head -n 1)
[ $rc -eq 0 ] && [[ $u == "http://127.0.0.1:$P/redirect/m/kmnist/"* ]] && [ "$uf" = "http://127.0.0.1:$P/m/${u#*/redirect/m/}" ] &&
	grep -q "^GET /redirect/m/kmnist/.* 302" log.main
t_result $? "a 302 is followed; fetch.archive has url (the registry's) and url_final (exit $rc, $u -> $uf: $(head -c 300 err.1b))"
[ "$(json_field out.1 fetch.archive url_final | sort -u)" = None ]; t_result $? "no url_final without a redirect"

# 2. a transfer cut off after 3000 bytes is retried and resumed from there
run cifar10 >out.2 2>err.2; rc=$?
[ $rc -eq 0 ] && "$PY" "$FX/check.py" data fx/expect cifar10 >/dev/null; t_result $? "cifar10 after an interrupted transfer (exit $rc: $(head -c 300 err.2))"
grep -q "^GET /m/cifar10/cifar-10-binary.tar.gz range=- 200 drop-after=3000" log.main &&
	grep -q "^GET /m/cifar10/cifar-10-binary.tar.gz range=bytes=3000- 206" log.main
t_result $? "the retry asked for bytes=3000- and got 206"

# 3. a partial download already in the cache is resumed
mkdir -p cache/cifar100
head -c 1000 fx/mirror/cifar100/cifar-100-binary.tar.gz >cache/cifar100/cifar-100-binary.tar.gz.part
run cifar100 >out.3 2>err.3; rc=$?
[ $rc -eq 0 ] && "$PY" "$FX/check.py" data fx/expect cifar100 >/dev/null &&
	grep -q "^GET /m/cifar100/cifar-100-binary.tar.gz range=bytes=1000- 206" log.main
t_result $? "a .part file in the cache is resumed with a range request (exit $rc)"
# a stale partial longer than the file cannot be resumed: restarted
head -c 400 /dev/zero >cache/mnist-junk.part
mkdir -p cache/svhn
head -c 300 /dev/urandom >cache/svhn/test_32x32.mat.part
run svhn >out.3b 2>err.3b; rc=$?
[ $rc -eq 0 ] && "$PY" "$FX/check.py" data fx/expect svhn >/dev/null
t_result $? "a .part file that is not a prefix of the file: fails verification, set aside, downloaded again (exit $rc: $(head -c 300 err.3b))"
# a partial file the server cannot resume (HTTP 416: a whole file left by a run stopped before
# its rename; a junk one longer than the file) is restarted at once, even with --retries 0
mkdir -p cache.rs/cifar10 cache.rs/usps
cp fx/mirror/cifar10/cifar-10-binary.tar.gz cache.rs/cifar10/cifar-10-binary.tar.gz.part
head -c "$(($(stat -c %s fx/mirror/usps/usps.bz2) + 100))" /dev/zero >cache.rs/usps/usps.bz2.part
sb-fetch -q --registry reg.json --retries 0 -c cache.rs -o data.rs cifar10 usps >out.3c 2>err.3c; rc=$?
[ $rc -eq 0 ] && "$PY" "$FX/check.py" data.rs fx/expect cifar10 >/dev/null && "$PY" "$FX/check.py" data.rs fx/expect usps >/dev/null &&
	[ "$(grep -c "^GET /m/usps/usps.bz2 range=bytes=[0-9]*- 416" log.main)" -eq 1 ] &&
	[ "$(grep -c "^GET /m/usps/usps.bz2 range=- 200" log.main)" -eq 1 ]
t_result $? "an unresumable .part (HTTP 416) is restarted without using a retry (--retries 0, exit $rc: $(head -c 300 err.3c))"

# 4. wrong bytes from a URL: exit 3, NAME.wrong in the cache, nothing written
mkdir -p srv/evil/usps
cp fx/mirror/usps/usps.t.bz2 srv/evil/usps/usps.bz2
"$PY" "$FX/regedit.py" fx/registry.json reg.evil.json --urls "http://127.0.0.1:$P/evil/{id}"
sb-fetch -q --registry reg.evil.json --retries 0 -c cache.evil -o data.evil usps >out.4 2>err.4; rc=$?
md5=$("$PY" -c 'import json; print(json.load(open("fx/registry.json"))["files"]["usps/usps.bz2"]["md5"])')
[ $rc -eq 3 ] && grep -q "MD5 mismatch: expected $md5, actual" err.4 && [ -f cache.evil/usps/usps.bz2.wrong ] && [ ! -e data.evil/usps ]
t_result $? "wrong bytes from a URL: exit 3, expected/actual, renamed .wrong, nothing written (exit $rc: $(head -c 300 err.4))"
# the same wrong bytes after a .part the server cannot resume (HTTP 416): the restart is a
# whole download, so its failed verification is final; it was taken for a failed resumed
# download and the file was downloaded a second time
mkdir -p cache.evil2/usps
head -c "$(($(stat -c %s fx/mirror/usps/usps.bz2) + 100))" /dev/zero >cache.evil2/usps/usps.bz2.part
sb-fetch -q --registry reg.evil.json --retries 0 -c cache.evil2 -o data.evil2 usps >out.4r 2>err.4r; rc=$?
[ $rc -eq 3 ] && [ -f cache.evil2/usps/usps.bz2.wrong ] && ! grep -q "resumed download failed verification" err.4r &&
	[ "$(grep -c "^GET /evil/usps/usps.bz2 range=bytes=[0-9]*- 416" log.main)" -eq 1 ] &&
	[ "$(grep -c "^GET /evil/usps/usps.bz2 range=- 200" log.main)" -eq 2 ]
t_result $? "wrong bytes after an unresumable .part: exit 3, downloaded once after the 416, not twice (exit $rc: $(grep -c "^GET /evil/usps/usps.bz2 range=- 200" log.main) whole GETs in all: $(head -c 300 err.4r))"
# published SHA-256 instead of MD5
mkdir -p srv/evil/mnist
cp fx/mirror/mnist/* srv/evil/mnist/
cp fx/mirror/kmnist/t10k-labels-idx1-ubyte.gz srv/evil/mnist/t10k-labels-idx1-ubyte.gz
sb-fetch -q --registry reg.evil.json --retries 0 -c cache.evil -o data.evil mnist >out.4b 2>err.4b; rc=$?
[ $rc -eq 3 ] && grep -q "SHA-256 mismatch: expected" err.4b && [ -f cache.evil/mnist/t10k-labels-idx1-ubyte.gz.wrong ]
t_result $? "wrong SHA-256 from a URL: exit 3, renamed .wrong (exit $rc)"

# 5. a refused connection, retried with backoff, then the next URL; pinned files over HTTP
"$PY" "$FX/regedit.py" fx/registry.json reg.ref.json --urls "http://127.0.0.1:$closed/m/{id}" --urls "http://127.0.0.1:$P/m/{id}"
sb-fetch --registry reg.ref.json --retries 1 -c cache.ref -o data.ref usps >out.5 2>err.5; rc=$?
[ $rc -eq 0 ] && grep -q "retrying" err.5 && [ "$(json_field out.5 fetch.archive verified_by | sort -u)" = first-fetch ]
t_result $? "refused connection: retried, then the fallback URL; pinned on first fetch (exit $rc)"
grep -q "downloading" err.5; t_result $? "a progress line on stderr for downloads"

# 6. http_proxy is honoured (the server answers proxy requests; the host does not exist)
"$PY" "$FX/regedit.py" fx/registry.json reg.proxy.json --urls "http://fixtures.invalid/m/{id}"
http_proxy="http://127.0.0.1:$P" sb-fetch -q --registry reg.proxy.json --retries 0 -c cache.px -o data.px kmnist >out.6 2>err.6; rc=$?
[ $rc -eq 0 ] && grep -q "^GET http://fixtures.invalid/m/kmnist/.* 200 PROXY" log.main
t_result $? "http_proxy honoured (exit $rc: $(head -c 200 err.6))"
sb-fetch -q --registry reg.proxy.json --retries 0 --timeout 2 -c cache.np -o data.np kmnist >/dev/null 2>err.6b; rc=$?
[ $rc -eq 4 ]; t_result $? "without the proxy the same URLs fail: exit 4 (exit $rc)"

# 7. two processes at once on one cache and data directory, through a slow server
start_server slow --slow 0.02
"$PY" "$FX/regedit.py" fx/registry.json reg.slow.json --urls "http://127.0.0.1:$PORT/m/{id}"
sb-fetch -q --registry reg.slow.json -c cache.cc -o data.cc emnist_digits twenty_news >out.7a 2>err.7a &
a=$!
sb-fetch -q --registry reg.slow.json -c cache.cc -o data.cc twenty_news emnist_digits >out.7b 2>err.7b &
b=$!
wait $a; ra=$?
wait $b; rb=$?
[ $ra -eq 0 ] && [ $rb -eq 0 ] && "$PY" "$FX/check.py" data.cc fx/expect emnist_digits >/dev/null &&
	"$PY" "$FX/check.py" data.cc fx/expect twenty_news >/dev/null
t_result $? "two concurrent sb-fetch on one cache and data dir both succeed (exit $ra, $rb: $(head -c 200 err.7a) $(head -c 200 err.7b))"
ng=$(grep -c "^GET /m/emnist/gzip.zip" log.slow)
[ "$ng" -eq 1 ]; t_result $? "the shared archive was downloaded once ($ng requests)"
ls cache.cc/*/*.part >/dev/null 2>&1; [ $? -ne 0 ]; t_result $? "no partial files left in the cache"
t_done

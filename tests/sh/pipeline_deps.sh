#!/usr/bin/env bash
# scripts/deps.sh (run first by make demo and make check): a clear message and exit 1
# where dpkg or apt-get is not available, instead of calling every package missing and
# failing on "apt-get: command not found"; nothing to do (and nothing said) when all is
# installed, every time.
. "$(dirname "$0")/../shlib.sh"

# a PATH with the shell's tools but without dpkg-query and apt-get
mkdir -p "$T/nb"
for c in bash grep id cat dirname; do ln -s "$(command -v "$c")" "$T/nb/$c"; done
for arg in "" --print; do
	PATH="$T/nb" "$TOP/scripts/deps.sh" $arg >"$T/out" 2>&1
	rc=$?
	[ $rc = 1 ] && grep -q 'dpkg-query not found' "$T/out" && ! grep -q 'command not found\|installing\|^missing:' "$T/out"
	t_result $? "deps.sh ${arg:-(install)} without dpkg-query: exit 1 saying it cannot check (exit $rc)" "$(tr '\n' ' ' <"$T/out")"
done

# dpkg-query, but no apt-get, and a package missing
ln -s "$(command -v dpkg-query)" "$T/nb/dpkg-query"
SB_EXTRA_PKGS=sb-no-such-package PATH="$T/nb" "$TOP/scripts/deps.sh" >"$T/out" 2>&1
rc=$?
if [ "$(id -u)" = 0 ]; then
	[ $rc = 1 ] && grep -q 'apt-get not found.*sb-no-such-package' "$T/out" && ! grep -q 'command not found' "$T/out"
	t_result $? "deps.sh as root without apt-get: exit 1 naming apt-get and the missing package (exit $rc)" "$(tr '\n' ' ' <"$T/out")"
else
	[ $rc = 1 ] && grep -q 'sb-no-such-package' "$T/out"
	t_result $? "deps.sh as a user with a package missing: exit 1 naming it (exit $rc)" "$(tr '\n' ' ' <"$T/out")"
fi

# idempotent: with everything installed, two runs do nothing and say nothing
if [ -z "$("$TOP/scripts/deps.sh" --print 2>&1)" ]; then
	"$TOP/scripts/deps.sh" >"$T/a" 2>&1 && "$TOP/scripts/deps.sh" >"$T/b" 2>&1 && [ ! -s "$T/a" ] && [ ! -s "$T/b" ]
	t_result $? "deps.sh with every package installed: exit 0, silent, twice"
else
	echo "ok - # SKIP packages are missing here; the idempotence check would install them"
fi
t_done

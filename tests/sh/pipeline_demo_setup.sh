#!/usr/bin/env bash
# make demo installs the Debian packages (demo-setup, scripts/deps.sh) before it builds the
# programs (sb-programs), which need them on a fresh machine; with -j too. Here a package
# that cannot be installed (apt-get replaced by one that fails) stops make demo at
# demo-setup, and the build must not have started.
. "$(dirname "$0")/../shlib.sh"

mkdir -p "$T/fake"
printf '#!/bin/sh\necho "fake apt-get $*" >&2\nexit 100\n' >"$T/fake/apt-get"
chmod +x "$T/fake/apt-get"
for j in -j1 -j2; do
	PATH="$T/fake:$PATH" SB_EXTRA_PKGS=sb-no-such-package \
		make -C "$TOP" --no-print-directory --trace $j demo SB_OUT="$T/out" SB_DATA="$T/data" >"$T/demo$j.log" 2>&1
	rc=$?
	[ $rc -ne 0 ] && grep -q "target 'demo-setup'" "$T/demo$j.log"
	t_result $? "make $j demo with a package that cannot be installed fails at demo-setup (exit $rc)" "$(tail -n 3 "$T/demo$j.log" | tr '\n' ' ')"
	! grep -q "sb-programs" "$T/demo$j.log"
	t_result $? "make $j demo: the programs were not built before the packages were installed" "$(grep -n "sb-programs\|demo-setup" "$T/demo$j.log" | head -n 3 | tr '\n' ' ')"
done

# the build in make check and a pipeline's programs take one job per core (BUILD_JOBS)
# unless make was given -j, which they then follow (make -n: nothing is built)
for j in "" -j1 -j3; do
	line=$(make -C "$TOP" --no-print-directory -n $j check 2>/dev/null | grep -m1 -- '--no-print-directory.* all$')
	if [ -z "$j" ]; then want='-j$(nproc 2>/dev/null || echo 1) all'; else want='--no-print-directory  all'; fi
	[[ $line == *"$want" ]]
	t_result $? "make $j check builds with '${want% all}' ($line)"
	line=$(make -C "$TOP" --no-print-directory -n $j sb-programs 2>/dev/null | grep -m1 -- ' bin/sb-')
	if [ -z "$j" ]; then want='-j$(nproc 2>/dev/null || echo 1) bin/sb-'; else want='--no-print-directory  bin/sb-'; fi
	[[ $line == *"$want"* ]]
	t_result $? "make $j sb-programs builds with '${want% bin/sb-}' (${line:0:120})"
done
t_done

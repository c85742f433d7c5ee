#!/usr/bin/env bash
# MANIFEST.csv lists every tracked file with its size and SHA-256, and is current.
. "$(dirname "$0")/../shlib.sh"
cd "$TOP"
t_check "MANIFEST.csv is current (make manifest)" scripts/manifest.sh check
# the check must fail when a tracked file changes: try it on a copy of the tree
git clone -q "$TOP" "$T/clone" 2>/dev/null && cp "$TOP/MANIFEST.csv" "$T/clone/MANIFEST.csv" 2>/dev/null
if [ -d "$T/clone" ]; then
	(cd "$T/clone" && git ls-files | head -n 1 | xargs -I{} sh -c 'echo tampered >> "{}"')
	(cd "$T/clone" && scripts/manifest.sh check >/dev/null 2>&1)
	rc=$?
	[ $rc -ne 0 ]; t_result $? "manifest check fails after a tracked file changes (exit $rc)"
fi
t_done

#!/usr/bin/env bash
# lm_cli.sh — sb-lm's command-line contract: help, version, usage errors (exit 2),
# bad input (exit 3), the probe printer.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null; then
	t_result 1 "sb-lm is built (make)"
	t_done
fi
sb-lm --help >"$T/h" && grep -q 'Usage: sb-lm COMMAND' "$T/h"
t_result $? "--help prints the usage to stdout, exit 0"
sb-lm --version | grep -q '^sb-lm '
t_result $? "--version"
sb-lm >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q "Try 'sb-lm --help'" "$T/e"
t_result $? "no command: exit 2 with a hint (got $rc)"
sb-lm bogus >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ]
t_result $? "unknown command: exit 2 (got $rc)"
echo '{"family":"lm","model":{"pattern":"CXA"},"corpora":["x=/nonexistent"]}' >"$T/bad.json"
sb-lm train -q -o "$T/runs" "$T/bad.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "pattern 'CXA'" "$T/e"
t_result $? "a bad layer pattern is refused (exit $rc: $(cat "$T/e"))"
echo '{"family":"lm","stepz":3,"corpora":["x=/nonexistent"]}' >"$T/bad2.json"
sb-lm train -q -o "$T/runs" "$T/bad2.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "unknown field 'stepz'" "$T/e"
t_result $? "an unknown cell field is bad input (exit $rc)"
echo '{"family":"lm","corpora":["x=/nonexistent/file.txt"]}' >"$T/bad3.json"
sb-lm train -q -o "$T/runs" "$T/bad3.json" >"$T/o" 2>"$T/e"; rc=$?
[ $rc -eq 4 ] && grep -q '/nonexistent/file.txt' "$T/e"
t_result $? "a missing corpus is an I/O error naming the file (exit $rc)"
sb-lm probe --task niah_single_1 --len 128 --index 3 >"$T/p" 2>"$T/e"
[ "$(wc -c <"$T/p")" -eq 128 ] && grep -q "answers: '" "$T/e"
t_result $? "probe prints exactly --len bytes and the answers on stderr"
sb-lm probe --task niah_multiquery --len 100 >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q 'at least 160' "$T/e"
t_result $? "a context too short for a task is a usage error (exit $rc)"
sb-lm eval "$T/nope" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 4 ]
t_result $? "eval of a missing run directory: exit 4 (got $rc)"
t_done

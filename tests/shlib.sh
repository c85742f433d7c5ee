# tests/shlib.sh — helpers for script tests (source it).
#   t_ok COND_EXIT_STATUS "name"      record a check from the last command's status
#   t_check "name" CMD...             run CMD, pass when it exits 0
#   t_need_tools "why" TOOL...        unless every TOOL is on PATH: a passing SKIP, then t_done
#   t_done                            print "N passed, N failed", exit 1 on failures
# Provides $TOP (repository), $T (a fresh temporary directory, removed at exit), PATH with bin/
# (with SB_TEST_BIN, an absolute directory such as the sanitizer build's, before it).
set -u
export LC_ALL=C
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="${SB_TEST_BIN:+$SB_TEST_BIN:}$TOP/bin:$PATH"
T=$(mktemp -d /tmp/sbtest.XXXXXX)
trap 'rm -rf "$T"' EXIT
_t_n=0
_t_fail=0
t_result() { # status name [detail]
	_t_n=$((_t_n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $_t_n - $2"
	else
		_t_fail=$((_t_fail + 1))
		echo "not ok $_t_n - $2${3:+: $3}"
	fi
}
t_check() { # name cmd...
	local name=$1
	shift
	local out
	out=$("$@" 2>&1)
	local rc=$?
	t_result $rc "$name" "$(printf '%s' "$out" | tail -n 5 | tr '\n' ' ')"
}
t_need_tools() { # why tool...: a passing SKIP and the end of the script unless every tool is on PATH
	local why=$1 tool
	shift
	for tool in "$@"; do
		if ! command -v "$tool" >/dev/null; then
			t_result 0 "# SKIP no $tool: $why"
			t_done
		fi
	done
}
t_done() {
	echo "$((_t_n - _t_fail)) passed, $_t_fail failed"
	[ $_t_fail -eq 0 ]
	exit $?
}

#!/usr/bin/env bash
# Test data read as an LM corpus or as text (DESIGN §5: only sb-test opens split=test files).
# sb-lm takes a corpus as a directory (DIR/train|valid.safetensors, refused for the test part)
# or as any file, read as raw bytes: a test dataset file given by its path, renamed, linked
# or compressed, was read and used (probe, train, eval; and sb-lm tokenize encoded it). Now
# bytes that are a safetensors file whose metadata says split=test are refused (exit 1).
. "$(dirname "$0")/../shlib.sh"

D=$TOP/tests/fixtures/guard/data/guardtask
mkdir -p "$T/c"
cp "$D/test.safetensors" "$T/c/notes.txt"
ln -s "$D/test.safetensors" "$T/c/link.txt"
gzip -c "$D/test.safetensors" >"$T/c/test.txt.gz"
refused() { # name cmd...
	local name=$1
	shift
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	[ $rc -eq 1 ] && grep -q "split=test: refusing" "$T/err" && [ ! -s "$T/out" ]
	t_result $? "$name: exit 1, refused, nothing written (exit $rc: $(head -c 200 "$T/err"))"
}
probe() { sb-lm probe --task niah_single_1 --len 400 --corpus "$1"; }
refused "sb-lm probe --corpus a test dataset file" probe "$D/test.safetensors"
refused "sb-lm probe --corpus a test file renamed .txt" probe "$T/c/notes.txt"
refused "sb-lm probe --corpus a symlink to a test file" probe "$T/c/link.txt"
refused "sb-lm probe --corpus a gzipped test file" probe "$T/c/test.txt.gz"
refused "sb-lm probe --corpus NAME=a test file" probe "x=$T/c/notes.txt"
refused "sb-lm tokenize a test file" sb-lm tokenize --tokenizer "$TOP/tests/fixtures/tokenizer/gpt2.json" "$T/c/notes.txt"
refused "sb-lm tokenize a test file on stdin" sh -c "sb-lm tokenize --tokenizer '$TOP/tests/fixtures/tokenizer/gpt2.json' <'$T/c/notes.txt'"
# sb-lm train with a cell whose corpus is a test file: refused before any training
printf '{"family":"lm","task":"lm","seed":0,"corpora":["%s"],"steps":1}\n' "$T/c/notes.txt" >"$T/cells.ndjson"
sb-lm train -q -o "$T/runs" "$T/cells.ndjson" >"$T/out" 2>"$T/err"
rc=$?
grep -q "split=test: refusing" "$T/err" || grep -q "split=test: refusing" "$T"/runs/*/train.ndjson 2>/dev/null
t_result $? "sb-lm train on a test file as corpus: refused (exit $rc: $(head -c 300 "$T/err"))"
# controls: the pool file and a text file are read
sb-lm probe --task niah_single_1 --len 400 --corpus "$D/pool.safetensors" >"$T/out" 2>"$T/err"
t_result $? "control: the pool file as a corpus is read ($(head -c 200 "$T/err"))"
sb-lm probe --task niah_single_1 --len 400 --corpus "$TOP/tests/fixtures/lm/shakespeare-head.txt" >"$T/out" 2>"$T/err"
t_result $? "control: a text corpus is read ($(head -c 200 "$T/err"))"
sb-lm tokenize --tokenizer "$TOP/tests/fixtures/tokenizer/gpt2.json" "$TOP/tests/fixtures/lm/shakespeare-head.txt" >"$T/out" 2>"$T/err"
t_result $? "control: sb-lm tokenize a text file ($(head -c 200 "$T/err"))"
t_done

# sb-attn: command line, every method on rows with exactly representable answers,
# masks, gradients, non-finite scores, malformed input, exit codes.
# Numeric agreement with the double reference and PyTorch is tested in
# tests/unit/test_attn_norm*.c; here, values that float prints exactly, or
# checks with awk where the last digit may differ between the AVX-512 and the
# portable kernels.

%%% --help is complete and goes to stdout
$ sb-attn --help
~ Usage: sb-attn --method M [OPTION]... [FILE]
~ --backward
~ --n-valid N
~ --mask MODE
~ --unrolled
~ Exit status:
~ 3  bad input
~ Examples:
!! empty

%%% --version
$ sb-attn --version | grep -q '^sb-attn '

%%% no --method is a usage error
$ sb-attn </dev/null
? 2
! sb-attn: no --method given
! Try 'sb-attn --help'

%%% an unknown method is a usage error naming it
$ sb-attn -m sparsemaks </dev/null
? 2
! unknown normaliser method 'sparsemaks'

%%% a bad --mask is a usage error
$ sb-attn -m softmax --mask none </dev/null
? 2
! invalid value for --mask: 'none'

%%% --ratio applies to top-k and bottom-k only
$ sb-attn -m sparsemax --ratio 0.5 </dev/null
? 2
! --ratio applies to topk_softmax and bottomk_softmax

%%% a ratio outside (0, 1] is a usage error
$ sb-attn -m topk_softmax --ratio 1.5 </dev/null
? 2
! invalid value for --ratio

%%% --dalpha needs --backward and an alpha method
$ sb-attn -m entmax_bisect --dalpha </dev/null
? 2
! --dalpha needs --backward

%%% --dalpha with softmax is a usage error
$ sb-attn -m softmax --backward --dalpha </dev/null
? 2
! --dalpha needs entmax_bisect or headwise_adaptive_entmax

%%% --unrolled applies to the entmax methods only
$ sb-attn -m sparsemax --unrolled </dev/null
? 2
! --unrolled applies to entmax15

%%% two input files are a usage error
$ sb-attn -m softmax a b
? 2
! more than one FILE given

%%% softmax of equal scores, with a blank line skipped
$ printf '[0,0]\n\n[2,2,2,2]\n' | sb-attn -m softmax
> [0.5,0.5]
> [0.25,0.25,0.25,0.25]
!! empty

%%% sparsemax (the help's example)
$ echo '[1,2,3]' | sb-attn -m sparsemax
> [0,0,1]

%%% sparsemax with a two-key support: tau = (3 + 2.5 - 1)/2
$ echo '[3,2.5,0]' | sb-attn -m sparsemax
> [0.75,0.25,0]

%%% top-k ties at the k-th score go to the lower index (help example)
$ echo '[1,3,3,2]' | sb-attn -m topk_softmax_05
> [0,0.5,0.5,0]

%%% bare topk_softmax is ratio 0.25: k = ceil(0.25 8) = 2
$ echo '[5,1,5,1,5,1,5,1]' | sb-attn -m topk_softmax
> [0.5,0,0.5,0,0,0,0,0]

%%% --ratio overrides: k = ceil(0.5 8) = 4
$ echo '[5,1,5,1,5,1,5,1]' | sb-attn -m topk_softmax --ratio 0.5
> [0.25,0,0.25,0,0.25,0,0.25,0]

%%% bottom-k keeps the lowest scores, ties to the lower index
$ echo '[1,1,1,0,2]' | sb-attn -m bottomk_softmax_025 | awk -F'[],[]' '{ok = $2 > 0.73 && $2 < 0.732 && $3 == 0 && $4 == 0 && $5 > 0.268 && $5 < 0.269 && $6 == 0; print ok ? "ok" : $0}'
> ok

%%% entmax15 of two equal scores
$ echo '[1,1]' | sb-attn -m entmax15
> [0.5,0.5]

%%% entmax15 [1,0]: tau solves tau^2 + (-0.5 - tau)^2 = 1, p = [0.83072..., 0.16928...]
$ echo '[1,0]' | sb-attn -m entmax15 | awk -F'[],[]' '{d = $2 - 0.8307189; if (d < 0) d = -d; print (d < 1e-6 && $2 + $3 > 0.9999999) ? "ok" : $0}'
> ok

%%% entmax_bisect at alpha 2 is sparsemax
$ echo '[3,2.5,0]' | sb-attn -m entmax_bisect --alpha 2
> [0.75,0.25,0]

%%% entmax_bisect clamps alpha to [1.05, 2]: alpha 7 is alpha 2
$ echo '[3,2.5,0]' | sb-attn -m entmax_bisect --alpha 7
> [0.75,0.25,0]

%%% headwise_adaptive_entmax of equal scores at any alpha
$ echo '[4,4,4,4]' | sb-attn -m headwise_adaptive_entmax --alpha 1.2
> [0.25,0.25,0.25,0.25]

%%% the study's unrolled bisection on equal scores
$ echo '[4,4,4,4]' | sb-attn -m entmax15 --unrolled | awk -F'[],[]' '{s = $2 + $3 + $4 + $5; print ($2 == $3 && $3 == $4 && $4 == $5 && s > 0.999999 && s < 1.000001) ? "ok" : $0}'
> ok

%%% --n-valid with --mask exclude: padded keys get exactly 0
$ echo '[0,0,100]' | sb-attn -m softmax --n-valid 2 --mask exclude
> [0.5,0.5,0]

%%% --n-valid with the margin: the padded key is min(valid) - 60, a mass of ~e^-60
$ echo '[0,0,100]' | sb-attn -m softmax --n-valid 2 | awk -F'[],[]' '{print ($4 > 0 && $4 < 1e-25 && $2 == $3) ? "ok" : $0}'
> ok

%%% sparse methods give the margin's padded keys exactly 0
$ echo '[3,2.5,100]' | sb-attn -m sparsemax --n-valid 2
> [0.75,0.25,0]

%%% softmax backward (help example): ds = p (g - <p, g>)
$ echo '{"scores":[0,0],"grad":[1,0]}' | sb-attn -m softmax --backward
> [0.25,-0.25]

%%% sparsemax backward: g minus its mean over the support, 0 off it
$ echo '{"scores":[3,2.5,0],"grad":[1,3,7]}' | sb-attn -m sparsemax -b
> [-1,1,0]

%%% top-k backward is zero on the keys it drops: p = [0,.5,.5,0], <p,g> = 2
$ echo '{"scores":[1,3,3,2],"grad":[9,1,3,9]}' | sb-attn -m topk_softmax_05 -b
> [0,-0.5,0.5,0]

%%% --dalpha writes an object; equal scores: ds = q (g - mean g), q = 0.5^0.6, dL/dalpha = 0
$ echo '{"scores":[1,1],"grad":[2,-1]}' | sb-attn -m headwise_adaptive_entmax --alpha 1.4 --backward --dalpha | tr '{}[]:,' '      ' | awk '{d = $2 - 0.98963; if (d < 0) d = -d; print ($1 == "\"grad\"" && d < 1e-5 && $2 == -$3 && $4 == "\"dalpha\"" && $5 == 0) ? "ok" : $0}'
> ok

%%% --double uses the double reference and prints 17 digits
$ echo '[0,1]' | sb-attn -m softmax --double
> [0.2689414213699951,0.7310585786300049]

%%% a file argument
$ printf '[3,2.5,0]\n' > rows.ndjson
$ sb-attn -m sparsemax rows.ndjson
> [0.75,0.25,0]

%%% -inf keys are excluded (probability 0) and NaN rows are written as null
$ printf '[0,"-inf",0]\n[1,null,2]\n[2,2]\n' | sb-attn -m softmax
> [0.5,0,0.5]
> [null,null,null]
> [0.5,0.5]

%%% a row with no finite score is bad input naming the line
$ printf '[2,2]\n["-inf","-inf"]\n' | sb-attn -m softmax
? 3
> [0.5,0.5]
! sb-attn: <stdin>:2:
! no finite score

%%% a non-numeric element names the line and the element
$ printf '[1,2]\n[1,"x"]\n' | sb-attn -m softmax
? 3
! sb-attn: <stdin>:2: the row: element 1 is not a number

%%% a line that is not an array
$ echo '{"scores":[1]}' | sb-attn -m softmax
? 3
! <stdin>:1: the row is not a JSON array of numbers

%%% an empty row
$ echo '[]' | sb-attn -m softmax
? 3
! <stdin>:1: the row is empty

%%% malformed JSON names the line
$ printf '[1,2]\n[1,2\n' | sb-attn -m softmax
? 3
! <stdin>:2:

%%% --backward needs objects
$ echo '[1,2]' | sb-attn -m softmax --backward
? 3
! <stdin>:1: with --backward a line is {"scores":[...],"grad":[...]}

%%% --backward: grad of another length
$ echo '{"scores":[1,2],"grad":[1]}' | sb-attn -m softmax --backward
? 3
! <stdin>:1: grad has 1 values for 2 scores

%%% --n-valid beyond the row
$ echo '[1,2,3]' | sb-attn -m softmax --n-valid 5
? 3
! <stdin>:1: --n-valid 5 exceeds the row's 3 scores

%%% a missing file is an I/O error
$ sb-attn -m softmax no-such-file.ndjson
? 4
! no-such-file.ndjson

%%% a full disk is an error, not silence
$ echo '[1,2]' | sb-attn -m softmax > /dev/full
? 4
! sb-attn: write error

%%% entmax_bisect: alpha outside [1.05, 2] is clamped and gets no gradient (torch.clamp's rule), inside it does
$ for a in 0.5 1.05 2 3; do echo '{"scores":[1,1.2,0.9],"grad":[1,-2,0.5]}' | sb-attn -m entmax_bisect -a $a -b --dalpha | sed 's/.*"dalpha"://; s/}//'; done | awk '{z = ($1 == 0); printf "%s ", z} END {print ""}'
> 1 0 0 1 

%%% entmax_bisect: the clamped alpha's forward equals the bound's, in float and in double (the bound is float32's 1.05, 1.0499999523162842, in both)
$ for d in "" --double; do test "$(echo '[1,1.2,0.9]' | sb-attn -m entmax_bisect -a 0.5 $d)" = "$(echo '[1,1.2,0.9]' | sb-attn -m entmax_bisect -a 1.0499999523162842 $d)" && test "$(echo '[1,1.2,0.9]' | sb-attn -m entmax_bisect -a 7 $d)" = "$(echo '[1,1.2,0.9]' | sb-attn -m entmax_bisect -a 2 $d)" && echo same; done
> same
> same

%%% bottomk_softmax_05 keeps the lower half (k = ceil(0.5 n))
$ echo '[1,3,3,2]' | sb-attn -m bottomk_softmax_05 | tr -d '[]' | awk -F, '{print ($2 == 0 && $3 == 0 && $1 < $4) ? "ok" : $0}'
> ok

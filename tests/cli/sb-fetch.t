# sb-fetch: the command-line contract (DESIGN §8) and the registry listing.

%%% --help is complete: synopsis, options, records, exit status, examples
$ sb-fetch --help
~ Usage: sb-fetch [-m MIRROR_DIR]... [-c CACHE_DIR] [-o DATA_DIR]
~   -m, --mirror DIR
~       --list
~ Records (NDJSON on stdout
~ Exit status: 0 all tasks done
~ Examples:
!! empty

%%% --version
$ sb-fetch --version | grep -q '^sb-fetch '

%%% no task: usage error with a hint
$ sb-fetch -o x
? 2
! sb-fetch: no TASK given
! Try 'sb-fetch --help' for more information.

%%% unknown option
$ sb-fetch --frobnicate mnist
? 2
! unknown option '--frobnicate'

%%% option without its value
$ sb-fetch mnist -c
? 2
! needs a value

%%% unknown task
$ sb-fetch --offline -c c -o d cifar11
? 2
! unknown task 'cifar11'

%%% bad --retries
$ sb-fetch --retries lots mnist
? 2
! invalid value for --retries

%%% --list with a task is a usage error
$ sb-fetch --list mnist
? 2

%%% --list: run.meta, then one fetch.task per task, 13 classification tasks and 5 corpora
$ sb-fetch --list > l
$ head -n 1 l | grep -q '"kind":"run.meta"'
$ test "$(grep -c '"kind":"fetch.task"' l)" = 18
$ for t in mnist fashion_mnist kmnist cifar10 cifar100 twenty_news synthetic_marker emnist_balanced emnist_letters emnist_digits k49 svhn usps wikitext2 tinyshakespeare jargon; do grep -q "\"task\":\"$t\"" l; done
$ grep '"task":"usps"' l | grep -q '"patch":2'
$ grep '"task":"k49"' l | grep -q '"pin":"first-fetch"'
$ grep '"task":"cifar10"' l | grep -q 'cifar-10-binary.tar.gz'
$ grep '"task":"fashion_mnist"' l | grep -q '"content_sha256":"c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"'

%%% every registry file has a SHA-256 or is marked pinned-on-first-fetch, and a licence and citation per task
$ sb-fetch --list | grep fetch.task > l
$ ! grep -v '"license":' l
$ ! grep -v '"citation":' l
$ ! grep -o '"pin":"[a-z-]*"' l | grep -v -e published -e first-fetch

%%% a registry file that is not JSON
$ printf '{"files":' > bad.json
$ sb-fetch --registry bad.json --list
? 3
! bad.json

%%% a registry whose task names an unknown file
$ printf '{"registry_version":"t","files":{},"tasks":[{"task":"x","decoder":"idx","modality":"image","classes":2,"pool":{"images":"a/b"}}]}' > r.json
$ sb-fetch --registry r.json --list
? 3
! names file

%%% a registry URL that is not http(s)
$ printf '{"registry_version":"t","files":{"a/b":{"urls":["file:///etc/passwd"]}},"tasks":[]}' > r.json
$ sb-fetch --registry r.json --list
? 3
! http:// or https://

%%% offline and nothing anywhere: exit 4, nothing written
$ sb-fetch -q --offline -c c -o d mnist
? 4
! not found in c
$ test ! -e d/mnist

%%% stdout write error: exit 4
$ sb-fetch --list > /dev/full
? 4
! write error

#!/usr/bin/env bash
# The first rows of a large answer, piped: `sql 'select * ...' | head -3`,
# `cat --limit 100000000 | head -3`, `--json cat ... | head -3` and
# `export -o - | head -3` on a generated 1,000,000-row table, each run
# ROUNDS times (default 9), alternating, each timed as a whole process
# (the command ends when `head` has its lines and closes the pipe) with its
# peak memory (GNU time's maximum resident set). Prints the median of each.
#
#   bash scripts/bench-pipe.sh [ROWS] [DIR]
set -euo pipefail

rows=${1:-1000000}
dir=${2:-$(mktemp -d)}
rounds=${ROUNDS:-9}
target=${CARGO_TARGET_DIR:-$HOME/.cache/tablepin-target}
tp=${TABLEPIN:-$target/release/tablepin}
mkdir -p "$dir"
cd "$dir"
rm -rf .tablepin
"$tp" init >/dev/null
"$tp" generate --rows "$rows" -o sales.parquet >/dev/null
"$tp" commit sales sales.parquet --key id >/dev/null

run() { # NAME COMMAND: "NAME seconds peak-MB" of one piped run
  local t0 t1
  t0=$(date +%s%N)
  bash -c "/usr/bin/time -f %M -o peak.txt $2 | head -3 >/dev/null"
  t1=$(date +%s%N)
  echo "$1 $(echo "($t1 - $t0) / 1000000000" | bc -l) $(($(tail -1 peak.txt) / 1024))"
}

: >runs.txt
for _ in $(seq "$rounds"); do
  run sql "'$tp' sql 'select * from sales'" >>runs.txt
  run cat "'$tp' cat main sales --limit 100000000" >>runs.txt
  run json-cat "'$tp' --json cat main sales --limit 100000000" >>runs.txt
  run export "'$tp' export main sales -o -" >>runs.txt
done
printf '%-10s %10s %10s   (median of %s, %s rows)\n' command seconds peak-MB "$rounds" "$rows"
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for name in sql cat json-cat export; do
  secs=$(awk -v n="$name" '$1 == n { print $2 }' runs.txt | median)
  peak=$(awk -v n="$name" '$1 == n { print $3 }' runs.txt | median)
  printf '%-10s %10.3f %10d\n' "$name" "$secs" "$peak"
done

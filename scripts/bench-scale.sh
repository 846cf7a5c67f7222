#!/usr/bin/env bash
# Tables larger than memory: a generated table of ROWS rows (default
# 100,000,000) committed, overwritten with 150 changed rows, exported to a
# file and verified, each step its own `tablepin` process with its peak
# memory (GNU time's maximum resident set); then weekly commits (10,000
# appended and 150 changed rows, as `tablepin bench` makes them) on it and
# on a 1,000,000-row table, alternating, each timed as a whole process.
#
#   bash scripts/bench-scale.sh [ROWS] [DIR]
#
# DIR (default: a new temporary folder) needs about 12 GB per 100,000,000
# rows: two input files, the repository and the export. The weekly inputs
# are made with pyarrow from the venv that scripts/python-env.sh makes.
set -euo pipefail

rows=${1:-100000000}
dir=${2:-$(mktemp -d)}
weeks=${WEEKS:-9}
here=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$HOME/.cache/tablepin-target}
tp=${TABLEPIN:-$target/release/tablepin}
py=${PYTHON:-$HOME/.cache/tablepin-venv/bin/python}
mkdir -p "$dir"
cd "$dir"

step() { # NAME COMMAND...: one line, NAME wall-seconds peak-MB
  local name=$1
  shift
  local t0 t1 kb
  t0=$(date +%s%N)
  /usr/bin/time -f "%M" -o peak.txt "$@" >/dev/null 2>step.err || { cat step.err >&2; exit 1; }
  t1=$(date +%s%N)
  kb=$(tail -1 peak.txt)
  # With --stats, the bytes the command's store read (its GETs).
  local read
  read=$(sed -n 's/.* GET (\([0-9]*\) bytes.*/\1/p' step.err | tail -1)
  printf '%-36s %9.3f s %7d MB%s\n' "$name" "$(echo "($t1 - $t0) / 1000000000" | bc -l)" $((kb / 1024)) \
    "${read:+, read $((read / 1024)) kB}"
}

weekly() { # SOURCE ROWS WEEK OUT: 10,000 new rows after ROWS+10,000*(WEEK-1), 150 changed
  "$py" - "$@" <<'EOF'
import sys, random
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
src, n, week, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
live = n + 10_000 * (week - 1)
rng = random.Random(100 + week)
ids = sorted(rng.sample(range(n), 150))  # changed rows among the base's
changed = pq.read_table(src, filters=[("id", "in", ids)])
schema = pq.read_schema(src)
changed = changed.set_column(8, schema.field(8), pc.add(changed["returned"], 10 * week))
new = pq.ParquetFile(src).read_row_group(0).slice(0, 10_000)
new = new.set_column(0, schema.field(0), pa.array(range(live, live + 10_000), pa.int64()))
pq.write_table(pa.concat_tables([changed, new]).sort_by("id"), out)
EOF
}

echo "rows: $rows, in $dir"
step "generate the table" "$tp" generate --rows "$rows" -o base.parquet
step "generate it with 150 rows changed" "$tp" generate --rows "$rows" --returns 150 -o changed.parquet
rm -rf repo && mkdir repo
(cd repo && "$tp" init >/dev/null)
step "commit (new table, keyed)" "$tp" --repo repo commit sales base.parquet --key id
step "overwrite, 150 rows changed" "$tp" --repo repo commit sales changed.parquet
step "export to Parquet" "$tp" --repo repo export main sales -o out.parquet
step "verify" "$tp" --repo repo verify
"$tp" --repo repo log | head -2

# Weekly commits: the same weeks on a 1,000,000-row table, alternating.
"$tp" generate --rows 1000000 -o small.parquet >/dev/null 2>&1
rm -rf small && mkdir small
(cd small && "$tp" init >/dev/null && "$tp" commit sales ../small.parquet --key id >/dev/null)
for w in $(seq 1 "$weeks"); do
  weekly changed.parquet "$rows" "$w" "week-big-$w.parquet"
  weekly small.parquet 1000000 "$w" "week-small-$w.parquet"
done
for w in $(seq 1 "$weeks"); do
  step "weekly $w, 1,000,000 rows" "$tp" --stats --repo small commit sales "week-small-$w.parquet" --mode upsert
  step "weekly $w, $rows rows" "$tp" --stats --repo repo commit sales "week-big-$w.parquet" --mode upsert
done
"$tp" --repo repo verify >/dev/null && echo "verify after the weekly commits: ok"
# The head after the weekly commits, whose files overlap, read whole.
step "export the head after $weeks weeks" "$tp" --repo repo export main sales -o head.parquet

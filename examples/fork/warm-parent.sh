#!/usr/bin/env bash
# Warm-parent workflow: prepare a machine once, mark the fork point from inside it, fork 8 clones that each
# run one task from that exact state, collect the results, remove the family.
# Usage: examples/fork/warm-parent.sh [COUNT]   (uses $SMOL_HOME; `smol` from PATH or this checkout)
set -euo pipefail
COUNT=${1:-8}
here=$(cd "$(dirname "$0")" && pwd)
smol=${SMOL:-$(command -v smol || echo "$here/../../bin/smol")}
P=warm-$$
trap '"$smol" machine rm --force --cascade "$P" >/dev/null 2>&1 || true' EXIT

# 1. prepare: a forkable machine, warmed up (here: a "dataset" built once; in real life deps, a model, a cache)
"$smol" machine create "$P" --forkable --start
"$smol" machine exec "$P" -- sh -c 'seq 1 200000 > /root/dataset; wc -l < /root/dataset > /root/prepared'

# 2. mark the fork point: the workload parks in smol-fork-ready and continues in every clone with its own env.
#    It is detached (setsid … &): exec sessions belong to the host connection that started them, which clones
#    do not inherit, so a workload that must outlive the fork writes its results to files.
"$smol" machine exec "$P" -- sh -c 'setsid sh -c '"'"'
  eval "$(smol-fork-ready)"
  [ "$SMOL_FORK_ROLE" = clone ] || exit 0
  sum=$(awk -v k="$SMOL_CLONE_INDEX" -v n="$SMOL_CLONE_COUNT" "NR % n == k - 1 { s += \$1 } END { print s }" /root/dataset)
  echo "$SMOL_CLONE_NAME shard=$SHARD sum=$sum host=$(hostname)" > /root/result.tmp && mv /root/result.tmp /root/result
'"'"' </dev/null >/dev/null 2>&1 &'

# 3. fork when the workload is ready: the parent pauses for milliseconds and resumes
"$smol" fork "$P" --count "$COUNT" --wait-ready -e 'SHARD={index}/{count}'

# 4. collect one result per clone
total=0
for i in $(seq 1 "$COUNT"); do
  line=$("$smol" machine exec "$P-$i" -- sh -c 'while [ ! -s /root/result ]; do sleep 0.1; done; cat /root/result')
  echo "$line"
  s=${line#*sum=}
  total=$((total + ${s%% *}))
done
expected=$(( 200000 * 200001 / 2 ))
echo "sum over $COUNT clones: $total (expected $expected)"
[ "$total" = "$expected" ]

# 5. what each clone costs (PSS: its share of the template; DISK: its own overlay; details in
#    `smol machine status NAME`), then remove the family (clones first), with disks and memory templates
"$smol" machine ls
"$smol" machine rm --force --cascade "$P"
trap - EXIT

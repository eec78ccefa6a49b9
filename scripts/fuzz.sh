#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes for a time budget, split evenly between the targets:
# the TypeScript ones with fast-check (test/fuzz/run.ts), the C shims' decoders with libFuzzer
# (test/fuzz/c/*.c, built here with clang's -fsanitize=fuzzer,address,undefined).
#
#   npm run fuzz -- [--minutes N] [--only NAME]...
#
# Prints executions and crashes per target; exits 1 when any target crashed. Crashing inputs land in
# test/fuzz/crashes/<target>/ (libFuzzer's crash-*/leak-*/timeout-*, fast-check's crash-*/hang-*).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    *) echo "fuzz: unknown argument $1 (use --minutes N, --only NAME)" >&2; exit 64 ;;
  esac
done

ts_targets=(agent-frames cuda-session artifact layers blob-get http-get)
c_targets=(c-agent-frames c-cuda-replies)
if [ ${#only[@]} -gt 0 ]; then
  sel_ts=(); sel_c=()
  for t in "${only[@]}"; do
    case " ${c_targets[*]} " in *" $t "*) sel_c+=("$t") ;; *) sel_ts+=("$t") ;; esac
  done
  ts_targets=("${sel_ts[@]+"${sel_ts[@]}"}"); c_targets=("${sel_c[@]+"${sel_c[@]}"}")
fi
n=$(( ${#ts_targets[@]} + ${#c_targets[@]} ))
[ "$n" -gt 0 ] || { echo "fuzz: no targets selected" >&2; exit 64; }
per=$(( minutes * 60 / n )); [ "$per" -ge 5 ] || per=5

if [ ${#c_targets[@]} -gt 0 ] && ! command -v clang >/dev/null; then
  echo "fuzz: installing clang (libFuzzer) with apt-get" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang >/dev/null
fi

# The agent's system calls that would change this host are renamed to agent_frames.c's fakes (see its comment).
agent_fakes=(open mkdir rename unlink fchmod opendir sethostname clock_settime mount klogctl usleep kill vfork posix_openpt)
build_c() {
  local out=test/fuzz/c/build flags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Wall -Wno-unused-parameter)
  mkdir -p "$out"
  case "$1" in
    c-agent-frames)
      local objs=() redef=()
      for f in "${agent_fakes[@]}"; do redef+=(--redefine-sym "$f=fz_$f"); done
      for src in exec files system volumes forward; do
        clang "${flags[@]}" -c "shims/agent/$src.c" -o "$out/agent-$src.o"
        objcopy "${redef[@]}" "$out/agent-$src.o"
        objs+=("$out/agent-$src.o")
      done
      clang "${flags[@]}" test/fuzz/c/agent_frames.c "${objs[@]}" -o "$out/$1" ;;
    c-cuda-replies)
      clang "${flags[@]}" -D_GNU_SOURCE test/fuzz/c/cuda_replies.c $(ls shims/cuda/*.c | grep -v /transport.c) \
        -lpthread -o "$out/$1" ;;
  esac
}

status=0
summary=()
if [ ${#ts_targets[@]} -gt 0 ]; then
  args=(); for t in "${ts_targets[@]}"; do args+=(--target "$t"); done
  log=$(mktemp)
  node --import tsx test/fuzz/run.ts --seconds $(( per * ${#ts_targets[@]} )) "${args[@]}" | tee "$log" || status=1
  while IFS= read -r line; do summary+=("$line"); done < <(grep '^fuzz ' "$log")
  rm -f "$log"
fi
for t in "${c_targets[@]+"${c_targets[@]}"}"; do
  build_c "$t"
  work=test/fuzz/c/build/corpus/$t crashes=test/fuzz/crashes/$t
  mkdir -p "$work" "$crashes" "test/fuzz/corpus/$t"
  log=$(mktemp)
  rc=0
  ASAN_OPTIONS=detect_leaks=0 "test/fuzz/c/build/$t" -max_total_time="$per" -timeout=10 -rss_limit_mb=1024 -detect_leaks=0 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$work" "test/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    status=1
    line="fuzz $t: ${execs:-?} executions in $per s, 1 crash(es) (exit $rc): $(grep -m1 -E 'ERROR|runtime error|SUMMARY' "$log" || true)"
    grep -E '^(==|    #|SUMMARY|.*runtime error)' "$log" | head -30 >&2 || true
    ls -t "$crashes" | head -1 | sed "s|^|  $crashes/|"
  else
    line="fuzz $t: ${execs:-?} executions in $per s, 0 crash(es)"
  fi
  echo "$line"; summary+=("$line")
  rm -f "$log"
done
echo "--- fuzz summary (${minutes} min) ---"
printf '%s\n' "${summary[@]}"
exit $status

#!/usr/bin/env bash
# Fidelity validation: record each scenario (the iotwin-workload generator's, real programs
# installed from Debian: SQLite, PyTorch, RocksDB's db_bench, faiss, and database servers:
# MariaDB under sysbench, Redis under redis-benchmark), replay it into a fresh
# sandbox with every pacing mode while recording the replay, compare the two traces, and write
# the tables to docs/validation.md. Then replay one trace onto ext4 and XFS loop devices.
#
#   bench/fidelity/run.sh              # full run (several minutes), writes docs/validation.md
#   bench/fidelity/run.sh --smoke      # one tiny scenario, one pace; writes only under the work dir
#   options: --out FILE (where the document/fragment goes), --keep (keep the work dir),
#            --no-fs (skip the ext4/XFS part), --only NAME (one scenario),
#            --set all|generator|real|servers|programs|ci (which scenarios; default all;
#            real: the programs, servers: the database servers, programs: both,
#            ci: what ctest's fidelity_real runs: the programs and the servers in ci_servers),
#            --size full|ci (the real programs' size; ci is the reduced one ctest runs),
#            --paces "P ..." (pacing modes; default "original gaps fast")
#   Anything but the full run writes a bare fragment (tables and misses), into the work dir
#   unless --out says otherwise.
# Environment: IOTWIN_BUILD_DIR (default: <repo>/build), IOTWIN_FIDELITY_WORK (parent of the
# work dir; default /var/tmp, a disk file system so O_DIRECT works).
# A real program that is not installed (tools/debian-packages.txt) is skipped with a log line and
# a row saying so. Needs root (eBPF capture; loop devices and mounts for the file-system part;
# the faiss scenario drops the page cache).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${IOTWIN_BUILD_DIR:-$repo/build}"
iotwin="$build/src/cli/iotwin"
workload="$build/workloads/iotwin-workload"

smoke=0 keep=0 with_fs=1 out="" only="" set=all size=full pace_list=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --keep) keep=1 ;;
    --no-fs) with_fs=0 ;;
    --out) out="$2"; shift ;;
    --only) only="$2"; shift ;;
    --set) set="$2"; shift ;;
    --size) size="$2"; shift ;;
    --paces) pace_list="$2"; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

case "$set" in
  all|generator|real|servers|programs|ci) ;;
  *) echo "run.sh: --set all|generator|real|servers|programs|ci" >&2; exit 2 ;;
esac
case "$size" in full|ci) ;; *) echo "run.sh: --size full|ci" >&2; exit 2 ;; esac
for bin in "$iotwin" "$workload"; do
  [[ -x "$bin" ]] || { echo "run.sh: $bin missing: build first (ninja -C build)" >&2; exit 2; }
done
[[ $(id -u) -eq 0 ]] || { echo "run.sh: needs root (eBPF capture)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run.sh: needs python3" >&2; exit 2; }

work="$(mktemp -d "${IOTWIN_FIDELITY_WORK:-/var/tmp}/iotwin-fidelity.XXXXXX")"
loops=() mounts=()
cleanup() {
  local m l
  for m in "${mounts[@]:-}"; do [[ -n "$m" ]] && umount "$m" 2>/dev/null || true; done
  for l in "${loops[@]:-}"; do [[ -n "$l" ]] && losetup -d "$l" 2>/dev/null || true; done
  if [[ $keep -eq 0 ]]; then rm -rf -- "$work"; else echo "run.sh: kept $work" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Anything narrower than the full run writes a bare fragment, by default into the work dir.
fragment=0
if [[ $smoke -eq 1 || -n "$only" || "$set" != all || "$size" != full || -n "$pace_list" ]]; then
  fragment=1
fi
if [[ $smoke -eq 1 ]]; then
  paces=(gaps)
elif [[ -n "$pace_list" ]]; then
  read -r -a paces <<<"$pace_list"
else
  paces=(original gaps fast)
fi
if [[ $fragment -eq 1 ]]; then
  [[ -z "$out" && $smoke -eq 0 ]] && keep=1
  out="${out:-$work/fragment.md}"
else
  out="${out:-$repo/docs/validation.md}"
fi
results="$work/results"
mkdir -p "$results" "$work/data"

# Scenarios: kind | name | A | B. kind gen: iotwin-workload, A = workload args that prepare
# its data before recording ("" = none), B = workload args. kind real: a program from Debian, A
# = what it needs (executables EXE,..., or python3:MODULE,...), B = its driver in programs/ and
# the driver's own arguments, run as `DRIVER prepare DIR SIZE ARGS` (not recorded) and
# `DRIVER run DIR SIZE ARGS` (recorded). kind server: the same, for a database server that the
# driver starts in DIR, loads with a client and shuts down (--set servers). Sized so that
# each run lasts >= 0.5 s on the 2-core development VM (rates need a span to mean anything)
# while the whole run stays under ~15 minutes. The data of scenario S lives in $work/data/S.
python=/usr/bin/python3  # Debian's, whose dist-packages hold python3-torch and python3-faiss
scenarios=(
  "gen|kv-buffered||kv-offload --io buffered --chunks 256 --gets 4096"
  "gen|kv-direct||kv-offload --io direct --chunks 128 --gets 512"
  "gen|kv-uring||kv-offload --io uring --chunks 256 --gets 2048"
  "gen|model-mmap|model-load --prepare-only --shards 4 --shard-mb 32|model-load --mode mmap --shards 4 --drop-cache"
  "gen|model-pread|model-load --prepare-only --shards 8 --shard-mb 32|model-load --mode pread --shards 8 --drop-cache"
  "gen|model-direct-async|model-load --prepare-only --shards 4 --shard-mb 192|model-load --mode direct-async --shards 4"
  "gen|mixed||mixed --gets 1024 --writes 1024"
  "gen|vector-libaio|vector-search --small --phase build|vector-search --small --phase search --queries 256 --io libaio"
  "gen|vector-uring|vector-search --small --phase build|vector-search --small --phase search --queries 256 --io uring --threads 2"
  "real|sqlite-wal|/usr/bin/sqlite3|sqlite-wal.sh"
  "real|torch-checkpoint|python3:torch,numpy|torch-checkpoint.py"
  "real|rocksdb-bench|/usr/bin/db_bench|rocksdb-bench.sh"
  "real|faiss-ivf|python3:faiss,numpy|faiss-ivf.py"
  "server|mariadb-uring|/usr/sbin/mariadbd,/usr/bin/mariadb-install-db,/usr/bin/mariadb-admin,/usr/bin/mariadb,/usr/bin/sysbench|mariadb-sysbench.sh native"
  "server|mariadb-simaio|/usr/sbin/mariadbd,/usr/bin/mariadb-install-db,/usr/bin/mariadb-admin,/usr/bin/mariadb,/usr/bin/sysbench|mariadb-sysbench.sh sim"
  "server|redis-aof|/usr/bin/redis-server,/usr/bin/redis-benchmark,/usr/bin/redis-cli|redis-aof.sh"
)
# The servers that ctest's fidelity_real runs (--set ci): those whose replays are call for call
# and result for result in every pace (a server that does not is left out of this list).
ci_servers=" mariadb-uring mariadb-simaio redis-aof "
if [[ $smoke -eq 1 ]]; then
  scenarios=("gen|kv-buffered||kv-offload --io buffered --chunks 8 --gets 16")
fi

# missing_requirement NEED: empty when a real scenario's program is there, else what is missing.
missing_requirement() {
  local need="$1" mod mods exe exes
  if [[ "$need" == python3:* ]]; then
    [[ -x "$python" ]] || { echo "$python"; return; }
    IFS=, read -r -a mods <<<"${need#python3:}"
    for mod in "${mods[@]}"; do
      "$python" -c "import $mod" 2>/dev/null || { echo "python module $mod"; return; }
    done
  else
    IFS=, read -r -a exes <<<"$need"
    for exe in "${exes[@]}"; do
      [[ -x "$exe" ]] || { echo "$exe"; return; }
    done
  fi
}

log() { printf '[fidelity %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# record_one NAME COMMAND...: the command under `iotwin record`, its standard output kept (the
# generator's last line is a JSON summary with its own run time).
record_one() {
  local name="$1"; shift
  "$iotwin" record -o "$results/$name.orig.iotwin" --no-status -- "$@" \
    >"$results/$name.orig.summary" 2>"$results/$name.orig.err" ||
    { echo $? >"$results/$name.orig.rc"; log "record $name exited $(cat "$results/$name.orig.rc") (see $results/$name.orig.err)"; }
  # The report gives the device's own service time (block D2C), which explains timing misses
  # that are the device's, not the replay's.
  "$iotwin" report "$results/$name.orig.iotwin" --json >"$results/$name.orig.report.json" 2>/dev/null || true
}

# replay_one NAME PACE [extra replay args]: fresh sandbox, --record, then compare --json.
replay_one() {
  local name="$1" pace="$2"; shift 2
  local tag="$name.$pace" sandbox="$work/sandbox/$name.$pace"
  rm -rf -- "$sandbox"; mkdir -p "$sandbox"
  "$iotwin" replay "$results/$name.orig.iotwin" --root "$sandbox" --pace "$pace" --quiet --json \
    --record "$results/$tag.replay.iotwin" "$@" >"$results/$tag.replay.json" 2>"$results/$tag.replay.err" ||
    { echo $? >"$results/$tag.replay.rc"; log "replay $tag exited $(cat "$results/$tag.replay.rc") (see $results/$tag.replay.err)"; }
  if [[ -s "$results/$tag.replay.iotwin" ]]; then
    # Exit 1 = some measure out of threshold: a result, not an error.
    "$iotwin" compare "$results/$name.orig.iotwin" "$results/$tag.replay.iotwin" --json \
      >"$results/$tag.compare.json" 2>"$results/$tag.compare.err" || true
    "$iotwin" compare "$results/$name.orig.iotwin" "$results/$tag.replay.iotwin" \
      >"$results/$tag.compare.txt" 2>&1 || true
    # Every system call, including those replay does not re-issue by design (loader, stdout).
    "$iotwin" compare "$results/$name.orig.iotwin" "$results/$tag.replay.iotwin" --all-calls --json \
      >"$results/$tag.compare-all.json" 2>/dev/null || true
    "$iotwin" report "$results/$tag.replay.iotwin" --json >"$results/$tag.report.json" 2>/dev/null || true
  fi
  # The sandbox stays until every scenario has run: ext4 creates files markedly slower right
  # after a large deletion in the same file system (its inode allocator searches past the freed
  # inodes), which the next replay's preparation and file creations would pay.
}

start=$(date +%s)
for spec in "${scenarios[@]}"; do
  IFS='|' read -r kind name a b <<<"$spec"
  [[ -n "$only" && "$only" != "$name" ]] && continue
  case "$set" in
    generator) [[ "$kind" == gen ]] || continue ;;
    real) [[ "$kind" == real ]] || continue ;;
    servers) [[ "$kind" == server ]] || continue ;;
    programs) [[ "$kind" != gen ]] || continue ;;
    ci) [[ "$kind" == real || ( "$kind" == server && "$ci_servers" == *" $name "* ) ]] || continue ;;
  esac
  dir="$work/data/$name"
  mkdir -p "$dir"
  if [[ "$kind" == gen ]]; then
    read -r -a argv <<<"$b"
    if [[ -n "$a" ]]; then
      read -r -a prepv <<<"$a"
      "$workload" "${prepv[@]}" --dir "$dir" --quiet
    fi
    argv=("$workload" "${argv[@]}" --dir "$dir")
  else
    missing="$(missing_requirement "$a")"
    if [[ -n "$missing" ]]; then
      log "skip $name: $missing not installed (tools/debian-packages.txt)"
      echo "$missing not installed" >"$results/$name.missing"
      continue
    fi
    read -r -a driver <<<"$b"
    # A failed preparation (a server that did not start) fails that scenario, not the run.
    if ! "$here/programs/${driver[0]}" prepare "$dir" "$size" "${driver[@]:1}" \
        >"$results/$name.prepare.log" 2>&1; then
      echo "prepare failed" >"$results/$name.orig.rc"
      log "prepare $name failed (see $results/$name.prepare.log)"
      continue
    fi
    argv=("$here/programs/${driver[0]}" run "$dir" "$size" "${driver[@]:1}")
    echo "$kind" >"$results/$name.kind"
  fi
  sync
  log "record $name: ${argv[*]}"
  record_one "$name" "${argv[@]}"
  for pace in "${paces[@]}"; do
    log "replay $name --pace $pace"
    replay_one "$name" "$pace"
  done
done
rm -rf -- "$work/sandbox"

# Cross-file-system: one trace (cold model load through pread, which reaches the block layer)
# replayed with --map onto an ext4 and an XFS loop device.
fs_note=""
if [[ $fragment -eq 0 && $with_fs -eq 1 ]]; then
  src=model-pread
  if [[ ! -s "$results/$src.orig.iotwin" ]]; then
    fs_note="skipped: no $src trace"
  elif ! command -v mkfs.xfs >/dev/null || ! command -v mkfs.ext4 >/dev/null; then
    fs_note="skipped: mkfs.xfs or mkfs.ext4 missing (apt-get install xfsprogs e2fsprogs)"
  else
    for fs in ext4 xfs; do
      img="$work/$fs.img" mnt="$work/mnt-$fs"
      truncate -s 1G "$img"
      # --direct-io=on: the loop device reads its backing file with O_DIRECT, so a cold read on
      # the loop file system reaches the disk instead of the backing file's page cache.
      loop="$(losetup --direct-io=on --find --show "$img")"; loops+=("$loop")
      if [[ $fs == ext4 ]]; then mkfs.ext4 -q -F "$loop"; else mkfs.xfs -q -f "$loop"; fi
      mkdir -p "$mnt"; mount "$loop" "$mnt"; mounts+=("$mnt")
      echo "$loop" >"$results/fs-$fs.device"
      log "replay $src onto $fs ($loop) --pace gaps"
      sandbox="$work/sandbox/fs-$fs"; rm -rf -- "$sandbox"; mkdir -p "$sandbox"
      tag="fs-$fs.gaps"
      "$iotwin" replay "$results/$src.orig.iotwin" --root "$sandbox" --map "$work/data=$mnt/data" \
        --pace gaps --quiet --json --record "$results/$tag.replay.iotwin" \
        >"$results/$tag.replay.json" 2>"$results/$tag.replay.err" || log "replay $tag exited $?"
      "$iotwin" compare "$results/$src.orig.iotwin" "$results/$tag.replay.iotwin" --json \
        >"$results/$tag.compare.json" 2>"$results/$tag.compare.err" || true
      "$iotwin" report "$results/$tag.replay.iotwin" --json >"$results/$tag.report.json" 2>/dev/null || true
      rm -rf -- "$sandbox"
      umount "$mnt"; mounts=("${mounts[@]/$mnt}")
      losetup -d "$loop"; loops=("${loops[@]/$loop}")
    done
    "$iotwin" report "$results/$src.orig.iotwin" --json >"$results/$src.orig.report.json" 2>/dev/null || true
    echo "$src" >"$results/fs-source"
  fi
fi
elapsed=$(( $(date +%s) - start ))

python3 "$here/tabulate.py" --results "$results" --out "$out" --elapsed "$elapsed" \
  --smoke "$fragment" --fs-note "$fs_note" --paces "${paces[*]}" \
  --template "$here/validation.md.in"
log "wrote $out (${elapsed}s)"
# A fragment left in the work directory goes away with it: show it.
if [[ "$out" == "$work/"* && $keep -eq 0 ]]; then cat "$out"; fi

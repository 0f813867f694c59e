#!/usr/bin/env bash
# RocksDB's own benchmark (Debian rocksdb-tools: /usr/bin/db_bench): random fills by several
# threads with background flushes and compactions (small memtables so that they happen), random
# point reads, then a full manual compaction. Fixed seed.
#
#   rocksdb-bench.sh prepare DIR SIZE   remove a previous database (not recorded)
#   rocksdb-bench.sh run DIR SIZE       run db_bench (what bench/fidelity/run.sh records)
# SIZE: full (4 threads × 50,000 keys, 4 × 50,000 reads) or ci (2 threads × 5,000, 2 × 5,000).
set -euo pipefail
mode="$1" dir="$2" size="$3"
case "$size" in
  full) threads=4 num=50000 ;;
  ci) threads=2 num=5000 ;;
  *) echo "rocksdb-bench.sh: size must be full or ci" >&2; exit 2 ;;
esac
case "$mode" in
  prepare) rm -rf -- "$dir/db" ;;
  run)
    exec /usr/bin/db_bench --db="$dir/db" --wal_dir="$dir/db" \
      --benchmarks=fillrandom,readrandom,compact --threads="$threads" --num="$num" --reads="$num" \
      --value_size=400 --key_size=16 --seed=1 --compression_type=none \
      --write_buffer_size=1048576 --target_file_size_base=1048576 --max_bytes_for_level_base=4194304 \
      --max_background_jobs=2 --cache_size=8388608 --statistics=0 --histogram=0 --use_existing_db=0 --progress_reports=false
    ;;
  *) echo "rocksdb-bench.sh: mode must be prepare or run" >&2; exit 2 ;;
esac

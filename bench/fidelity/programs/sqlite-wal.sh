#!/usr/bin/env bash
# SQLite (Debian sqlite3) in WAL mode with synchronous=FULL: batched inserts of 300-byte random
# blobs, each transaction's commit an fsync of the WAL, then an index build and a checkpoint that
# copies the WAL into the database file and truncates it.
#
#   sqlite-wal.sh prepare DIR SIZE   write DIR/load.sql (not recorded)
#   sqlite-wal.sh run DIR SIZE       run it (what bench/fidelity/run.sh records)
# SIZE: full (20,000 rows in 1,000 transactions) or ci (2,000 rows in 100 transactions).
set -euo pipefail
mode="$1" dir="$2" size="$3"
case "$size" in
  full) rows=20000 txns=1000 ;;
  ci) rows=2000 txns=100 ;;
  *) echo "sqlite-wal.sh: size must be full or ci" >&2; exit 2 ;;
esac
case "$mode" in
  prepare)
    rm -f "$dir"/bench.db "$dir"/bench.db-wal "$dir"/bench.db-shm
    per=$((rows / txns))
    {
      echo "PRAGMA journal_mode=WAL;"
      echo "PRAGMA synchronous=FULL;"
      echo "PRAGMA wal_autocheckpoint=0;"
      echo "CREATE TABLE kv(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v BLOB NOT NULL);"
      for ((t = 0; t < txns; t++)); do
        lo=$((t * per)) hi=$(((t + 1) * per - 1))
        # k is a fixed permutation of the row number, so the index build sorts the same keys
        # in every run; the blob's bytes are random but its size is not.
        echo "BEGIN; WITH RECURSIVE n(i) AS (SELECT $lo UNION ALL SELECT i + 1 FROM n WHERE i < $hi)"
        echo "  INSERT INTO kv(id, k, v) SELECT i, (i * 7919) % $rows, randomblob(300) FROM n; COMMIT;"
      done
      echo "CREATE INDEX kv_k ON kv(k);"
      echo "PRAGMA wal_checkpoint(TRUNCATE);"
    } >"$dir/load.sql"
    ;;
  run)
    exec /usr/bin/sqlite3 -batch -bail "$dir/bench.db" ".read $dir/load.sql"
    ;;
  *) echo "sqlite-wal.sh: mode must be prepare or run" >&2; exit 2 ;;
esac

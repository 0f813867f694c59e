#!/usr/bin/env bash
# Redis (Debian redis-server 7.0) with an append-only file (appendonly yes, appendfsync everysec:
# the AOF written by the event loop, fsynced once a second by a background thread), driven by
# redis-benchmark (SET, GET, LPUSH of 256-byte values over a unix socket), then an RDB snapshot
# written by a forked child (BGSAVE: temp-PID.rdb, fsync, rename onto dump.rdb), an AOF rewrite
# by another forked child (BGREWRITEAOF: a new base file and manifest in appendonlydir, renamed
# into place, the old ones unlinked), and SHUTDOWN. The server runs in DIR (no systemd) on a
# unix socket only (port 0) and is waited for by its pid.
#
#   redis-aof.sh prepare DIR SIZE   remove a previous data directory (not recorded)
#   redis-aof.sh run DIR SIZE       server start, benchmark, BGSAVE, BGREWRITEAOF, SHUTDOWN
#                                   (what bench/fidelity/run.sh records)
# SIZE: full (100,000 requests per test, 4 clients) or ci (5,000 requests, 2 clients).
set -euo pipefail
mode="$1" dir="$2" size="$3"
case "$size" in
  full) requests=100000 clients=4 ;;
  ci) requests=5000 clients=2 ;;
  *) echo "redis-aof.sh: size must be full or ci" >&2; exit 2 ;;
esac
sock="$dir/redis.sock"
server=""
# A driver that fails half-way (a client error) stops the server it started, by its pid.
trap '[[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; true' EXIT
cli() { /usr/bin/redis-cli -s "$sock" "$@"; }

# wait_idle FIELD: until INFO persistence says FIELD:0 (the forked child has finished).
wait_idle() {
  local i
  for ((i = 0; i < 600; i++)); do
    cli INFO persistence | grep -q "^$1:0" && return 0
    sleep 0.1
  done
  echo "redis-aof.sh: $1 still set after 60 s" >&2; exit 1
}

case "$mode" in
  prepare) rm -rf -- "$dir/data" "$dir/redis.log"; mkdir -p "$dir/data" ;;
  run)
    /usr/bin/redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$dir/data" \
      --daemonize no --logfile "$dir/redis.log" --appendonly yes --appendfsync everysec \
      --save "" --dbfilename dump.rdb &
    server=$!
    for ((i = 0; i < 600; i++)); do
      [[ -S "$sock" ]] && cli PING >/dev/null 2>&1 && break
      kill -0 "$server" 2>/dev/null || { cat "$dir/redis.log" >&2; echo "redis-aof.sh: server exited" >&2; exit 1; }
      sleep 0.1
    done
    /usr/bin/redis-benchmark -s "$sock" -t set,get,lpush -n "$requests" -c "$clients" -r 10000 -d 256 -q
    wait_idle aof_rewrite_in_progress
    cli BGSAVE
    wait_idle rdb_bgsave_in_progress
    cli BGREWRITEAOF
    wait_idle aof_rewrite_in_progress
    cli SHUTDOWN || true
    wait "$server"
    server=""
    ;;
  *) echo "redis-aof.sh: mode must be prepare or run" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# MariaDB (Debian mariadb-server 10.11) driven by sysbench's oltp_read_write: InnoDB with
# innodb_flush_method=O_DIRECT, its data files read and written by the asynchronous I/O back end
# (innodb_use_native_aio=1: io_uring on 10.11) or by its own simulated-AIO threads (=0, pread and
# pwrite), the redo log written and fsynced at each commit, the doublewrite buffer, background
# page flushing. The server runs as root in DIR (no systemd), listens only on a unix socket in
# DIR and is stopped by `mariadb-admin shutdown` and waited for by its pid.
#
#   mariadb-sysbench.sh prepare DIR SIZE [AIO]  new data directory, sysbench's tables loaded by a
#                                               server of its own, stopped (not recorded)
#   mariadb-sysbench.sh run DIR SIZE [AIO]      server start, sysbench oltp_read_write, shutdown
#                                               (what bench/fidelity/run.sh records)
# SIZE: full (4 tables of 10,000 rows, 4 threads, 15 s) or ci (1 table of 1,000 rows, 2 threads,
# 3 s). AIO: native (default: innodb_use_native_aio=1) or sim (=0).
set -euo pipefail
mode="$1" dir="$2" size="$3" aio="${4:-native}"
case "$size" in
  full) tables=4 rows=10000 threads=4 seconds=15 ;;
  ci) tables=1 rows=1000 threads=2 seconds=3 ;;
  *) echo "mariadb-sysbench.sh: size must be full or ci" >&2; exit 2 ;;
esac
case "$aio" in
  native) native_aio=1 ;;
  sim) native_aio=0 ;;
  *) echo "mariadb-sysbench.sh: AIO must be native or sim" >&2; exit 2 ;;
esac
sock="$dir/mysqld.sock"
server=""
# A driver that fails half-way (a client error) stops the server it started, by its pid.
trap '[[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; true' EXIT

# start_server: mariadbd in the background; returns once it accepts connections.
start_server() {
  /usr/sbin/mariadbd --no-defaults --user=root --datadir="$dir/db" --socket="$sock" \
    --skip-networking --pid-file="$dir/mysqld.pid" --log-error="$dir/mysqld.err" \
    --tmpdir="$dir/tmp" --skip-log-bin --innodb-flush-method=O_DIRECT \
    --innodb-use-native-aio="$native_aio" --innodb-buffer-pool-size=64M \
    --innodb-log-file-size=48M --innodb-flush-log-at-trx-commit=1 \
    --performance-schema=OFF --skip-name-resolve &
  server=$!
  local i
  for ((i = 0; i < 600; i++)); do
    if /usr/bin/mariadb-admin --no-defaults --socket="$sock" --user=root ping >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$server" 2>/dev/null || { cat "$dir/mysqld.err" >&2; echo "mariadb-sysbench.sh: server exited" >&2; exit 1; }
    sleep 0.1
  done
  echo "mariadb-sysbench.sh: server not up after 60 s" >&2
  kill "$server"; exit 1
}

# stop_server: a clean shutdown (InnoDB flushes its pages and writes its checkpoint), waited for.
stop_server() {
  /usr/bin/mariadb-admin --no-defaults --socket="$sock" --user=root shutdown
  wait "$server"
  server=""
}

sysbench_args() {
  echo --db-driver=mysql --mysql-socket="$sock" --mysql-user=root --mysql-db=sbtest \
    --tables="$tables" --table-size="$rows" --rand-seed=1
}

case "$mode" in
  prepare)
    rm -rf -- "$dir/db" "$dir/tmp" "$dir/mysqld.err"
    mkdir -p "$dir/tmp"
    /usr/bin/mariadb-install-db --no-defaults --user=root --datadir="$dir/db" \
      --auth-root-authentication-method=normal --skip-test-db --force \
      >"$dir/install.log" 2>&1 ||
      { cat "$dir/install.log" >&2; exit 1; }
    start_server
    /usr/bin/mariadb --no-defaults --socket="$sock" --user=root -e "CREATE DATABASE sbtest"
    # shellcheck disable=SC2046
    /usr/bin/sysbench oltp_read_write $(sysbench_args) --threads="$threads" prepare >"$dir/prepare.log"
    stop_server
    ;;
  run)
    start_server
    # shellcheck disable=SC2046
    /usr/bin/sysbench oltp_read_write $(sysbench_args) --threads="$threads" --time="$seconds" \
      --events=0 --report-interval=0 run
    stop_server
    ;;
  *) echo "mariadb-sysbench.sh: mode must be prepare or run" >&2; exit 2 ;;
esac

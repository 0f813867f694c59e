#!/usr/bin/env bash
# bootstrap.sh: install iotwin's Debian packages, build it, then run the demo or the tests.
# Works as root on a fresh Debian 12 machine; quick when everything is already installed/built.
# Each mode installs only the packages of its purposes (tools/debian-packages.txt).
#
#   ./tools/bootstrap.sh demo    packages `build`; builds iotwin and iotwin-workload only (build/);
#                                runs `iotwin demo`; exits with its status
#   ./tools/bootstrap.sh build   packages `build`; builds iotwin and iotwin-workload only
#   ./tools/bootstrap.sh test    packages `build test nvme-guest`; builds everything but the unit
#                                tests, then: ctest (golden, runtime, fidelity, set-up tests) in
#                                build/, the unit tests under ASan+UBSan and each libFuzzer target
#                                for a bounded time (both from build-sanitize/); last line
#                                "N passed, N failed"
#   ./tools/bootstrap.sh bench   packages of every purpose; builds everything; runs bench/run.sh
#                                (its arguments follow: ./tools/bootstrap.sh bench --help)
#   ./tools/bootstrap.sh deps [PURPOSE...]   installs the packages of PURPOSEs (default: all)
#
# Environment:
#   IOTWIN_JOBS          parallel build jobs (default: nproc)
#   IOTWIN_FUZZ_SECONDS  total fuzzing time, split among the fuzz targets (default 120)
#   IOTWIN_REQUIRE_BPF=1 a runtime test that cannot load BPF fails instead of skipping (CI sets it)
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
mode=${1:-build}
jobs=${IOTWIN_JOBS:-$(nproc)}
fuzz_seconds=${IOTWIN_FUZZ_SECONDS:-120}

log() { printf '\n== %s\n' "$*"; }
die() {
  printf 'bootstrap: %s\n' "$*" >&2
  exit 2
}
elapsed() { printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)); }
# Ends a phase: prints "== phase MODE NAME: Ns" (tools/setup-times.sh reads these lines from the
# log of a run to write the README's table of phases).
phase_t0=$SECONDS
phase_done() {
  log "phase $mode $1: $((SECONDS - phase_t0))s"
  phase_t0=$SECONDS
}

# ---- Debian packages -----------------------------------------------------------------------

# The programs the demo runs; `build` and `demo` build these and what they link, nothing else.
demo_targets=(iotwin iotwin-workload)
all_purposes=(build test nvme-guest bench)

# Lines are PACKAGE[|COMMAND] PURPOSE; prints the entries of the given purposes. PACKAGE|COMMAND
# counts as present when the program COMMAND is on PATH, whoever installed it (a machine with
# NodeSource's nodejs has npm, and Debian's npm conflicts with it).
packages() {
  sed -e 's/#.*//' tools/debian-packages.txt | awk -v want=" $* " '
    NF == 0 { next }
    NF != 2 { printf "tools/debian-packages.txt:%d: expected PACKAGE PURPOSE, got: %s\n", NR, $0 > "/dev/stderr"; bad = 1; next }
    index(" build test nvme-guest bench ", " " $2 " ") == 0 {
      printf "tools/debian-packages.txt:%d: unknown purpose %s\n", NR, $2 > "/dev/stderr"; bad = 1; next }
    index(want, " " $2 " ") { print $1 }
    END { exit bad }'
}

install_deps() {
  local purpose
  for purpose in "$@"; do
    [[ " ${all_purposes[*]} " == *" $purpose "* ]] || die "unknown purpose '$purpose' (${all_purposes[*]})"
  done
  local list
  list=$(packages "$@") || die "tools/debian-packages.txt is malformed"
  local missing=() entry pkg cmd
  for entry in $list; do
    pkg=${entry%%|*}
    cmd=${entry#*|}
    if [ "$cmd" != "$entry" ] && type -P "$cmd" >/dev/null; then
      continue
    fi
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "Debian packages for $*: all $(wc -w <<<"$list") from tools/debian-packages.txt are installed"
    return
  fi
  log "Installing ${#missing[@]} Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "not root and no sudo; as root run: apt-get install ${missing[*]}"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  # --force-unsafe-io: dpkg skips its fsync of every unpacked file (dpkg(1)); only a crash in the
  # middle of the install can then leave a file unwritten.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-unsafe-io \
    "${missing[@]}" </dev/null
  log "Installed at $(elapsed)"
}

# ---- builds --------------------------------------------------------------------------------

# Line tables only (-g1): enough for backtraces, perf and sanitizer reports, and the build takes
# about a quarter less time than with full debug information. These are cache variables: a
# developer wanting gdb's locals reconfigures build/ with -U CMAKE_CXX_FLAGS_RELWITHDEBINFO (and
# then builds with ninja, not this script, which sets them again).
release_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
# A build directory this script creates compiles the libraries in unity batches (CMakeLists.txt,
# IOTWIN_UNITY_BUILD): from scratch, the libraries of build-sanitize/ take about a third less CPU
# time. Only at the first configure: the cache keeps it (the test mode reuses what the demo built
# in build/), and a directory configured before keeps its own setting (an incremental build with
# batches recompiles a whole batch per edit; cmake -DIOTWIN_UNITY_BUILD=OFF DIR turns it off).
first_configure_options() {
  [ -f "$1/CMakeCache.txt" ] || echo -DIOTWIN_UNITY_BUILD=ON
}

# Extra configure options of build/ for this mode.
main_options=()

# build_main [TARGET...]: configures build/ and builds the targets (default: everything).
build_main() {
  log "Building ${*:-everything} (RelWithDebInfo) in build/ with $jobs jobs"
  # -U: an `npm ci` that failed at an earlier configure is tried again once per bootstrap run.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${release_flags[@]}" \
    $(first_configure_options build) "${main_options[@]}" -UIOTWIN_NPM_CI_FAILED >/dev/null
  ninja -C build -j "$jobs" "$@"
  log "Built at $(elapsed)"
}

# ---- test phases: each adds to these counts ------------------------------------------------

passed=0
failed=0
skipped=0
report=()

# ctest over build/ with the given selection; counts from its summary.
run_ctest() {
  local name=$1
  shift
  local out=build/ctest-$name.log rc=0
  ctest --test-dir build --output-on-failure --timeout 900 "$@" 2>&1 | tee "$out" || rc=$?
  if grep -q 'No tests were found' "$out"; then
    report+=("ctest $name: no tests")
    return
  fi
  local summary total fail skip
  summary=$(grep -E 'tests? passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -1 || true)
  if [ -z "$summary" ]; then
    failed=$((failed + 1))
    report+=("ctest $name: no summary (ctest exited with $rc)")
    return
  fi
  fail=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$summary")
  total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$summary")
  # Skipped tests count as "passed" in ctest's percentage; report them apart.
  skip=$(grep -cE '^[[:space:]]+[0-9]+ - .* \((Skipped|Disabled)\)$' "$out" || true)
  passed=$((passed + total - fail - skip))
  failed=$((failed + fail))
  skipped=$((skipped + skip))
  report+=("ctest $name: $((total - fail - skip)) passed, $fail failed, $skip skipped")
}

# One clang build (build-sanitize/) serves both sanitizer phases: the unit tests run under
# ASan+UBSan, and the libFuzzer targets, whose libraries carry the same sanitizers plus coverage
# instrumentation. -O1 -g1, assertions on: about a fifth less time than a Debug build for the unit
# tests and a release build for the fuzzers, and line tables are all a sanitizer report needs.
# IOTWIN_NPM_CI=OFF: this build never renders HTML; build/ fetched the plotting assets.
build_sanitized() {
  log "Sanitizer build (clang, ASan+UBSan, libFuzzer) in build-sanitize/: unit tests, $*"
  local unity
  unity=$(first_configure_options build-sanitize)
  CC=clang CXX=clang++ cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DIOTWIN_SANITIZE=ON -DIOTWIN_FUZZ=ON -DIOTWIN_NPM_CI=OFF $unity >/dev/null &&
    ninja -C build-sanitize -j "$jobs" iotwin_unit_tests "$@"
}

# The unit tests of build-sanitize/; counts from gtest's per-test lines.
run_asan_unit_tests() {
  log "Unit tests under AddressSanitizer + UBSan (build-sanitize/)"
  local out=build-sanitize/unit-tests.log rc=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    build-sanitize/tests/iotwin_unit_tests 2>&1 | tee "$out" || rc=$?
  local ok bad skip
  ok=$(grep -cE '^\[       OK \] .* \([0-9]+ ms\)$' "$out" || true)
  bad=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$out" || true)
  skip=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$out" || true)
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
    bad=1 # a sanitizer report or crash ends the run without a gtest failure line
  fi
  passed=$((passed + ok))
  failed=$((failed + bad))
  skipped=$((skipped + skip))
  report+=("ASan/UBSan unit tests: $ok passed, $bad failed, $skip skipped (exit $rc)")
}

# The libFuzzer targets: tests/fuzz/*_fuzz.cc.
fuzz_targets=()
for fuzz_source in tests/fuzz/*_fuzz.cc; do
  [ -e "$fuzz_source" ] && fuzz_targets+=("$(basename "$fuzz_source" .cc)")
done

# Each libFuzzer target of build-sanitize/ run for its share of the fuzzing time.
run_fuzzers() {
  if [ ${#fuzz_targets[@]} -eq 0 ]; then
    log "No libFuzzer targets (tests/fuzz/*_fuzz.cc): fuzzing skipped"
    report+=("fuzz: no targets")
    return
  fi
  log "libFuzzer targets (build-sanitize/): ${fuzz_targets[*]}, ${fuzz_seconds}s in all"
  local per=$((fuzz_seconds / ${#fuzz_targets[@]})) name
  [ "$per" -ge 5 ] || per=5
  for name in "${fuzz_targets[@]}"; do
    local bin=build-sanitize/tests/$name corpus=build-sanitize/corpus/$name seeds=()
    local out=build-sanitize/$name.log rc=0
    mkdir -p "$corpus" build-sanitize/artifacts
    # Seeds: tests/fuzz/seeds/<target>/ when a target has its own, else tests/fuzz/seeds/.
    if [ -d "tests/fuzz/seeds/$name" ]; then
      seeds=("tests/fuzz/seeds/$name")
    elif [ -d tests/fuzz/seeds ]; then
      seeds=(tests/fuzz/seeds)
    fi
    # New inputs go to the first directory (the build's corpus), never into the repository.
    "$bin" -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="build-sanitize/artifacts/$name-" "$corpus" "${seeds[@]}" >"$out" 2>&1 || rc=$?
    local runs
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$out" | grep -oE '[0-9]+$' || echo '?')
    if [ "$rc" -eq 0 ]; then
      passed=$((passed + 1))
      report+=("fuzz $name: passed ($runs inputs in ${per}s)")
    else
      failed=$((failed + 1))
      tail -40 "$out"
      report+=("fuzz $name: FAILED (exit $rc; crash input under build-sanitize/artifacts/, log $out)")
    fi
  done
}

run_tests() {
  log "Tests in build/ (golden, set-up and other tests in parallel, then runtime tests one by one)"
  [ "$(id -u)" -eq 0 ] || echo "bootstrap: not root: runtime tests that need BPF will skip"
  run_ctest other -LE runtime -j "$jobs"
  phase_done "ctest, all but runtime tests"
  run_ctest runtime -L runtime
  phase_done "ctest, runtime tests"
  log "ctest done at $(elapsed)"
  if build_sanitized "${fuzz_targets[@]}"; then
    log "Sanitizer build done at $(elapsed)"
    phase_done "sanitizer build"
    run_asan_unit_tests
    phase_done "unit tests under ASan/UBSan"
    run_fuzzers
    phase_done "fuzzing"
  else
    failed=$((failed + 1))
    report+=("sanitizer build (ASan/UBSan unit tests, fuzz targets): build failed")
  fi
  log "Summary after $(elapsed)"
  printf '%s\n' "${report[@]}"
  if [ "$skipped" -gt 0 ]; then
    printf '%d passed, %d failed (%d skipped)\n' "$passed" "$failed" "$skipped"
  else
    printf '%d passed, %d failed\n' "$passed" "$failed"
  fi
  [ "$failed" -eq 0 ]
}

case "$mode" in
  deps)
    shift || true
    install_deps "${@:-${all_purposes[@]}}"
    ;;
  build)
    install_deps build
    build_main "${demo_targets[@]}"
    ;;
  test)
    install_deps build test nvme-guest
    # The unit tests run once, under ASan+UBSan from build-sanitize/; build/ leaves them out
    # (cmake -DIOTWIN_UNIT_TESTS=ON build puts them back for a developer's release build).
    main_options=(-DIOTWIN_UNIT_TESTS=OFF)
    phase_done packages
    build_main
    phase_done build
    run_tests
    ;;
  bench)
    shift
    install_deps "${all_purposes[@]}"
    build_main
    log "Running bench/run.sh $*"
    exec bench/run.sh --build build "$@"
    ;;
  demo)
    install_deps build
    phase_done packages
    build_main "${demo_targets[@]}"
    phase_done build
    log "Running build/src/cli/iotwin demo"
    rc=0
    build/src/cli/iotwin demo || rc=$?
    phase_done "iotwin demo"
    if [ "$rc" -eq 0 ]; then
      log "iotwin demo succeeded ($(elapsed) in all)"
    else
      log "iotwin demo FAILED: exit status $rc ($(elapsed) in all)"
    fi
    exit "$rc"
    ;;
  *)
    die "usage: $0 [demo|build|test|bench|deps [PURPOSE...]]"
    ;;
esac

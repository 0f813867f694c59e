#!/usr/bin/env bash
# Configuring iotwin when the npm registry cannot be reached (or npm is missing): configuring must
# succeed, say once why the HTML report's plotting libraries are missing, not wait on the network
# again at the next configure, and generate assets that compile and carry the reason (which
# `iotwin report --html` prints: tests/unit/analysis_report_html_test.cc).
#   npm_unreachable.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/web"
cp "$src/web/package.json" "$src/web/package-lock.json" "$work/web/"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A closed port on loopback: connection refused at once, nothing leaves the machine.
# replace-registry-host=always: the lock file's registry.npmjs.org addresses go there too.
export npm_config_registry=http://127.0.0.1:9/ npm_config_cache=$work/npm-cache
export npm_config_replace_registry_host=always
configure() {
  cmake -S "$src" -B "$work/build" -G Ninja -DIOTWIN_BUILD_BPF=OFF -DIOTWIN_CCACHE=OFF \
    -DIOTWIN_WEB_DIR="$work/web" >"$work/$1.log" 2>&1 || {
    cat "$work/$1.log"
    fail "configure ($1) exited non-zero"
  }
}
warning="building without the HTML report's plotting libraries"
# CMake wraps warnings at 80 columns: search the log as one line.
joined() { tr -s ' \n' ' ' <"$work/$1.log"; }

configure first
n=$(grep -c "$warning" "$work/first.log" || true)
[ "$n" -eq 1 ] || { cat "$work/first.log"; fail "first configure: the warning appears $n times, not once"; }
if command -v npm >/dev/null; then
  joined first | grep -qE "npm ci --prefix $work/web. failed \(1\): npm (ERR!|error) code E" ||
    { cat "$work/first.log"; fail "first configure: the warning does not say npm ci failed"; }
else
  joined first | grep -q "npm is not installed" || fail "first configure: no 'npm is not installed'"
fi
[ ! -e "$work/web/node_modules/vega/build/vega.min.js" ] || fail "vega installed from a closed port?"

configure second
if command -v npm >/dev/null; then
  ! grep -q "installing the HTML report's plotting libraries" "$work/second.log" ||
    fail "second configure ran npm ci again"
  joined second | grep -q "not retried" || fail "second configure does not say it did not retry"
fi
n=$(grep -c "$warning" "$work/second.log" || true)
[ "$n" -eq 1 ] || fail "second configure: the warning appears $n times, not once"

assets=$work/build/src/analysis/html_assets.cc
grep -q '^#if 0$' "$assets" || fail "$assets embeds plotting libraries"
grep -q 'a.missing_reason = "..*";' "$assets" || fail "$assets carries no reason"
c++ -std=c++20 -I"$src/src" -c "$assets" -o "$work/html_assets.o" || fail "$assets does not compile"
echo "ok: configured twice without the plotting libraries; one warning each; npm not retried"

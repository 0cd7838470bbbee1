#!/usr/bin/env bash
# Runs the whole test suite: for every module in go.work, a gofmt check,
# go vet, golangci-lint (make lint: .golangci.yml, the pinned version that
# make lint-install builds) and go test -race. Tests need a real ClickHouse: the server at
# CRAWLER_CLICKHOUSE_ADDR when it answers, otherwise ONE private server
# (deployments/local/cmd/chserver) started here for the whole run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

have_clickhouse() {
	command -v clickhouse-server >/dev/null 2>&1 || command -v clickhouse >/dev/null 2>&1
}

ch_answers() { # $1 = host:port
	local host=${1%:*} port=${1##*:}
	timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/trawl-test.XXXXXX")
ch_pid=""
cleanup() {
	if [ -n "$ch_pid" ]; then
		kill -TERM "$ch_pid" 2>/dev/null || true
		wait "$ch_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${CRAWLER_CLICKHOUSE_ADDR:-}" ] && ch_answers "$CRAWLER_CLICKHOUSE_ADDR"; then
	echo "test: using ClickHouse at $CRAWLER_CLICKHOUSE_ADDR"
else
	if ! have_clickhouse; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
			echo "test: installing clickhouse-server"
			DEBIAN_FRONTEND=noninteractive apt-get update -qq
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clickhouse-server >/dev/null
		else
			echo "test: no ClickHouse server found; install the clickhouse-server package (apt-get install clickhouse-server) or set CRAWLER_CLICKHOUSE_ADDR" >&2
			exit 1
		fi
	fi
	echo "test: starting a private ClickHouse"
	go build -o "$tmp/chserver" ./deployments/local/cmd/chserver
	"$tmp/chserver" -dir "$tmp/ch" -addr-file "$tmp/ch.addr" >"$tmp/chserver.log" 2>&1 &
	ch_pid=$!
	for _ in $(seq 1 120); do
		[ -s "$tmp/ch.addr" ] && break
		if ! kill -0 "$ch_pid" 2>/dev/null; then
			cat "$tmp/chserver.log" >&2
			echo "test: private ClickHouse did not start" >&2
			exit 1
		fi
		sleep 0.5
	done
	if [ ! -s "$tmp/ch.addr" ]; then
		cat "$tmp/chserver.log" >&2
		echo "test: private ClickHouse did not answer within 60s" >&2
		exit 1
	fi
	CRAWLER_CLICKHOUSE_ADDR=$(cat "$tmp/ch.addr")
	export CRAWLER_CLICKHOUSE_ADDR
	echo "test: private ClickHouse at $CRAWLER_CLICKHOUSE_ADDR"
fi

# TEST_MODULES="./libs ./deployments/local" limits the run to some modules.
modules=${TEST_MODULES:-$(go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')}
passed=0
failed=0
failures=()
step() { # $1 = description, rest = command
	local what=$1
	shift
	if "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$what")
		echo "test: FAILED: $what" >&2
	fi
}
gofmt_check() {
	local out
	out=$(gofmt -l "$1")
	if [ -n "$out" ]; then
		echo "unformatted files (run make fmt):" >&2
		echo "$out" >&2
		return 1
	fi
}

# golangci-lint, built once with the local Go when missing (a few minutes).
step "lint-install" make -s lint-install

for m in $modules; do
	echo "== $m"
	step "gofmt $m" gofmt_check "$m"
	step "vet $m" bash -c "cd '$root/$m' && go vet ./..."
	step "lint $m" make -s lint MODULES="$m"
	step "test $m" bash -c "cd '$root/$m' && go test -race -count=1 -timeout 30m ./..."
done

if [ "$failed" -gt 0 ]; then
	echo "test: failed steps: ${failures[*]}" >&2
fi
echo "test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# render-side-by-side.sh — CPU per rendered page and memory, our crawler
# (the launcher with --render) against Crawlee's PlaywrightCrawler
# (deployments/local/bench/crawlee), on the same generated web, on the same
# machine, with the same Chromium (issue 36). `make bench-render` runs it.
#
#   deployments/local/bench/render-side-by-side.sh
#   SIZES="10x34 20x50" RUNS=2 deployments/local/bench/render-side-by-side.sh
#   ROWS="always" SIZES=10x34 deployments/local/bench/render-side-by-side.sh
#
# Every row is one web, crawled by each side in turn:
#   always  every site script-built (websim --script-share 1), ours with
#           --render always: every HTML page rendered by both sides;
#   auto    half the sites script-built (--script-share 0.5), ours with
#           --render auto (only the script-built pages rendered), Crawlee
#           rendering every page as PlaywrightCrawler does.
# ROWS picks them (default "always auto"); SIZES the webs of the always
# rows (SITESxARTICLES, default "10x34 20x50"), AUTO_SIZES those of the auto
# rows (default 10x34); RUNS how many times each (default 1).
#
# What is measured, the same way for both sides: each crawler runs in a
# cgroup of its own (cgroup v1 cpuacct and memory; root), so its CPU is every
# process of its tree, exited ones included: for Crawlee node and its
# Chromium, for ours the launcher, the five services, the broker, ClickHouse
# and the fetcher's Chromium. The generated web is not counted: Crawlee's is
# started outside the cgroup, and the launcher's websim is moved out of it
# within a second of its start (what it used before that is taken off with
# its own figure from --bench-json). Chromium's processes are moved into a
# child cgroup as they appear, so the CPU splits into Chromium and the rest.
# Memory is sampled every second: the summed PSS of the tree's processes
# (a shared page counted once, divided among those mapping it) and the
# summed VmRSS (shared pages counted once per process); the peaks are
# printed.
#
# Both sides run pinned to CRAWL_CPUS (default 0), the web to WEB_CPUS
# (default 1), as make bench-crawl pins them. The figures, each run's
# output and logs go to OUT (default .crawl/bench-render); the table is
# printed at the end and written to OUT/table.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BENCH=$ROOT/deployments/local/bench
ROWS=${ROWS:-always auto}
SIZES=${SIZES:-10x34 20x50}
AUTO_SIZES=${AUTO_SIZES:-10x34}
RUNS=${RUNS:-1}
CRAWL_CPUS=${CRAWL_CPUS:-0}
WEB_CPUS=${WEB_CPUS:-1}
PORT=${PORT:-18080}
TABS=${TABS:-2}
DEPTH=${DEPTH:-10}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SIDES=${SIDES:-crawlee ours}
OUT=${OUT:-$ROOT/.crawl/bench-render}
GO=${GO:-go}

die() { echo "render-side-by-side: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (it measures each side in a cgroup of its own)"
CPUACCT=/sys/fs/cgroup/cpuacct
MEMROOT=/sys/fs/cgroup/memory
[ -f $CPUACCT/cpuacct.usage ] && [ -d $MEMROOT ] || die "needs cgroup v1 cpuacct and memory under /sys/fs/cgroup"
# The memory cgroups go under the one this script runs in, within its limits.
MEMBASE=$MEMROOT$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
[ -x "$CHROMIUM" ] || die "no Chromium at $CHROMIUM"
for c in node npm taskset curl python3; do command -v $c >/dev/null || die "needs $c"; done

mkdir -p "$OUT/bin"
echo "== building the launcher and websim"
(cd "$ROOT" && CGO_ENABLED=0 $GO build -o "$OUT/bin/crawl" ./deployments/local/cmd/crawl &&
	CGO_ENABLED=0 $GO build -o "$OUT/bin/websim" ./deployments/local/cmd/websim)
if [ ! -d "$BENCH/crawlee/node_modules" ]; then
	echo "== npm ci (crawlee, playwright; no browser download: Debian's Chromium is used)"
	(cd "$BENCH/crawlee" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi

# Cgroups of this run: one a side, <side>/chromium its Chromium's, $WEBCG
# the launcher's websim and $BUILDCG its go build once moved out.
TAG=trawl-render-$$
WEBCG=web
BUILDCG=build
cg_make() { # name
	mkdir -p "$CPUACCT/$TAG/$1" "$MEMBASE/$TAG/$1"
	echo 1 >"$MEMBASE/$TAG/$1/memory.move_charge_at_immigrate" 2>/dev/null || true
}
cg_remove() {
	local d
	for d in "$CPUACCT/$TAG" "$MEMBASE/$TAG"; do
		[ -d "$d" ] || continue
		find "$d" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true
		rmdir "$d" 2>/dev/null || true
	done
}
cg_usage() { cat "$CPUACCT/$TAG/$1/cpuacct.usage"; } # nanoseconds
cg_move() { # pid cgroup
	echo "$1" >"$CPUACCT/$TAG/$2/cgroup.procs" 2>/dev/null || return 0
	echo "$1" >"$MEMBASE/$TAG/$2/cgroup.procs" 2>/dev/null || true
}
WEBPID=
SAMPLER=
cleanup() {
	[ -z "$SAMPLER" ] || kill "$SAMPLER" 2>/dev/null || true
	[ -z "$WEBPID" ] || kill "$WEBPID" 2>/dev/null || true
	wait 2>/dev/null || true
	cg_remove
}
trap cleanup EXIT

# sample cg file: every 0.1 s, moves new Chromium processes of the side's
# cgroup into cg/chromium, the launcher's websim into $WEBCG and the Go
# toolchain (the launcher builds the services, from the build cache once
# built) into $BUILDCG; every second, appends the tree's summed PSS and RSS
# (KiB; all, then Chromium's) to file. It runs outside the measured cgroups.
sample() {
	local cg=$1 file=$2 pid comm pids cpids tick=0
	while :; do
		pids=
		while read -r pid; do
			comm=$(cat /proc/"$pid"/comm 2>/dev/null) || continue
			case $comm in
			chrom*) cg_move "$pid" "$cg/chromium" ;;
			websim) cg_move "$pid" $WEBCG ;;
			go | compile | link | asm | cgo | vet) cg_move "$pid" $BUILDCG ;;
			*) pids="$pids $pid" ;;
			esac
		done <"$CPUACCT/$TAG/$cg/cgroup.procs"
		if [ $((tick++ % 10)) = 0 ]; then
			cpids=$(cat "$CPUACCT/$TAG/$cg/chromium/cgroup.procs")
			{
				# shellcheck disable=SC2086 # word splitting of the pid lists is the point
				awk '/^Pss:/ { p += $2 } /^Rss:/ { r += $2 } END { printf "%d %d ", p, r }' \
					$(for p in $pids; do echo /proc/$p/smaps_rollup; done) /dev/null 2>/dev/null
				# shellcheck disable=SC2086
				awk '/^Pss:/ { p += $2 } /^Rss:/ { r += $2 } END { printf "%d %d\n", p, r }' \
					$(for p in $cpids; do echo /proc/$p/smaps_rollup; done) /dev/null 2>/dev/null
			} >>"$file"
		fi
		sleep 0.1
	done
}

# run_measured side cmd...: runs cmd pinned to CRAWL_CPUS in the side's
# cgroup and leaves cpu (ns: all, Chromium) and memory peaks (KiB) in
# $OUT/<run>.usage.
run_measured() {
	local side=$1
	shift
	cg_make "$side"
	cg_make "$side/chromium"
	cg_make $WEBCG
	cg_make $BUILDCG
	: >"$RUN.mem"
	sample "$side" "$RUN.mem" &
	SAMPLER=$!
	local start rc=0
	start=$(date +%s.%N)
	sh -c 'echo $$ >"$1/cgroup.procs" && echo $$ >"$2/cgroup.procs" && shift 2 && exec "$@"' \
		sh "$CPUACCT/$TAG/$side" "$MEMBASE/$TAG/$side" taskset -c "$CRAWL_CPUS" "$@" || rc=$?
	local wall
	wall=$(echo "$(date +%s.%N) - $start" | bc)
	kill "$SAMPLER" 2>/dev/null || true
	wait "$SAMPLER" 2>/dev/null || true
	SAMPLER=
	# Processes that outlived the crawler (none should) are left to finish:
	# their CPU so far is counted.
	echo "cpu_ns $(cg_usage "$side") chromium_ns $(cg_usage "$side/chromium") web_ns $(cg_usage $WEBCG) wall_s $wall" \
		"$(awk 'NF == 4 { if ($1+$3 > p) p = $1+$3; if ($2+$4 > r) r = $2+$4; if ($3 > cp) cp = $3 } END { printf "pss_kib %d rss_kib %d chromium_pss_kib %d", p, r, cp }' "$RUN.mem")" \
		>"$RUN.usage"
	cg_remove
	return $rc
}

# start_web args...: the generated web for Crawlee, outside the measured
# cgroup, on WEB_CPUS; its ready line in $RUN.ready.
start_web() {
	taskset -c "$WEB_CPUS" "$OUT/bin/websim" --port "$PORT" "$@" >"$RUN.ready" 2>"$RUN.websim.log" &
	WEBPID=$!
	local i
	for i in $(seq 100); do
		[ -s "$RUN.ready" ] && return 0
		kill -0 $WEBPID 2>/dev/null || die "websim exited: $(cat "$RUN.websim.log")"
		sleep 0.1
	done
	die "websim not ready after 10s"
}

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

ROWSFILE=$OUT/rows.tsv
: >"$ROWSFILE"

# crawlee_run label sites articles share
crawlee_run() {
	local label=$1 sites=$2 articles=$3 share=$4
	start_web --hosts "$sites" --articles "$articles" --script-share "$share"
	echo "== $label: crawlee, $sites sites x $articles articles, script share $share ($RUN.*)"
	(cd "$BENCH/crawlee" && run_measured crawlee node main.mjs --ready "$RUN.ready" --concurrency "$TABS" \
		--max-depth "$DEPTH" --storage "$RUN.storage" --chromium "$CHROMIUM") >"$RUN.out" 2>"$RUN.err" ||
		die "crawlee failed: $(tail -5 "$RUN.err")"
	curl -fsS "$(json "$RUN.ready" 'd["stats"]')" >"$RUN.web.json"
	kill $WEBPID
	wait $WEBPID 2>/dev/null || true
	WEBPID=
	rm -rf "$RUN.storage"
	local rendered
	rendered=$(tail -1 "$RUN.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pages"])')
	record "$label" crawlee "$rendered" 0
}

# ours_run label sites articles share render
ours_run() {
	local label=$1 sites=$2 articles=$3 share=$4 render=$5 data=$RUN.data
	rm -rf "$data"
	echo "== $label: ours --render $render, $sites sites x $articles articles, script share $share ($RUN.*)"
	(cd "$ROOT" && run_measured ours "$OUT/bin/crawl" --web --web-hosts "$sites" --web-articles "$articles" \
		--web-script-share "$share" --web-port "$PORT" --site-cpus "$WEB_CPUS" --delay 0 --max-depth "$DEPTH" \
		--render "$render" --bench --data-dir "$data" --bench-json "$RUN.bench.json" \
		--cancel-others) >"$RUN.out" 2>&1 || die "crawl failed: $(tail -5 "$RUN.out")"
	json "$RUN.bench.json" 'json.dumps(d["web"])' >"$RUN.web.json"
	# The websim's CPU before the sampler moved it out of the cgroup.
	local webcpu rendered
	webcpu=$(json "$RUN.bench.json" 'd["processes"]["websim"]["CPU"]')
	rendered=$(cd "$ROOT" && "$OUT/bin/crawl" query --data-dir "$data" \
		"SELECT countIf(rendered != '') FROM documents FINAL" 2>>"$RUN.out" | tail -1 | tr -dc 0-9)
	record "$label" "ours-$render" "${rendered:-0}" "$webcpu"
}

# record label side rendered websim_cpu_ns: one row of the table.
record() {
	local label=$1 side=$2 rendered=$3 webcpu=$4
	python3 - "$RUN.usage" "$RUN.web.json" "$label" "$side" "$rendered" "$webcpu" >>"$ROWSFILE" <<'EOF'
import json, sys
usage_file, web_file, label, side, rendered, webcpu = sys.argv[1:]
f = open(usage_file).read().split()
u = {f[i]: float(f[i + 1]) for i in range(0, len(f), 2)}
web = json.load(open(web_file))
cpu = u["cpu_ns"]
if side != "crawlee":
    # websim's CPU before it left the cgroup: its total less what it used outside.
    cpu -= max(0.0, float(webcpu) - u["web_ns"])
rendered = int(rendered)
pages = web["pages"]
print("\t".join(str(x) for x in [
    label, side, rendered, pages, web["pages_total"], web["requests"], web["by_kind"].get("data", 0),
    round(cpu / 1e9, 2), round(u["chromium_ns"] / 1e9, 2),
    round(cpu / 1e6 / rendered, 1) if rendered else "-",
    round(cpu / 1e6 / pages, 1) if pages else "-",
    round(u["pss_kib"] / 1024), round(u["chromium_pss_kib"] / 1024), round(u["rss_kib"] / 1024),
    round(u["wall_s"], 1)]))
EOF
	tail -1 "$ROWSFILE"
}

for row in $ROWS; do
	case $row in
	always) sizes=$SIZES share=1 ;;
	auto) sizes=$AUTO_SIZES share=0.5 ;;
	*) die "row $row: want always or auto" ;;
	esac
	for size in $sizes; do
		sites=${size%x*} articles=${size#*x}
		for run in $(seq "$RUNS"); do
			for side in $SIDES; do
				RUN=$OUT/$row-$size-$run-$side
				case $side in
				crawlee) crawlee_run "$row $size #$run" "$sites" "$articles" $share ;;
				ours) ours_run "$row $size #$run" "$sites" "$articles" $share $row ;;
				*) die "side $side: want crawlee or ours" ;;
				esac
				rm -rf "$RUN.data"
			done
		done
	done
done

{
	echo
	echo "render-side-by-side: CPU of every process of each side's tree (Chromium's included, the web's not), pinned to CPU $CRAWL_CPUS; $TABS tabs"
	printf "%-14s %-13s %9s %11s %9s %8s %9s %10s %10s %10s %9s %10s %9s %7s\n" \
		run side rendered "pages/of" requests "data req" "cpu s" "chromium s" "ms/render" "ms/page" "peak PSS" "chrom PSS" "peak RSS" "wall s"
	while IFS=$'\t' read -r label side rendered pages total reqs data cpu chrom msr msp pss cpss rss wall; do
		printf "%-14s %-13s %9s %11s %9s %8s %9s %10s %10s %10s %6s MiB %6s MiB %5s MiB %7s\n" \
			"$label" "$side" "$rendered" "$pages/$total" "$reqs" "$data" "$cpu" "$chrom" "$msr" "$msp" "$pss" "$cpss" "$rss" "$wall"
	done <"$ROWSFILE"
	echo "rendered: pages loaded in Chromium (Crawlee: requests its handler got; ours: documents with rendered != '')."
	echo "pages/of: distinct content pages of the web fetched, of all; ms/page divides the CPU by those."
	echo "data req: the web's /data/<page>.json requests, one per load of a script-built page that ran its script."
	echo "peak PSS, RSS: the summed PSS and VmRSS of the tree's processes, sampled every second."
} | tee "$OUT/table.txt"

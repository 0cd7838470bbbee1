# trawl — developer entry points. Every Go module of the workspace (go.work)
# is handled in turn: in a workspace `./...` does not cross modules.

GO      ?= go
MODULES := $(shell $(GO) work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')
BENCH_MODULES := $(filter ./libs ./services/%,$(MODULES))

# make crawl                     crawl the built-in demo site
# make crawl SEEDS=seeds.txt     crawl the URLs in a seeds file
# make crawl ARGS="--fetchers 2 --delay 500ms"
SEEDS ?=
ARGS  ?=

.PHONY: crawl export test bench bench-crawl bench-best bench-extract profile proto vet fmt tidy lint lint-install images

# golangci-lint, pinned: `make lint-install` builds it with the local Go
# (a prebuilt release may be built with an older Go than go.work asks for).
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT ?= $(shell $(GO) env GOPATH)/bin/golangci-lint

# The launcher and the services it builds are static (CGO_ENABLED=0), as in
# the images: no libc mapped into every process of the crawl.
crawl:
	CGO_ENABLED=0 $(GO) run ./deployments/local/cmd/crawl $(if $(SEEDS),--seeds-file $(SEEDS),--demo) $(ARGS)

# make export                   the last crawl's documents as JSON lines on standard output
#                               (the command is not echoed: make export > docs.jsonl works)
# make export ARGS="--table fetch_log --format csv --out f.csv"
#                               (tables documents, fetch_log, links, url_events; formats
#                               jsonl, csv, parquet; --crawl-id, --data-dir as make crawl's .crawl)
export:
	@CGO_ENABLED=0 $(GO) run ./deployments/local/cmd/crawl export $(ARGS)

test:
	bash scripts/test.sh

# make bench                    Go micro-benchmarks, then the crawl benchmark
# make bench-crawl              every process of a crawl of the generated web on CPU
#                               $(BENCH_CPUS), the web on $(SITE_CPUS): pages/s (and by quarter of
#                               the crawl), duplicate requests, CPU ms per request, GC share,
#                               peak RSS, connections, ClickHouse merges and parts
# make bench-crawl SIZE=150k SHAPE=huge
#                               SIZE: about 15k (default), 150k or 1.5M requests;
#                               SHAPE: sites (default: many small sites of 50 articles, 200,
#                               2 000 or 20 000 hosts) or huge (a few sites of 4 500, 45 000
#                               or 225 000 articles, far more than the fetcher may hold of one)
# make bench-best               best-first's figure (issue 38): on a web whose most linked pages
#                               sit deepest (--web-best-deep: 530 pages a site, 53 of them linked
#                               by 30 pages each, all at depth 3), with a page budget of a fifth of
#                               it, the share of its most linked tenth the crawl holds, best-first
#                               (the default order) and breadth-first (--breadth-first), at
#                               BEST_SITES sites (20 and 200); each run's figures in
#                               $(BENCH_DIR)/best-SITES-ORDER.txt, the held shares printed at the end
# make bench-extract            issue 37's figures on the shop web (--web-shop: category lists and
#                               EXTRACT_PRODUCTS product pages a shop whose values, JSON-LD, microdata
#                               and OpenGraph are known, manuals in PDF, spec sheets in docx), crawled
#                               with deployments/local/bench/shop-extract.json and --documents pdf,docx
#                               at EXTRACT_SITES shops (20 and 200): the shares of fields, structured
#                               data and documents' text stored exactly, and the first mismatches;
#                               each run's figures in $(BENCH_DIR)/extract-SITES.txt
# make profile                  the crawl benchmark with a CPU and allocation profile per service
BENCH_CPUS ?= 0
SITE_CPUS  ?= 1
BENCH_DIR  ?= .crawl/bench
SIZE       ?= 15k
SHAPE      ?= sites
WEB_sites_15k  := --web-hosts 200 --web-articles 50
WEB_sites_150k := --web-hosts 2000 --web-articles 50
WEB_sites_1.5M := --web-hosts 20000 --web-articles 50
WEB_huge_15k   := --web-hosts 3 --web-articles 4500
WEB_huge_150k  := --web-hosts 3 --web-articles 45000
WEB_huge_1.5M  := --web-hosts 6 --web-articles 225000
WEB_SHAPE   = $(or $(WEB_$(SHAPE)_$(SIZE)),$(error SIZE=$(SIZE) SHAPE=$(SHAPE): want SIZE 15k, 150k or 1.5M and SHAPE sites or huge))
# The previous run's data is moved aside, not deleted, and deleted once this
# run is measured: on a file system without a journal (this VM's), ext4 skips
# recently deleted inodes one by one when it creates a file, and ClickHouse,
# which creates a file per column of every part, spent a fifth of its CPU
# there when the old data had just been deleted.
BENCH_PREP  = old=$(BENCH_DIR)/.old-$$$$ && mkdir -p $$old && \
	for d in kafka clickhouse logs profiles warc; do [ ! -e $(BENCH_DIR)/$$d ] || mv $(BENCH_DIR)/$$d $$old/; done && \
	CGO_ENABLED=0 $(GO) build -o $(BENCH_DIR)/crawl ./deployments/local/cmd/crawl
BENCH_CRAWL = taskset -c $(BENCH_CPUS) $(BENCH_DIR)/crawl --web $(WEB_SHAPE) --delay 0 --max-depth 10 --bench --site-cpus $(SITE_CPUS) \
		--data-dir $(BENCH_DIR) --bench-json $(BENCH_DIR)/bench.json
BENCH_DONE  = s=$$?; rm -rf $(BENCH_DIR)/.old-*; exit $$s

bench:
	@set -e; for m in $(BENCH_MODULES); do \
		echo "== bench $$m"; \
		(cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...); \
	done
	$(MAKE) bench-crawl

bench-crawl:
	@$(BENCH_PREP)
	$(BENCH_CRAWL) $(ARGS); $(BENCH_DONE)

BEST_SITES  ?= 20 200
BEST_ORDERS ?= best-first breadth-first
BEST_DELAY  ?= 1s
# A site has 530 pages: a budget of 106 a site is a fifth of the web.
# best-first is the default order; --breadth-first sets the spec's priority.breadth_first.
# The crawl is polite (BEST_DELAY, the fetchers' default delay): the order can only choose
# among the URLs known, and with no delay a host's queue empties faster than its pages'
# links come back through the parser and the scheduler.
bench-best:
	@set -e; for n in $(BEST_SITES); do for order in $(BEST_ORDERS); do \
		echo "== bench-best: $$n sites, $$order, --max-pages $$((n * 106))"; \
		flag=; [ $$order = best-first ] || flag=--$$order; \
		$(BENCH_PREP); \
		taskset -c $(BENCH_CPUS) $(BENCH_DIR)/crawl --web --web-best-deep --web-hosts $$n --max-pages $$((n * 106)) $$flag \
			--delay $(BEST_DELAY) --max-depth 10 --bench --site-cpus $(SITE_CPUS) --data-dir $(BENCH_DIR) \
			--bench-json $(BENCH_DIR)/best-$$n-$$order.json > $(BENCH_DIR)/best-$$n-$$order.txt 2>&1 || \
			{ s=$$?; tail -20 $(BENCH_DIR)/best-$$n-$$order.txt; rm -rf $(BENCH_DIR)/.old-*; exit $$s; }; \
		rm -rf $(BENCH_DIR)/.old-*; \
		grep -E "most-linked|distinct pages/s|all  " $(BENCH_DIR)/best-$$n-$$order.txt; \
	done; done; \
	echo "== bench-best: most linked pages held with a budget of a fifth of the web"; \
	for n in $(BEST_SITES); do for order in $(BEST_ORDERS); do \
		printf "  %4d sites, %-13s  %s\n" $$n $$order "$$(grep -o 'most-linked pages held: [^;]*;[^;]*' $(BENCH_DIR)/best-$$n-$$order.txt)"; \
	done; done

EXTRACT_SITES    ?= 20 200
EXTRACT_PRODUCTS ?= 30
EXTRACT_LINES     = shop:|fields exact|JSON-LD exact|microdata exact|OpenGraph exact|malformed recorded|manuals \(|spec sheets \(|first mismatches|^    http|distinct pages/s
bench-extract:
	@set -e; for n in $(EXTRACT_SITES); do \
		echo "== bench-extract: $$n shops of $(EXTRACT_PRODUCTS) products"; \
		$(BENCH_PREP); \
		taskset -c $(BENCH_CPUS) $(BENCH_DIR)/crawl --web --web-shop --web-hosts $$n --web-articles $(EXTRACT_PRODUCTS) \
			--extract deployments/local/bench/shop-extract.json --documents pdf,docx \
			--delay 0 --max-depth 10 --bench --site-cpus $(SITE_CPUS) --data-dir $(BENCH_DIR) \
			--bench-json $(BENCH_DIR)/extract-$$n.json > $(BENCH_DIR)/extract-$$n.txt 2>&1 || \
			{ s=$$?; tail -20 $(BENCH_DIR)/extract-$$n.txt; rm -rf $(BENCH_DIR)/.old-*; exit $$s; }; \
		rm -rf $(BENCH_DIR)/.old-*; \
		grep -E "$(EXTRACT_LINES)" $(BENCH_DIR)/extract-$$n.txt; \
	done; \
	echo "== bench-extract: stored exactly of the shop's known values"; \
	for n in $(EXTRACT_SITES); do \
		printf "  %4d shops: %s\n" $$n "$$(grep -E 'fields exact|JSON-LD exact|microdata exact|OpenGraph exact|malformed recorded|manuals \(|spec sheets \(' $(BENCH_DIR)/extract-$$n.txt | \
			sed -E 's/^ +//; s/^(.*[^ ]) +([0-9.]+%|–) .*/\1 \2/' | paste -sd',' - | sed 's/,/, /g')"; \
	done

profile:
	@$(BENCH_PREP)
	$(BENCH_CRAWL) --profile $(BENCH_DIR)/profiles $(ARGS); $(BENCH_DONE)

# make images                   the service and trawlctl images (deployments/docker)
#                               with docker or podman; IMAGE_TAG=dev by default
ENGINE    ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)
IMAGE_TAG ?= dev
IMAGES    := fetcher parser proxypool scheduler seeder trawlctl

images:
	@[ -n "$(ENGINE)" ] || { echo "make images: no container engine (docker or podman) found" >&2; exit 1; }
	@set -e; for i in $(IMAGES); do \
		echo "== image trawl/$$i:$(IMAGE_TAG)"; \
		$(ENGINE) build -f deployments/docker/$$i.Dockerfile -t trawl/$$i:$(IMAGE_TAG) .; \
	done

proto:
	protoc --proto_path=libs/crawlmsg/crawlv1 \
		--go_out=libs/crawlmsg/crawlv1 --go_opt=paths=source_relative \
		libs/crawlmsg/crawlv1/*.proto

vet:
	@set -e; for m in $(MODULES); do echo "== vet $$m"; (cd $$m && $(GO) vet ./...); done

# make lint                     golangci-lint (.golangci.yml) over every module
lint: lint-install
	@set -e; for m in $(MODULES); do echo "== lint $$m"; (cd $$m && $(GOLANGCI_LINT) run --allow-parallel-runners ./...); done

lint-install:
	@$(GOLANGCI_LINT) version 2>/dev/null | grep -q "version $(GOLANGCI_LINT_VERSION:v%=%) " || { \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION)"; \
		GOBIN=$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); }

fmt:
	gofmt -w $(MODULES)

tidy:
	@set -e; for m in $(MODULES); do echo "== tidy $$m"; (cd $$m && $(GO) mod tidy); done

# make bench-render             issue 36's figure: CPU per rendered page and peak memory, our crawl
#                               (--render always on a web of script-built sites; --render auto on a
#                               half script-built one) against Crawlee's PlaywrightCrawler
#                               (deployments/local/bench/crawlee) on the same web with the same
#                               Chromium, every process of each side's tree counted (cgroups; root)
# make bench-render SIZES="10x34 20x50" RUNS=2 ROWS="always auto"
#                               see deployments/local/bench/README.md
.PHONY: bench-render
bench-render:
	bash deployments/local/bench/render-side-by-side.sh

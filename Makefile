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

.PHONY: crawl test bench proto vet fmt tidy

crawl:
	$(GO) run ./deployments/local/cmd/crawl $(if $(SEEDS),--seeds-file $(SEEDS),--demo) $(ARGS)

test:
	bash scripts/test.sh

bench:
	@set -e; for m in $(BENCH_MODULES); do \
		echo "== bench $$m"; \
		(cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...); \
	done
	$(GO) run ./deployments/local/cmd/crawl --demo --demo-pages 2000 --delay 0 --bench --data-dir .crawl/bench $(ARGS)

proto:
	protoc --proto_path=libs/crawlmsg/crawlv1 \
		--go_out=libs/crawlmsg/crawlv1 --go_opt=paths=source_relative \
		libs/crawlmsg/crawlv1/*.proto

vet:
	@set -e; for m in $(MODULES); do echo "== vet $$m"; (cd $$m && $(GO) vet ./...); done

fmt:
	gofmt -w $(MODULES)

tidy:
	@set -e; for m in $(MODULES); do echo "== tidy $$m"; (cd $$m && $(GO) mod tidy); done

package app

import (
	"fmt"
	"os"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/config"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/consume"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/hoststate"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/proxies"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/redelivery"
)

// fetchOptions turns the configuration into the HTTP fetcher's options;
// pool, when not nil, is the proxy pool requests go through.
func fetchOptions(cfg config.Config, pool *proxies.Pool) (httpfetch.Options, error) {
	fo := httpfetch.Options{
		UserAgent:             cfg.UserAgent,
		ConnectTimeout:        cfg.ConnectTimeout,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		FetchTimeout:          cfg.FetchTimeout,
		MaxBodyBytes:          cfg.MaxBodyBytes,
		MaxDocumentBytes:      cfg.MaxDocumentBytes,
		AllowPrivate:          cfg.AllowPrivate,
		MinTransferRate:       cfg.MinTransferRate,
		TransferRateWindow:    cfg.TransferRateWindow,
		Cookies:               cfg.Cookies,
		MaxCookieHosts:        cfg.MaxCookieHosts,
		MaxCookiesPerHost:     cfg.MaxCookiesPerHost,
		DNSCacheTTL:           cfg.DNSCacheTTL,
		DNSCacheSize:          cfg.DNSCacheSize,
		MaxIdleConns:          cfg.MaxIdleConns,
		IdleConnTimeout:       cfg.IdleConnTimeout,
	}
	if pool != nil {
		fo.Proxies = pool
	}
	if cfg.CredentialsFile != "" {
		creds, err := readCredentials(cfg.CredentialsFile)
		if err != nil {
			return httpfetch.Options{}, err
		}
		fo.Credentials = creds
	}
	if cfg.MinTransferRate == 0 {
		fo.MinTransferRate = -1 // disabled
	}
	return fo, nil
}

// readCredentials reads the --credentials-file.
func readCredentials(path string) (map[string]httpfetch.Credential, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open credentials file: %w", err)
	}
	// Only read: a failed Close loses nothing.
	defer func() { _ = f.Close() }()
	creds, err := httpfetch.ReadCredentials(f)
	if err != nil {
		return nil, fmt.Errorf("read credentials file %s: %w", path, err)
	}
	return creds, nil
}

// consumeOptions turns the configuration into the consumer's options: the
// crawl specifications it follows, the store that records fetches and
// robots.txt, the fetcher's resolver.
func consumeOptions(cfg config.Config, specs *crawlcontrol.Specs, store *chstore.Store, fetcher *httpfetch.Fetcher) consume.Options {
	topics := cfg.Kafka.Topics()
	maxRedirects := cfg.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = -1 // no target followed
	}
	var hostStates consume.HostStateLoader
	if cfg.PersistHostState {
		hostStates = hoststate.NewLoader(cfg.Kafka, topics.HostState)
	}
	var robotsTxt consume.RobotsStore
	if cfg.PersistRobots {
		robotsTxt = store
	}
	var readback redelivery.Published
	if cfg.ReadbackWindow > 0 {
		readback = published.NewReader(cfg.Kafka, topics.Fetched, cfg.ReadbackWindow, 0)
	}
	var servers *politeness.Gate
	if cfg.ServerDelay > 0 {
		servers = politeness.NewGate(time.Now, cfg.ServerDelay)
	}
	unacked := cfg.MaxInflightPerPartition + settlingFor(cfg.MaxInflightPerPartition) // a partition's, at most
	return consume.Options{
		Topics:     topics,
		Workers:    cfg.Workers,
		Politeness: politeness.Options{Delay: cfg.Delay, MaxCrawlDelay: cfg.MaxCrawlDelay, ResponseFactor: cfg.DelayResponseFactor},
		Outcome: outcome.Options{
			InstanceID: cfg.InstanceID, MaxAttempts: cfg.MaxAttempts, RetryBackoff: cfg.RetryBackoff,
			MaxRetryBackoff: cfg.MaxRetryBackoff, MaxRedirects: maxRedirects,
		},
		Limits:     decide.Limits{MaxHostQueue: cfg.MaxHostQueue, HoldHorizon: cfg.HoldHorizon, PauseRecheck: cfg.PauseRecheck},
		HostStates: hostStates,
		Crawls:     specs,
		Recorded:   store,
		Published:  readback,
		Servers:    servers,
		Resolve:    fetcher.Resolve,
		RobotsTxt:  robotsTxt,
		Attempts:   partition.NewAttempts(partition.AttemptsFor(cfg.Kafka.Partitions, unacked)),
		FlushAt:    flushAt(cfg.MaxInflightPerPartition),
	}
}

// settlingFor is how many requests of a partition may wait for their
// fetch-log insert outside its window (kafkaio.GroupConfig.MaxSettling;
// consume's handler releases a request once its outcome is with the
// recorder): twice the window. Reading then never waits for an insert
// that is due (flushAt), and a partition holds at most three windows of
// records unacked: a request waiting for its row holds a compacted task
// and the row, not its body (released once produced).
func settlingFor(window int) int { return 2 * window }

// flushAt is where a partition's requests waiting for their fetch-log
// insert have the insert go before its interval (consume.Options.FlushAt):
// a window of them, so that an insert carries at least that many rows,
// and the next window is read and fetched while it runs. They wait
// outside the window (settlingFor): when the window itself held them the
// mark was half of it, and a partition of a few busy hosts inserted
// every second or two, each insert a part of fetch_log and of its two
// rollups, merged again and again while small (7.6 rows merged per row
// of fetch_log at 1.5 M pages on six hosts).
func flushAt(window int) int { return max(window, 1) }

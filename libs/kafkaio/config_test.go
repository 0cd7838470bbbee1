package kafkaio

import (
	"flag"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestRegisterFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want Config
	}{
		{name: "defaults", want: DefaultConfig()},
		{
			name: "all flags",
			args: []string{
				"-kafka-brokers", " 10.0.0.1:9092, 10.0.0.2:9092 ,",
				"-kafka-partitions", "64",
				"-kafka-topic-prefix", "prod.",
				"-kafka-session-timeout", "30s",
				"-kafka-rebalance-timeout", "45s",
				"-kafka-max-message-bytes", "2097152",
				"-kafka-compression", "zstd",
				"-kafka-fetch-min-bytes", "1",
				"-kafka-fetch-max-bytes", "262144",
			},
			want: Config{
				Brokers:          []string{"10.0.0.1:9092", "10.0.0.2:9092"},
				Partitions:       64,
				TopicPrefix:      "prod.",
				SessionTimeout:   30 * time.Second,
				RebalanceTimeout: 45 * time.Second,
				MaxMessageBytes:  2 << 20,
				Compression:      "zstd",
				FetchMinBytes:    1,
				FetchMaxBytes:    256 << 10,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			var c Config
			c.RegisterFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Brokers, tt.want.Brokers) {
				t.Errorf("Brokers = %q, want %q", c.Brokers, tt.want.Brokers)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
			if !reflect.DeepEqual(c, tt.want) {
				t.Errorf("config = %+v, want %+v", c, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no brokers", func(c *Config) { c.Brokers = nil }, false},
		{"blank broker", func(c *Config) { c.Brokers = []string{" "} }, false},
		{"zero partitions", func(c *Config) { c.Partitions = 0 }, false},
		{"max partitions", func(c *Config) { c.Partitions = MaxPartitions }, true},
		{"too many partitions", func(c *Config) { c.Partitions = MaxPartitions + 1 }, false},
		{"zero session timeout", func(c *Config) { c.SessionTimeout = 0 }, false},
		{"negative rebalance timeout", func(c *Config) { c.RebalanceTimeout = -time.Second }, false},
		{"negative fetch min bytes", func(c *Config) { c.FetchMinBytes = -1 }, false},
		{"negative fetch max bytes", func(c *Config) { c.FetchMaxBytes = -1 }, false},
		{"fetch max bytes below the minimum", func(c *Config) { c.FetchMaxBytes = c.FetchMinBytes - 1 }, false},
		{"fetch max bytes at the minimum", func(c *Config) { c.FetchMaxBytes = c.FetchMinBytes }, true},
		{"default fetch max bytes below a larger minimum", func(c *Config) { c.FetchMaxBytes, c.FetchMinBytes = 0, 2<<20 }, false},
		{"max message bytes below 1 MiB", func(c *Config) { c.MaxMessageBytes = 1<<20 - 1 }, false},
		{"max message bytes 1 MiB", func(c *Config) { c.MaxMessageBytes = 1 << 20 }, true},
		{"bad prefix", func(c *Config) { c.TopicPrefix = "a b" }, false},
		{"empty prefix", func(c *Config) { c.TopicPrefix = "" }, true},
		{"no compression", func(c *Config) { c.Compression = "none" }, true},
		{"unknown compression", func(c *Config) { c.Compression = "brotli" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestTopics(t *testing.T) {
	c := DefaultConfig()
	got := c.Topics()
	want := Topics{
		Discovered:    "crawler.urls.discovered",
		Fetch:         "crawler.urls.fetch",
		Fetched:       "crawler.pages.fetched",
		Proxies:       "crawler.proxies",
		ProxyState:    "crawler.proxypool.state",
		ProxyFeedback: "crawler.proxies.feedback",
		Control:       "crawler.control",
		HostState:     "crawler.fetcher.hoststate",
		Documents:     "crawler.documents",
	}
	if got != want {
		t.Errorf("Topics() = %+v, want %+v", got, want)
	}
	if g := c.GroupFor("fetcher"); g != "crawler.fetcher" {
		t.Errorf("GroupFor = %q", g)
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		url     string
		want    string
		wantErr bool
	}{
		{url: "http://Example.COM/a?b", want: "example.com"},
		{url: "https://example.com:8443/", want: "example.com:8443"},
		{url: "https://example.com:443/", want: "example.com"},
		{url: "not a url", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := Key(tt.url)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Key(%q) err = %v, wantErr %v", tt.url, err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("Key(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c Config) {
				if c.Delay != time.Second || c.MaxCrawlDelay != 30*time.Second || c.Workers != 32 ||
					c.MaxBodyBytes != 2<<20 || c.AllowPrivate || c.UseProxies || c.InstanceID != "host-1" ||
					c.MaxInflightPerPartition != 1000 || !strings.HasPrefix(c.UserAgent, "trawl/") || !c.PersistRobots ||
					c.MaxPages != 0 || c.BudgetRefresh != 5*time.Second {
					t.Fatalf("defaults = %+v", c)
				}
			},
		},
		{
			name: "flags beat environment",
			args: []string{"-delay", "250ms", "-allow-private"},
			env:  map[string]string{"CRAWLER_DELAY": "5s", "CRAWLER_WORKERS": "10", "CRAWLER_MAX_CRAWL_DELAY": "1m"},
			check: func(t *testing.T, c Config) {
				if c.Delay != 250*time.Millisecond || c.Workers != 10 || !c.AllowPrivate || c.MaxCrawlDelay != time.Minute {
					t.Fatalf("config = %+v", c)
				}
			},
		},
		{name: "zero workers", args: []string{"-workers", "0"}, wantErr: "workers"},
		{name: "cap below delay", args: []string{"-delay", "10s", "-max-crawl-delay", "5s"}, wantErr: "max-crawl-delay"},
		{name: "negative timeout", args: []string{"-fetch-timeout", "-1s"}, wantErr: "fetch-timeout"},
		{name: "user agent without token", args: []string{"-user-agent", "/x"}, wantErr: "user-agent"},
		{name: "zero cookie hosts", args: []string{"-max-cookie-hosts", "0"}, wantErr: "max-cookie-hosts"},
		{name: "no idle connections", args: []string{"-max-idle-conns", "0"}, wantErr: "max-idle-conns"},
		{name: "negative idle timeout", args: []string{"-idle-conn-timeout", "-1s"}, wantErr: "idle-conn-timeout"},
		{name: "zero dns cache ttl", args: []string{"-dns-cache-ttl", "0s"}, wantErr: "dns-cache-ttl"},
		{name: "negative page budget", args: []string{"-max-pages", "-1"}, wantErr: "max-pages"},
		{name: "zero budget refresh", args: []string{"-budget-refresh", "0s"}, wantErr: "budget-refresh"},
		{name: "bad env value", env: map[string]string{"CRAWLER_DELAY": "soon"}, wantErr: "CRAWLER_DELAY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			c, err := Load(tt.args, env, "host-1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load = %v, want error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

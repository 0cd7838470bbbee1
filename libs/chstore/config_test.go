package chstore_test

import (
	"flag"
	"reflect"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
)

func TestConfigFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    chstore.Config
		wantErr bool
	}{
		{name: "defaults", want: chstore.Config{Addr: []string{"127.0.0.1:9000"}, Database: "crawler", Username: "default", DialTimeout: 5 * time.Second,
			FlushInterval: 2 * time.Second, BatchRows: 10000}},
		{
			name: "all set",
			args: []string{"-clickhouse-addr", "a:9000, b:9000", "-clickhouse-database", "crawl_2", "-clickhouse-user", "u", "-clickhouse-password", "p", "-clickhouse-dial-timeout", "2s",
				"-clickhouse-flush-interval", "250ms", "-clickhouse-batch-rows", "500", "-clickhouse-cluster", "crawl_cluster"},
			want: chstore.Config{Addr: []string{"a:9000", "b:9000"}, Database: "crawl_2", Username: "u", Password: "p", DialTimeout: 2 * time.Second,
				FlushInterval: 250 * time.Millisecond, BatchRows: 500, Cluster: "crawl_cluster"},
		},
		{name: "no address", args: []string{"-clickhouse-addr", " , "}, wantErr: true},
		{name: "address without port", args: []string{"-clickhouse-addr", "localhost"}, wantErr: true},
		{name: "database with quote", args: []string{"-clickhouse-database", "a`b"}, wantErr: true},
		{name: "database with dash", args: []string{"-clickhouse-database", "a-b"}, wantErr: true},
		{name: "cluster with dash", args: []string{"-clickhouse-cluster", "a-b"}, wantErr: true},
		{name: "empty user", args: []string{"-clickhouse-user", ""}, wantErr: true},
		{name: "zero timeout", args: []string{"-clickhouse-dial-timeout", "0s"}, wantErr: true},
		{name: "negative flush interval", args: []string{"-clickhouse-flush-interval", "-1s"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c chstore.Config
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			c.RegisterFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !reflect.DeepEqual(c, tt.want) {
				t.Errorf("config = %+v, want %+v", c, tt.want)
			}
		})
	}
}

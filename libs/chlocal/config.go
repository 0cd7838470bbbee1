package chlocal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"text/template"
	"time"
)

// configData is what configTmpl (and a template given to the load
// benchmark) is rendered with.
type configData struct {
	Dir               string
	TCPPort, HTTPPort int
	// Legacy is set for an 18.x server (ClickHouse 18.16 is the Debian
	// package): its merges hold whole 8192-row blocks of every source part
	// in memory, and it reads the merge pool size from the default
	// profile. Current releases get none of the Legacy settings.
	Legacy bool
	// TLSPort, when not 0, is the native protocol's TLS port
	// (tcp_port_secure) with the certificate in TLS.
	TLSPort int
	TLS     *TLS
	Users   []user // users besides default, with passwords
	// Cluster, when not nil, makes the server one node of a cluster
	// (StartCluster): ZooKeeper, remote_servers, macros, the interserver
	// port replicas fetch parts over, the distributed DDL queue.
	Cluster *nodeConfig
	// PartLog turns system.part_log on (Options.PartLog).
	PartLog bool
}

// user is a password-protected user of the server's config.
type user struct {
	Name, PasswordSHA256 string // hex SHA-256 of the password
}

// configTmpl is the server configuration for a local crawl on a laptop or a
// 2-core box. The figures below come from BenchmarkCrawlInsertLoad
// (load_bench_test.go) replaying the benchmark crawl's inserts (165
// pages/s for 130 s, 1 s flushes; deployments/local/README.md has the
// table). Every setting outside the Legacy blocks exists in 18.16 and in
// current releases.
var configTmpl = template.Must(template.New("config").Parse(`<?xml version="1.0"?>
<!-- Written by chlocal; rewritten at every start. Tuned for a local crawl
     on a laptop or a 2-core box: libs/chlocal/config.go and the section
     "The private ClickHouse" of deployments/local/README.md say why. -->
<yandex>
  <logger>
    <level>warning</level>
    <log>{{.Dir}}/log/server.log</log>
    <errorlog>{{.Dir}}/log/server.err.log</errorlog>
    <size>10M</size>
    <count>2</count>
    <console>0</console>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{{.TCPPort}}</tcp_port>
  <http_port>{{.HTTPPort}}</http_port>
{{- if .TLSPort}}
  <!-- The native protocol over TLS. Both 18.16 (Poco with the system's
       OpenSSL) and current releases read this openSSL block; no
       dhParamsFile: ECDHE needs none, and Poco's default DH parameters
       serve the rest. With a client CA the server requires a client
       certificate signed by it (strict), otherwise it asks for none. -->
  <tcp_port_secure>{{.TLSPort}}</tcp_port_secure>
  <openSSL>
    <server>
      <certificateFile>{{.TLS.CertFile}}</certificateFile>
      <privateKeyFile>{{.TLS.KeyFile}}</privateKeyFile>
{{- if .TLS.ClientCAFile}}
      <caConfig>{{.TLS.ClientCAFile}}</caConfig>
      <verificationMode>strict</verificationMode>
{{- else}}
      <verificationMode>none</verificationMode>
{{- end}}
      <loadDefaultCAFile>false</loadDefaultCAFile>
      <cacheSessions>true</cacheSessions>
      <disableProtocols>sslv2,sslv3,tlsv1,tlsv1_1</disableProtocols>
      <preferServerCiphers>true</preferServerCiphers>
    </server>
  </openSSL>
{{- end}}
{{- with .Cluster}}
  <!-- One node of a local cluster (StartCluster). Replicas fetch parts
       from each other over the interserver HTTP port. -->
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <interserver_http_port>{{.InterserverPort}}</interserver_http_port>
  <zookeeper>
    <node><host>127.0.0.1</host><port>{{.ZooKeeperPort}}</port></node>
    <session_timeout_ms>30000</session_timeout_ms>
  </zookeeper>
  <remote_servers>
    <{{.Name}}>
{{- range .Shards}}
      <shard>
        <!-- Inserts through a Distributed table write one replica; the
             replicated table copies the block to the others. -->
        <internal_replication>true</internal_replication>
{{- range .}}
        <replica><host>127.0.0.1</host><port>{{.}}</port></replica>
{{- end}}
      </shard>
{{- end}}
    </{{.Name}}>
  </remote_servers>
  <macros>
    <shard>{{.Shard}}</shard>
    <replica>{{.Replica}}</replica>
  </macros>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
{{- end}}
  <path>{{.Dir}}/data/</path>
  <tmp_path>{{.Dir}}/tmp/</tmp_path>
  <user_files_path>{{.Dir}}/user_files/</user_files_path>
  <format_schema_path>{{.Dir}}/format_schemas/</format_schema_path>
  <!-- No query_log, query_thread_log, trace_log, metric_log, and no
       part_log unless asked for: a system log table is one more table
       inserted into and merged all the time. 18.16 creates none unless
       configured. -->
{{- if .PartLog}}
  <!-- Asked for (Options.PartLog; the launcher flag clickhouse-part-log):
       a row for every part inserted, merged or removed, from which the
       bench reports the merges of each table. -->
  <part_log>
    <database>system</database>
    <table>part_log</table>
    <flush_interval_milliseconds>7500</flush_interval_milliseconds>
  </part_log>
{{- end}}
  <!-- Marks: every table of a 180 000-page crawl has < 1 MiB of them;
       allocated on demand, so this is a bound, not a reservation. -->
  <mark_cache_size>67108864</mark_cache_size>
  <!-- Decompressed blocks, for queries with use_uncompressed_cache (set in
       the profile): the parser's content_seen lookups (SeenContent, content_seen_v2 now) cost
       8.2 ms of CPU with it and 9.4 ms without on a 1M-row table. 32 MiB
       holds the hot blocks of content_seen and url_seen of a large local
       crawl; 64 MiB was a bound never reached at these sizes. -->
  <uncompressed_cache_size>33554432</uncompressed_cache_size>
  <!-- A limit, not a reservation: five services with up to 10 connections
       each stay below it. -->
  <max_concurrent_queries>100</max_concurrent_queries>
{{- if .Legacy}}
  <merge_tree>
    <!-- 18.16 merges read every source part in blocks of 8192 rows and
         build 8192-row output blocks, whatever the row size: a documents
         row is ~12 KB, so one merge of ten 1 MiB-compressed parts held
         ~690 MiB (peak RSS 575-730 MiB in a 21 000-page crawl). Capping
         the compressed size of a merge bounds its memory (a 25 MiB merge
         of documents holds ~250 MiB): peak RSS 413-733 MiB -> 352-356 MiB
         (with the pool below). Parts of a table stop growing at ~20-30 MiB
         compressed: documents gets one part per ~3 000 pages (57 parts
         after 180 000 pages); the small tables never reach the cap. -->
    <max_bytes_to_merge_at_max_space_in_pool>33554432</max_bytes_to_merge_at_max_space_in_pool>
    <!-- ... so the part limits are raised: a part no merge may take
         stays, and documents, one partition for every crawl, keeps one
         per ~22 MiB of compressed text (161 parts after 1.1 M documents).
         At 300 and 600 a data dir of ~2 M documents had its inserts
         delayed and one of ~4 M refused ("Too many parts"), whatever the
         merges did. 1 000 and 2 000: delayed from ~7 M documents (22 GB
         compressed), refused from ~14 M. A part costs the server ~12 KB
         of memory (600 parts of a 26-column table: +7 MB RSS), 2 000
         parts 24 MB. Defaults 150 and 300 parts per partition. -->
    <parts_to_delay_insert>1000</parts_to_delay_insert>
    <parts_to_throw_insert>2000</parts_to_throw_insert>
    <!-- 18.16 lowers the largest merge while the pool is busy: with fewer
         than this many free pool entries it allows only
         1 MiB * (cap / 1 MiB) ^ (free / this). It must stay below
         background_pool_size (default 8 of 16), or big merges never run and
         parts pile up until inserts fail. With a pool of 2, 1 means a merge
         may always use the full cap. -->
    <number_of_free_entries_in_pool_to_lower_max_size_of_merge>1</number_of_free_entries_in_pool_to_lower_max_size_of_merge>
  </merge_tree>
{{- end}}
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
{{- range .Users}}
    <{{.Name}}>
      <password_sha256_hex>{{.PasswordSHA256}}</password_sha256_hex>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </{{.Name}}>
{{- end}}
  </users>
  <profiles>
    <default>
      <max_memory_usage>2000000000</max_memory_usage>
      <!-- 18.16 defaults to 1, current releases to 0: set, so that both
           behave alike. -->
      <use_uncompressed_cache>1</use_uncompressed_cache>
{{- if .Cluster}}
      <!-- A cluster's reads and inserts take the first live replica of a
           shard in remote_servers order (the local one first), so a read
           sees what was just written there; an IN or JOIN subquery over
           a Distributed table inside a query over another runs once and
           is sent to the shards (the default, deny, refuses it). -->
      <load_balancing>in_order</load_balancing>
      <distributed_product_mode>global</distributed_product_mode>
{{- end}}
{{- if .Legacy}}
      <!-- 18.16 reads the merge pool size from the default profile (16
           threads by default): 2 merges at a time on a 2-core box instead
           of up to 8 measured, which lowers peak RSS (411-445 MiB with the
           cap alone -> 352-356 MiB) and the idle server's CPU (16 threads
           polling their tasks: 230-320 -> 150-210 ms per minute). Current
           releases read it from here too, but check it against their
           mutation and OPTIMIZE pool thresholds (20, 25) and refuse to
           start: they keep their default. -->
      <background_pool_size>2</background_pool_size>
{{- end}}
    </default>
  </profiles>
  <quotas><default></default></quotas>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
</yandex>
`))

func (s *Server) writeConfig() error {
	for _, sub := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
		if err := os.MkdirAll(filepath.Join(s.dir, sub), 0o755); err != nil {
			return fmt.Errorf("create server dir: %w", err)
		}
	}
	var buf bytes.Buffer
	err := s.tmpl.Execute(&buf, configData{Dir: s.dir, TCPPort: s.tcpPort, HTTPPort: s.httpPort, Legacy: s.legacy,
		TLSPort: s.tlsPort, TLS: s.tls, Users: s.users(), Cluster: s.cluster, PartLog: s.partLog})
	if err != nil {
		return fmt.Errorf("render server config: %w", err)
	}
	if err := os.WriteFile(s.configPath(), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write server config: %w", err)
	}
	return nil
}

// users returns Options.Users sorted by name, passwords hashed.
func (s *Server) users() []user {
	out := make([]user, 0, len(s.userPasswords))
	for _, name := range slices.Sorted(maps.Keys(s.userPasswords)) {
		sum := sha256.Sum256([]byte(s.userPasswords[name]))
		out = append(out, user{Name: name, PasswordSHA256: hex.EncodeToString(sum[:])})
	}
	return out
}

// versionRE finds the version in `clickhouse-server --version` output
// ("ClickHouse server version 24.8.4.13 (official build).").
var versionRE = regexp.MustCompile(`version (\d+)\.\d+`)

// isLegacy reports whether the server binary is an 18.x release, which has
// no --version option ("Unknown option specified: version", exit 78) and
// is the only kind that prints no version.
func isLegacy(ctx context.Context, bin []string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := append(append([]string{}, bin[1:]...), "--version")
	out, _ := exec.CommandContext(ctx, bin[0], args...).CombinedOutput() // 18.x exits 78
	return legacyVersion(out)
}

// legacyVersion reports whether --version output is that of an 18.x
// server: no version, or a major version below 19.
func legacyVersion(out []byte) bool {
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return true
	}
	major, err := strconv.Atoi(string(m[1]))
	return err != nil || major < 19
}

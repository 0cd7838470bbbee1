// Package app is what the seeder does beyond its wiring. Its one-shot
// command: LoadJob reads the crawl request of --spec into the
// configuration, Seed reads, validates and publishes the seeds (and the
// crawl's specification, and the sitemaps' URLs) (seed.go). Its serve
// mode: NewServer builds the crawl-jobs API over the control topic and
// ClickHouse (serve.go). cmd/seeder parses the flags and adds the parts
// to the service's run group.
package app

// Name is the service's name: its metric prefix and its log field.
const Name = "seeder"

//go:build linux && (amd64 || arm64)

package multihost_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/envflag"
)

// flagLine is a flag in a Go program's -h output.
var flagLine = regexp.MustCompile(`(?m)^  -([a-z0-9.-]+)`)

// TestGuideFiles checks the bare-host guide's files against the binaries
// they configure: every CRAWLER_* variable of a service's file is a flag
// of that service, every one of cluster.env a flag of some service (a
// service ignores a variable it has no flag for, so a misspelt one would
// pass unnoticed), and the systemd units read the files the harness uses.
func TestGuideFiles(t *testing.T) {
	l := needLab(t)
	flags := map[string][]string{} // service -> CRAWLER_* names of its flags
	services := []string{"scheduler", "fetcher", "parser", "proxypool", "seeder"}
	for _, s := range services {
		out, err := exec.CommandContext(t.Context(), l.bins[s], "-h").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -h: %v\n%s", s, err, out)
		}
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			flags[s] = append(flags[s], envflag.EnvName(m[1]))
		}
		if len(flags[s]) == 0 {
			t.Fatalf("%s -h lists no flags:\n%s", s, out)
		}
	}
	for file, vars := range l.env {
		for k := range vars {
			if !strings.HasPrefix(k, envflag.Prefix) {
				if file != "store" {
					t.Errorf("deployments/bare/env/%s.env: %s is not a CRAWLER_* variable", file, k)
				}
				continue
			}
			readers := []string{file}
			if file == "cluster" {
				readers = services
			}
			known := false
			for _, s := range readers {
				known = known || slices.Contains(flags[s], k)
			}
			if !known {
				t.Errorf("deployments/bare/env/%s.env: %s is no flag of %v", file, k, readers)
			}
		}
	}

	unit := func(name string) string {
		b, err := os.ReadFile(filepath.Join(l.repo, "deployments", "bare", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	svc := unit("trawl@.service")
	for _, want := range []string{"EnvironmentFile=/etc/trawl/cluster.env", "EnvironmentFile=/etc/trawl/%i.env", "ExecStart=/usr/local/bin/%i"} {
		if !strings.Contains(svc, want) {
			t.Errorf("trawl@.service lacks %q", want)
		}
	}
	if i, j := strings.Index(svc, "cluster.env"), strings.Index(svc, "%i.env"); i > j {
		t.Errorf("trawl@.service reads %%i.env before cluster.env: the service's file must override the cluster's")
	}
	broker := unit("trawl-broker.service")
	for _, v := range regexp.MustCompile(`\$\{([A-Z_]+)\}`).FindAllStringSubmatch(broker, -1) {
		if _, ok := l.env["store"][v[1]]; !ok {
			t.Errorf("trawl-broker.service uses ${%s}, which store.env does not set", v[1])
		}
	}
}

package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// redirectSite is one host of TestSeedRedirectJoinsScope: fixed answers
// by path (a page's HTML, or a redirect), no robots.txt, every request
// logged.
type redirectSite struct {
	base string // http://ip:port
	ip   string

	mu       sync.Mutex
	pages    map[string]string // path -> HTML body
	moved    map[string]string // path -> Location of a 301
	requests []string          // paths requested, robots.txt left out
}

func startRedirectSite(t *testing.T, ip string) *redirectSite {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	s := &redirectSite{base: "http://" + ln.Addr().String(), ip: ip, pages: map[string]string{}, moved: map[string]string{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.requests = append(s.requests, r.URL.Path)
		body, isPage := s.pages[r.URL.Path]
		to, isMoved := s.moved[r.URL.Path]
		s.mu.Unlock()
		switch {
		case isMoved:
			http.Redirect(w, r, to, http.StatusMovedPermanently)
		case isPage:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, "<html><head><title>%s</title></head><body><p>Page %s of %s.</p>%s</body></html>", r.URL.Path, r.URL.Path, s.ip, body)
		default:
			http.NotFound(w, r)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *redirectSite) page(path, body string) { s.mu.Lock(); s.pages[path] = body; s.mu.Unlock() }
func (s *redirectSite) move(path, to string)   { s.mu.Lock(); s.moved[path] = to; s.mu.Unlock() }

func (s *redirectSite) requested() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// TestSeedRedirectJoinsScope runs whole crawls the way `make crawl` does,
// kept on the seeds' sites (the default DOMAIN mode, and --scope host),
// whose seed answers 301 to another host: that host joins the scope and
// its three pages are crawled, where before the crawl ended at the seed.
// A page's redirect to another site is still dropped (that site never
// sees a request), and so is a seed's redirect to a host the deny rules
// exclude. The launcher's summary says which site joined.
//
// The hosts are IP addresses (nothing here resolves a name to a loopback
// address), so in DOMAIN mode the site that joins is the target's host,
// as the scope keeps an IP seed's host; a registrable domain joining
// (http://golang.org/ → https://go.dev/) is tested in libs/scope and the
// scheduler's admit package.
func TestSeedRedirectJoinsScope(t *testing.T) {
	for _, tt := range []struct {
		mode   string // --scope; "" = the default (domain)
		subnet string // 127.0.3.<subnet>x: the test's own addresses
	}{
		{mode: "", subnet: "1"},
		{mode: "host", subnet: "2"},
	} {
		name := tt.mode
		if name == "" {
			name = "domain"
		}
		t.Run(name, func(t *testing.T) {
			ip := func(n int) string { return fmt.Sprintf("127.0.3.%s%d", tt.subnet, n) }
			seed, target, other, deniedSeed, denied := startRedirectSite(t, ip(1)), startRedirectSite(t, ip(2)),
				startRedirectSite(t, ip(3)), startRedirectSite(t, ip(4)), startRedirectSite(t, ip(5))
			seed.move("/", target.base+"/")
			target.page("/", `<a href="/p1">one</a> <a href="/p2">two</a> <a href="/p3">three</a> <a href="`+other.base+`/off">off</a>`)
			target.page("/p1", `<a href="/">home</a>`)
			target.page("/p2", `<a href="/p1">one</a>`)
			target.page("/p3", `<a href="/moved">moved</a>`)
			target.move("/moved", other.base+"/from-a-page") // not a seed's: dropped
			other.page("/off", "")
			other.page("/from-a-page", "")
			deniedSeed.move("/", denied.base+"/")
			denied.page("/", `<a href="/d1">d1</a>`)

			crawlID := "e2e-seed-redirect-" + name
			dir := t.TempDir()
			ch := chtest.Config(t)
			args := []string{
				"--seed", seed.base + "/", "--seed", deniedSeed.base + "/",
				"--deny-host", denied.ip,
				"--crawl-id", crawlID,
				"--allow-private", "--delay", e2eDelay.String(), "--partitions", "8",
				"--data-dir", filepath.Join(dir, "data"), "--timeout", "100s",
				"--clickhouse-addr", ch.Addr[0], "--clickhouse-database", ch.Database,
			}
			if tt.mode != "" {
				args = append(args, "--scope", tt.mode)
			}
			var cfg launcher.Config
			fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			if err := envflag.Parse(fs, args, func(string) (string, bool) { return "", false }); err != nil {
				t.Fatalf("flags: %v", err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("flags: %v", err)
			}
			cfg.Bins = serviceBins(t)
			out, err := os.Create(filepath.Join(dir, "out.txt"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
			defer cancel()
			runErr := launcher.Run(ctx, cfg, strings.NewReader(""), out)
			printed, _ := os.ReadFile(out.Name())
			if runErr != nil {
				t.Fatalf("launcher: %v\n%s\nservice logs:\n%s", runErr, printed, tails(filepath.Join(dir, "data")))
			}
			t.Logf("launcher output:\n%s", printed)

			got := target.requested()
			slices.Sort(got)
			if want := []string{"/", "/moved", "/p1", "/p2", "/p3"}; !slices.Equal(got, want) {
				t.Errorf("the seed's redirect target's host got %v, want %v (each page once)", got, want)
			}
			if got := seed.requested(); !slices.Equal(got, []string{"/"}) {
				t.Errorf("the seed's host got %v, want its seed only", got)
			}
			if got := other.requested(); len(got) > 0 {
				t.Errorf("a site no seed redirected to got %v (a page's link and a page's redirect to it)", got)
			}
			if got := denied.requested(); len(got) > 0 {
				t.Errorf("a denied host got %v though a seed redirected to it", got)
			}
			if got := deniedSeed.requested(); !slices.Equal(got, []string{"/"}) {
				t.Errorf("the second seed's host got %v, want its seed only", got)
			}
			targetHost := strings.TrimPrefix(target.base, "http://")
			wantLine := fmt.Sprintf("scope       seed %s/ redirected to %s/, %s joined the scope", seed.base, target.base, targetHost)
			if !strings.Contains(string(printed), wantLine) {
				t.Errorf("the summary lacks %q", wantLine)
			}
			if n := strings.Count(string(printed), "joined the scope"); n != 1 {
				t.Errorf("the summary names %d joined sites, want 1 (the denied host never joins)", n)
			}
		})
	}
}

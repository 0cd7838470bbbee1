package checks

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
)

// The memory a rendering fetcher needs, as a container (a cgroup) counts
// it: shared pages once, so Chromium's PSS, not its RSS summed (which
// counts a shared page in every process). The fetcher itself (its
// container's limit without rendering, base/fetcher.yaml), a Chromium that
// has loaded nothing (335 MiB PSS) and each --render-tabs tab (174 MiB PSS
// with one tab, less with more): services/fetcher/README.md, BenchmarkLoad,
// Debian's chromium 156.
const (
	fetcherMiB   = 192
	browserMiB   = 340
	renderTabMiB = 175
	defaultTabs  = 2 // --render-tabs
)

// renderMemory is the least memory for a fetcher rendering with tabs tabs.
func renderMemory(tabs int) int64 { return int64(fetcherMiB+browserMiB+tabs*renderTabMiB) << 20 }

// needChromium returns the path of Chromium, skipping the test when it is
// missing outside CI (.ci/run installs Debian's chromium; in CI a missing
// browser fails the test).
func needChromium(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium not found: .ci/run installs it")
		}
		t.Skip("chromium not found: apt-get install chromium")
	}
	return p
}

// renderModes are the values of --render (rendersniff.ParseMode).
var renderModes = []string{"never", "auto", "always"}

// renderEnv are the variables of the fetcher's rendering the deployments
// set, each the envflag name of a fetcher flag (TestFetcherRenderFlags).
var renderEnv = map[string]string{
	"CRAWLER_RENDER":      "render",
	"CRAWLER_RENDER_TABS": "render-tabs",
	"CRAWLER_CHROMIUM":    "chromium",
}

// TestFetcherRenderFlags holds the deployments' render variables against
// the fetcher binary's -h: each is a flag (by libs/envflag's rule), and
// --render-tabs's default is the tabs the memory is sized for.
func TestFetcherRenderFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fetcher")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, images["fetcher"])
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build fetcher: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("fetcher -h: %v\n%s", err, out)
	}
	help := string(out)
	for env, flag := range renderEnv {
		if fetcherEnv(flag) != env {
			t.Errorf("flag --%s is read from %s, not %s", flag, fetcherEnv(flag), env)
		}
		if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(flag) + `\b`).MatchString(help) {
			t.Errorf("%s: the fetcher has no flag --%s", env, flag)
		}
	}
	m := regexp.MustCompile(`(?m)^  -render-tabs int\n.*\(default (\d+)\)`).FindStringSubmatch(help)
	if m == nil || m[1] != strconv.Itoa(defaultTabs) {
		t.Errorf("--render-tabs default %v, the deployments are sized for %d tabs", m, defaultTabs)
	}
}

// checkComposeRender checks the compose file's fetcher: built from the
// Dockerfile's render stage, a /dev/shm of 1 GiB, memory for the fetcher
// and its tabs, a render mode from trawl.env that is a mode (never by
// default), and no --chromium other than the image's.
func checkComposeRender(p *types.Project) []string {
	var bad []string
	f, ok := p.Services["fetcher"]
	if !ok {
		return []string{"no service fetcher"}
	}
	if f.Build == nil || f.Build.Target != renderStage {
		bad = append(bad, fmt.Sprintf("fetcher: build %+v, want the Dockerfile's target %q (Chromium)", f.Build, renderStage))
	}
	if f.ShmSize < 1<<30 {
		bad = append(bad, fmt.Sprintf("fetcher: shm_size %d, want 1 GiB for Chromium", f.ShmSize))
	}
	mode := ""
	if v := f.Environment["CRAWLER_RENDER"]; v != nil {
		mode = *v
	}
	if mode != "never" {
		bad = append(bad, fmt.Sprintf("fetcher: CRAWLER_RENDER %q from trawl.env, want never by default (one of %v)", mode, renderModes))
	}
	tabs := defaultTabs
	if v := f.Environment["CRAWLER_RENDER_TABS"]; v != nil {
		n, err := strconv.Atoi(*v)
		if err != nil || n < 1 {
			bad = append(bad, fmt.Sprintf("fetcher: CRAWLER_RENDER_TABS %q", *v))
		}
		tabs = n
	}
	if need := renderMemory(tabs); int64(f.MemLimit) < need {
		bad = append(bad, fmt.Sprintf("fetcher: mem_limit %d for %d tabs, want at least %d (%d MiB + %d MiB + %d MiB a tab)", f.MemLimit, tabs, need, fetcherMiB, browserMiB, renderTabMiB))
	}
	if v := f.Environment["CRAWLER_CHROMIUM"]; v != nil && *v != "/usr/bin/chromium" {
		bad = append(bad, fmt.Sprintf("fetcher: CRAWLER_CHROMIUM %q, the render image's chromium is /usr/bin/chromium", *v))
	}
	// Only the fetcher has render flags: elsewhere the variables are
	// ignored, which is harmless, but a render image is not.
	for name, svc := range p.Services {
		if name != "fetcher" && svc.Build != nil && svc.Build.Target == renderStage {
			bad = append(bad, name+": built from the fetcher's render stage")
		}
	}
	return bad
}

// checkRender checks every workload whose container renders
// (CRAWLER_RENDER auto or always): the image with Chromium, --chromium
// absolute, /dev/shm on a memory emptyDir, /tmp and HOME writable when the
// root file system is read-only, memory for the fetcher and its tabs. A
// CRAWLER_RENDER that is no mode fails wherever it is set.
func (r *rendered) checkRender() []string {
	var bad []string
	for name, w := range r.workloads {
		for i := range w.pod.Containers {
			c := &w.pod.Containers[i]
			e := r.env(c, "CRAWLER_RENDER")
			if !e.set {
				continue
			}
			if !slices.Contains(renderModes, e.value) {
				bad = append(bad, fmt.Sprintf("%s: CRAWLER_RENDER %q is none of %v", name, e.value, renderModes))
				continue
			}
			if e.value == "never" {
				continue
			}
			if !strings.Contains(c.Image, "fetcher-render") {
				bad = append(bad, fmt.Sprintf("%s: renders with image %s, which has no Chromium (want trawl/fetcher-render: the Dockerfile's target %s)", name, c.Image, renderStage))
			}
			if ch := r.env(c, "CRAWLER_CHROMIUM").value; !path.IsAbs(ch) {
				bad = append(bad, fmt.Sprintf("%s: CRAWLER_CHROMIUM %q, want the image's binary (/usr/bin/chromium)", name, ch))
			}
			switch v := podVolume(w.pod, c, "/dev/shm"); {
			case v == nil:
				bad = append(bad, fmt.Sprintf("%s: renders without a volume at /dev/shm (a container's is 64 MiB)", name))
			case v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory:
				bad = append(bad, fmt.Sprintf("%s: /dev/shm on volume %s, want an emptyDir with medium Memory", name, v.Name))
			}
			if sc := c.SecurityContext; sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
				home := r.env(c, "HOME").value
				for _, dir := range []string{"/tmp", home} {
					if v := podVolume(w.pod, c, dir); dir == "" || v == nil || v.EmptyDir == nil {
						bad = append(bad, fmt.Sprintf("%s: %q (TMPDIR or HOME: Chromium's profile) is on no writable emptyDir of a read-only root file system", name, dir))
					}
				}
			}
			tabs := defaultTabs
			if t := r.env(c, "CRAWLER_RENDER_TABS"); t.set {
				n, err := strconv.Atoi(t.value)
				if err != nil {
					bad = append(bad, fmt.Sprintf("%s: CRAWLER_RENDER_TABS %q", name, t.value))
				}
				tabs = n
			}
			need := renderMemory(tabs)
			if lim := c.Resources.Limits.Memory(); lim.Value() < need {
				bad = append(bad, fmt.Sprintf("%s: memory limit %s for %d tabs, want at least %d MiB (%d MiB + %d MiB + %d MiB a tab)", name, lim, tabs, need>>20, fetcherMiB, browserMiB, renderTabMiB))
			}
			if req := c.Resources.Requests.Memory(); req.Value() < need {
				bad = append(bad, fmt.Sprintf("%s: memory request %s for %d tabs, want at least %d MiB", name, req, tabs, need>>20))
			}
		}
	}
	return bad
}

// podVolume is the pod volume mounted (writable) at or above dir in c, or
// nil.
func podVolume(p *corev1.PodSpec, c *corev1.Container, dir string) *corev1.Volume {
	m, _ := mountFor(c, dir)
	if m == nil || m.ReadOnly {
		return nil
	}
	for i := range p.Volumes {
		if p.Volumes[i].Name == m.Name {
			return &p.Volumes[i]
		}
	}
	return nil
}

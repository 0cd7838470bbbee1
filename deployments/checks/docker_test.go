package checks

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// images are the Dockerfiles of deployments/docker and the binary each
// builds.
var images = map[string]string{
	"fetcher":   "./services/fetcher/cmd/fetcher",
	"parser":    "./services/parser/cmd/parser",
	"proxypool": "./services/proxypool/cmd/proxypool",
	"scheduler": "./services/scheduler/cmd/scheduler",
	"seeder":    "./services/seeder/cmd/seeder",
	"trawlctl":  "./services/seeder/cmd/trawlctl",
}

var digestRef = regexp.MustCompile(`^[a-z0-9./-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$`)

// TestDockerfiles parses every Dockerfile with BuildKit's parser and
// instruction parser, checks the shape the images promise (a build stage and
// a default stage, both bases pinned by digest, a static binary, distroless
// nonroot, no HEALTHCHECK, the entrypoint is the binary built; the fetcher's
// render stage between them: checkRenderStage) and runs the go build command
// of its RUN line, output redirected into a temporary directory.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	for name, pkg := range images {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(root, "deployments", "docker", name+".Dockerfile")
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res, err := parser.Parse(f)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			for _, w := range res.Warnings {
				t.Errorf("parser warning: %s", w.Short)
			}
			stages, metaArgs, err := instructions.Parse(res.AST, nil)
			if err != nil {
				t.Fatalf("instructions: %v", err)
			}
			want := 2
			if name == "fetcher" {
				want = 3 // build, render, default
			}
			if len(metaArgs) != 0 || len(stages) != want {
				t.Fatalf("want %d stages and no global ARG, got %d stages, %d ARGs", want, len(stages), len(metaArgs))
			}
			// The default image (what docker build gives without --target)
			// is the last stage.
			build, final := stages[0], stages[len(stages)-1]
			if !strings.HasPrefix(build.BaseName, "golang:") || !digestRef.MatchString(build.BaseName) {
				t.Errorf("builder base %q: want golang pinned by digest", build.BaseName)
			}
			if !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static-debian12:nonroot@") || !digestRef.MatchString(final.BaseName) {
				t.Errorf("final base %q: want distroless static nonroot pinned by digest", final.BaseName)
			}
			var goBuild string
			for _, cmd := range build.Commands {
				run, ok := cmd.(*instructions.RunCommand)
				if !ok {
					continue
				}
				line := strings.Join(run.CmdLine, " ")
				if strings.Contains(line, "go build") {
					goBuild = line
				}
			}
			out := "/out/" + name
			if !strings.Contains(goBuild, "CGO_ENABLED=0") || !strings.Contains(goBuild, "-o "+out+" "+pkg) {
				t.Fatalf("RUN %q: want CGO_ENABLED=0 go build -o %s %s", goBuild, out, pkg)
			}
			for _, st := range stages[1:] {
				img := checkImageStage(st, build.Name, out)
				if img.user != "nonroot:nonroot" {
					t.Errorf("stage %q: USER %q, want nonroot:nonroot", st.Name, img.user)
				}
				if len(img.entry) != 1 || img.entry[0] != "/"+name {
					t.Errorf("stage %q: ENTRYPOINT %q, want [/%s]", st.Name, img.entry, name)
				}
				for _, p := range img.problems {
					t.Errorf("stage %q: %s", st.Name, p)
				}
			}
			if name == "fetcher" {
				for _, p := range checkRenderStage(stages[1]) {
					t.Error(p)
				}
			}

			// The same command, into a temporary directory, from the
			// repository root (the build context).
			dir := t.TempDir()
			cmd := exec.CommandContext(t.Context(), "sh", "-c", strings.ReplaceAll(goBuild, "/out/", dir+"/"))
			cmd.Dir = root
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", goBuild, err, b)
			}
			if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode()&0o111 == 0 {
				t.Fatalf("no executable %s built: %v", name, err)
			}
		})
	}
}

// imageStage is what a stage that makes an image sets.
type imageStage struct {
	user     string
	entry    []string
	env      map[string]string
	runs     []string
	problems []string
}

// checkImageStage reads an image stage: it copies only out from the build
// stage and has no HEALTHCHECK.
func checkImageStage(st instructions.Stage, build, out string) imageStage {
	img := imageStage{env: map[string]string{}}
	for _, cmd := range st.Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			img.user = c.User
		case *instructions.EntrypointCommand:
			img.entry = c.CmdLine
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				img.env[kv.Key] = kv.Value
			}
		case *instructions.RunCommand:
			img.runs = append(img.runs, strings.Join(c.CmdLine, " "))
		case *instructions.HealthCheckCommand:
			img.problems = append(img.problems, "HEALTHCHECK: probes use the admin server")
		case *instructions.CopyCommand:
			if c.From != build || len(c.SourcePaths) != 1 || c.SourcePaths[0] != out {
				img.problems = append(img.problems, fmt.Sprintf("COPY %v from %q: want only %s from the build stage", c.SourcePaths, c.From, out))
			}
		}
	}
	return img
}

// renderStage is the name of the fetcher's stage with Chromium, the
// --target that compose and the README build.
const renderStage = "render"

// checkRenderStage checks the fetcher's render stage: Debian bookworm-slim
// pinned by digest (the distroless base has no Chromium), Debian's chromium
// installed without recommends, run as the same uid as the default image
// (65532, created as nonroot), and --chromium's variable (its name from
// libs/envflag's rule) naming the binary the package installs.
func checkRenderStage(st instructions.Stage) []string {
	var bad []string
	if st.Name != renderStage {
		bad = append(bad, fmt.Sprintf("fetcher: the stage between build and default is %q, want %q (the --target of compose and the README)", st.Name, renderStage))
	}
	if !strings.HasPrefix(st.BaseName, "debian:bookworm-slim@") || !digestRef.MatchString(st.BaseName) {
		bad = append(bad, fmt.Sprintf("render base %q: want debian:bookworm-slim pinned by digest", st.BaseName))
	}
	img := checkImageStage(st, "build", "/out/fetcher")
	install := ""
	for _, r := range img.runs {
		if strings.Contains(r, "apt-get install") {
			install = r
		}
	}
	for _, want := range []string{"--no-install-recommends", " chromium ", "fonts-liberation", "ca-certificates", "rm -rf /var/lib/apt/lists/*", "--uid 65532", "--gid 65532"} {
		if !strings.Contains(install+" ", want) {
			bad = append(bad, fmt.Sprintf("render: RUN %q lacks %q", install, want))
		}
	}
	chromium := fetcherEnv("chromium")
	if got := img.env[chromium]; got != "/usr/bin/chromium" {
		bad = append(bad, fmt.Sprintf("render: ENV %s=%q, want /usr/bin/chromium (Debian's chromium)", chromium, got))
	}
	if got := img.env[fetcherEnv("admin-addr")]; got != ":9090" {
		bad = append(bad, fmt.Sprintf("render: ENV CRAWLER_ADMIN_ADDR=%q, want :9090", got))
	}
	return bad
}

// fetcherEnv is the environment variable of a fetcher flag, by
// libs/envflag's rule (CRAWLER_, the name upper-cased, '-' and '.' as
// '_'). This module does not import the services' modules; TestFetcherEnvNames
// holds the names used here against the fetcher's -h.
func fetcherEnv(flagName string) string {
	return "CRAWLER_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

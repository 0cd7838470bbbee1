package checks

import (
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
// instruction parser, checks the shape the images promise (two stages, both
// bases pinned by digest, a static binary, distroless nonroot, no
// HEALTHCHECK, the entrypoint is the binary built) and runs the go build
// command of its RUN line, output redirected into a temporary directory.
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
			if len(metaArgs) != 0 || len(stages) != 2 {
				t.Fatalf("want 2 stages and no global ARG, got %d stages, %d ARGs", len(stages), len(metaArgs))
			}
			build, final := stages[0], stages[1]
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
			var user string
			var entry []string
			for _, cmd := range final.Commands {
				switch c := cmd.(type) {
				case *instructions.UserCommand:
					user = c.User
				case *instructions.EntrypointCommand:
					entry = c.CmdLine
				case *instructions.HealthCheckCommand:
					t.Errorf("HEALTHCHECK: probes use the admin server")
				case *instructions.CopyCommand:
					if c.From != build.Name || len(c.SourcePaths) != 1 || c.SourcePaths[0] != out {
						t.Errorf("COPY %v from %q: want only %s from the build stage", c.SourcePaths, c.From, out)
					}
				}
			}
			if user != "nonroot:nonroot" {
				t.Errorf("USER %q, want nonroot:nonroot", user)
			}
			if len(entry) != 1 || entry[0] != "/"+name {
				t.Errorf("ENTRYPOINT %q, want [/%s]", entry, name)
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

package launcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
)

// ConsoleTokenFile is where, in the data directory, --console writes the
// token of the console (and of the crawl-jobs API) it starts.
const ConsoleTokenFile = "console-token"

// startConsole runs `seeder serve` next to the pipeline: the crawl-jobs
// API and its operator console at addr, behind a fresh random token that
// it writes to dataDir/console-token (mode 0600) and hands to the process
// through its environment, never its command line. It prints the console's
// address and the token file to out; the process stops with the pipeline.
func startConsole(ctx context.Context, p *pipeline.Pipeline, addr, dataDir string, out io.Writer) error {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	token := hex.EncodeToString(b[:])
	path := filepath.Join(dataDir, ConsoleTokenFile)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write console token: %w", err)
	}
	if _, err := p.StartServiceEnv(ctx, "seeder", "seeder-serve", []string{"serve", "--api-addr", addr, "--delay", p.FetcherDelay().String()},
		[]string{"CRAWLER_API_TOKEN=" + token}); err != nil {
		return fmt.Errorf("start seeder serve: %w", err)
	}
	fmt.Fprintf(out, "console: http://%s/ui/ (log in with the token in %s; the API at http://%s/v1/ takes it as a bearer token)\n", addr, path, addr)
	return nil
}

package telemetry

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// An address file tells a launcher where a process's admin server
// listens, so that the launcher can give it port 0 rather than pick a
// port it believes free: a port free a moment ago may be taken by
// another process (or an outgoing connection's local port) before the
// service binds it. The file holds one line, "<pid> <host:port>"; the pid
// lets a launcher that restarts a process tell the new run's address from
// a stale one.

// WriteAddrFile writes pid and addr to path, atomically (a reader sees the
// old file or the new one, never a part).
func WriteAddrFile(path string, pid int, addr net.Addr) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write admin address file: %w", err)
	}
	_, werr := fmt.Fprintf(tmp, "%d %s\n", pid, addr)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name()) // the write failed; the temp file is useless
		return fmt.Errorf("write admin address file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name()) // as above
		return fmt.Errorf("write admin address file %s: %w", path, err)
	}
	return nil
}

// ReadAddrFile reads what WriteAddrFile wrote: the pid and the address.
func ReadAddrFile(path string) (pid int, addr string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", fmt.Errorf("read admin address file: %w", err)
	}
	p, a, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if pid, err = strconv.Atoi(p); !ok || err != nil {
		return 0, "", fmt.Errorf("read admin address file %s: want \"<pid> <host:port>\", got %q", path, b)
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return 0, "", fmt.Errorf("read admin address file %s: %w", path, err)
	}
	return pid, a, nil
}

package telemetry

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddrFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.admin")
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	if err := WriteAddrFile(path, 77, addr); err != nil {
		t.Fatal(err)
	}
	if err := WriteAddrFile(path, 78, addr); err != nil { // a restart replaces it
		t.Fatal(err)
	}
	pid, got, err := ReadAddrFile(path)
	if err != nil || pid != 78 || got != "127.0.0.1:41234" {
		t.Errorf("ReadAddrFile = %d, %q, %v; want 78, 127.0.0.1:41234", pid, got, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "svc.admin.*")); len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
	for _, bad := range []string{"", "77", "x 127.0.0.1:1", "77 localhost"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadAddrFile(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadAddrFile(%q) = %v, want an error naming the file", bad, err)
		}
	}
	if _, _, err := ReadAddrFile(filepath.Join(dir, "none")); err == nil {
		t.Error("ReadAddrFile of a missing file: no error")
	}
}

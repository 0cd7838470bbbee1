package supervise

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTicks = 100

// ProcUsage reads the CPU time used so far, the page faults and the peak
// resident set size of a running process from /proc (Linux): for processes the launcher does
// not reap itself, such as the ClickHouse server, measured before they stop.
func ProcUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Usage{}, fmt.Errorf("read usage of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'; minflt and majflt are fields 10 and 12, utime and stime
	// 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("read usage of %d: malformed stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("read usage of %d: %d stat fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("read usage of %d: cpu times %q %q", pid, f[11], f[12])
	}
	minflt, err1 := strconv.ParseInt(f[7], 10, 64)
	majflt, err2 := strconv.ParseInt(f[9], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("read usage of %d: page faults %q %q", pid, f[7], f[9])
	}
	u := Usage{CPU: time.Duration(utime+stime) * time.Second / clockTicks, Faults: minflt + majflt, Starts: 1}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Usage{}, fmt.Errorf("read usage of %d: %w", pid, err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return Usage{}, fmt.Errorf("read usage of %d: VmHWM %q", pid, v)
			}
			u.MaxRSS = kb << 10
		}
	}
	return u, nil
}

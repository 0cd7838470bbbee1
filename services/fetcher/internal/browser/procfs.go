package browser

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Usage is what the processes of a browser use at one moment, read from
// /proc (Linux).
type Usage struct {
	Processes int // the browser process and its descendants
	// RSS is the sum of their VmRSS: pages they share (the binary, its
	// libraries, shared memory) count once per process, so it overstates
	// what they take together.
	RSS int64
	// PSS is the sum of their proportional set sizes (smaps_rollup): each
	// shared page divided among the processes that map it, so it is what
	// they take together.
	PSS int64
	// CPU is the user and system time of the live processes, and of the
	// descendants they have reaped (a renderer of a closed tab), since
	// they started.
	CPU time.Duration
}

// clockTick is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on
// every Linux architecture Chromium runs on.
const clockTick = 10 * time.Millisecond

// treeUsage reads the usage of the process root and its descendants.
func treeUsage(root int) (Usage, error) {
	pids, err := descendants(root)
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	for _, pid := range pids {
		st, err := readStat(pid)
		if err != nil {
			continue // exited since it was listed
		}
		rss, pss := readMemory(pid)
		u.Processes++
		u.RSS += rss
		u.PSS += pss
		u.CPU += time.Duration(st.utime+st.stime+st.cutime+st.cstime) * clockTick
	}
	if u.Processes == 0 {
		return u, fmt.Errorf("read usage of process %d: gone", root)
	}
	return u, nil
}

// descendants lists root and every process below it, from the parent
// links in /proc/<pid>/stat.
func descendants(root int) ([]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	children := map[int][]int{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		children[st.ppid] = append(children[st.ppid], pid)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// stat is what treeUsage needs of /proc/<pid>/stat.
type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// readStat reads /proc/<pid>/stat. The command name, field 2, is in
// parentheses and may hold spaces and parentheses: the fields after it
// are counted from its last ')'.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("read /proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 15 {
		return stat{}, fmt.Errorf("read /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	n := func(field int) int64 {
		v, _ := strconv.ParseInt(f[field-3], 10, 64)
		return v
	}
	return stat{ppid: int(n(4)), utime: n(14), stime: n(15), cutime: n(16), cstime: n(17)}, nil
}

// readMemory returns the Rss and Pss of a process in bytes, from
// /proc/<pid>/smaps_rollup, or zeros when it cannot be read.
func readMemory(pid int) (rss, pss int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(b)) {
		var dst *int64
		switch {
		case strings.HasPrefix(line, "Rss:"):
			dst = &rss
		case strings.HasPrefix(line, "Pss:"):
			dst = &pss
		default:
			continue
		}
		if fs := strings.Fields(line); len(fs) >= 2 {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			*dst = kb << 10
		}
	}
	return rss, pss
}

package checks

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// checkWARC checks that no two pods share a WARC directory: a workload
// whose container sets CRAWLER_WARC_DIR (the fetcher's --warc-dir) must be
// a StatefulSet with the directory on a volume of its own
// volumeClaimTemplates (one claim per pod), writable, and on no volume of
// the pod template (which every replica would share).
func (r *rendered) checkWARC() []string {
	var bad []string
	for name, w := range r.workloads {
		for i := range w.pod.Containers {
			c := &w.pod.Containers[i]
			e := r.env(c, "CRAWLER_WARC_DIR")
			if e.value == "" {
				continue
			}
			dir := e.value
			if w.kind != "StatefulSet" {
				bad = append(bad, fmt.Sprintf("%s %s: CRAWLER_WARC_DIR %s in every replica of a %s, want a StatefulSet with a volumeClaimTemplate there", w.kind, name, dir, w.kind))
				continue
			}
			if !filepath.IsAbs(dir) {
				bad = append(bad, fmt.Sprintf("%s: CRAWLER_WARC_DIR %q is not absolute", name, dir))
				continue
			}
			m, _ := mountFor(c, dir)
			if m == nil {
				bad = append(bad, fmt.Sprintf("%s: CRAWLER_WARC_DIR %s is on no volume (the container's root file system is read-only and not kept)", name, dir))
				continue
			}
			claim := slices.IndexFunc(w.claims, func(pvc corev1.PersistentVolumeClaim) bool { return pvc.Name == m.Name })
			shared := slices.ContainsFunc(w.pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
			switch {
			case claim < 0 || shared:
				bad = append(bad, fmt.Sprintf("%s: CRAWLER_WARC_DIR %s is on volume %s, want one of its volumeClaimTemplates (%s) and no pod volume of that name", name, dir, m.Name, claimNames(w.claims)))
			case m.ReadOnly:
				bad = append(bad, fmt.Sprintf("%s: the WARC volume %s is mounted read-only", name, m.Name))
			}
		}
	}
	return bad
}

func claimNames(cs []corev1.PersistentVolumeClaim) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

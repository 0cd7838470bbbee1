package telemetry

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or returns the identical
// collector another component of the process registered already (two
// writers, two fetch clients sharing their metrics). A nil reg leaves c
// unexported. A conflicting registration (the same name, another shape)
// is a programming error; the unregistered c is returned so that its
// owner still works.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

package doctext

import "errors"

// Kinds of error, for document_meta.parse_error.
const (
	// KindEncrypted: the document needs a password (or its encryption is
	// not supported).
	KindEncrypted = "encrypted"
	// KindTruncated: the document ends before its end (a PDF without its
	// trailer, a zip without its central directory).
	KindTruncated = "truncated"
	// KindMalformed: the document is not what its type says, or its
	// structure is broken.
	KindMalformed = "malformed"
	// KindTooLarge: reading the document would take more memory or
	// decompressed bytes than the limits allow (a bomb).
	KindTooLarge = "too_large"
	// KindTimeout: Limits.MaxTime (or the caller's context) ran out.
	KindTimeout = "timeout"
	// KindUnsupported: no reader for this type.
	KindUnsupported = "unsupported"
	// KindPanic: a reader panicked; the panic was recovered.
	KindPanic = "panic"
)

// Error is an error that stopped the reading of a document.
type Error struct {
	Kind string // one of the Kind* constants
	Err  error
}

func (e *Error) Error() string { return e.Kind + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrorKind returns the kind of err: one of the Kind* constants, "" for
// nil, and KindMalformed for an error that carries no kind.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindMalformed
}

func errorf(kind string, err error) error { return &Error{Kind: kind, Err: err} }

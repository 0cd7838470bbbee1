// Package crawlmsg is the versioned wire format shared by every service: the
// protobuf messages in crawlv1 plus the schema names carried beside them.
//
// It depends only on protobuf so that any service (or a producer written in
// another language) can speak the format without a broker client.
package crawlmsg

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// SchemaHeader is the Kafka record header that names the message type of the
// record's value, e.g. "crawler.v1.FetchRequest".
const SchemaHeader = "schema"

// ErrSchemaMismatch reports a record whose schema header names a different
// message type than the one the consumer expected.
var ErrSchemaMismatch = errors.New("schema mismatch")

// SchemaOf returns the fully qualified protobuf name of m, which is the value
// of the schema header for records carrying m.
func SchemaOf(m proto.Message) string {
	return string(m.ProtoReflect().Descriptor().FullName())
}

// Marshal encodes m and returns its bytes and schema name.
func Marshal(m proto.Message) (value []byte, schema string, err error) {
	value, err = proto.Marshal(m)
	if err != nil {
		return nil, "", fmt.Errorf("marshal %s: %w", SchemaOf(m), err)
	}
	return value, SchemaOf(m), nil
}

// Unmarshal decodes value into m after checking that schema names m's type.
// An empty schema is accepted (records written by tools that set no headers).
func Unmarshal(value []byte, schema string, m proto.Message) error {
	if want := SchemaOf(m); schema != "" && schema != want {
		return fmt.Errorf("decode %s: got %q: %w", want, schema, ErrSchemaMismatch)
	}
	if err := proto.Unmarshal(value, m); err != nil {
		return fmt.Errorf("decode %s: %w", SchemaOf(m), err)
	}
	return nil
}

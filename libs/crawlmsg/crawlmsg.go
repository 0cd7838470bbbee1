// Package crawlmsg is the versioned wire format shared by every service: the
// protobuf messages in crawlv1 plus the schema names carried beside them.
//
// It depends only on protobuf so that any service (or a producer written in
// another language) can speak the format without a broker client.
package crawlmsg

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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

// MarshalAppend is Marshal appending the encoding of m to b, which it
// grows only when m does not fit (a caller that sizes b with proto.Size
// gets m's encoding in b's array).
func MarshalAppend(b []byte, m proto.Message) (value []byte, schema string, err error) {
	value, err = proto.MarshalOptions{}.MarshalAppend(b, m)
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

// UnmarshalAliasing is Unmarshal, except that the bytes field of m
// numbered field is not copied out of value but refers into it: a page's
// body (most of its record) is decoded without a second copy of itself.
// m then holds value: the caller must not change value's bytes while m is
// in use. Other fields decode as Unmarshal decodes them.
func UnmarshalAliasing(value []byte, schema string, m proto.Message, field protowire.Number) error {
	want := SchemaOf(m)
	if schema != "" && schema != want {
		return fmt.Errorf("decode %s: got %q: %w", want, schema, ErrSchemaMismatch)
	}
	fd := m.ProtoReflect().Descriptor().Fields().ByNumber(field)
	if fd == nil || fd.Kind() != protoreflect.BytesKind || fd.Cardinality() == protoreflect.Repeated {
		return fmt.Errorf("decode %s: field %d is not a singular bytes field", want, field)
	}
	// The record without the aliased field (usually small: the page's
	// metadata), decoded as usual; the field's last occurrence wins, as
	// in a decoder that copies it.
	rest := make([]byte, 0, 512)
	var alias []byte
	found := false
	for b := value; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("decode %s: %w", want, protowire.ParseError(n))
		}
		v := protowire.ConsumeFieldValue(num, typ, b[n:])
		if v < 0 {
			return fmt.Errorf("decode %s: %w", want, protowire.ParseError(v))
		}
		if num == field && typ == protowire.BytesType {
			alias, _ = protowire.ConsumeBytes(b[n:])
			found = true
		} else {
			rest = append(rest, b[:n+v]...)
		}
		b = b[n+v:]
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return fmt.Errorf("decode %s: %w", want, err)
	}
	if found {
		m.ProtoReflect().Set(fd, protoreflect.ValueOfBytes(alias))
	}
	return nil
}

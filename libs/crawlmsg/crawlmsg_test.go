package crawlmsg_test

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

var at = timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))

// messages has one fully populated value of every wire message, with the
// schema name its records carry.
var messages = []struct {
	schema string
	msg    proto.Message
	empty  func() proto.Message
}{
	{
		"crawler.v1.DiscoveredURL",
		&crawlv1.DiscoveredURL{
			CrawlId: "c1", Url: "http://example.com/a", Depth: 3, ParentUrl: "http://example.com/",
			DiscoveredAt: at, Source: crawlv1.Source_SOURCE_LINK, AnchorText: "Ä link", Rel: "nofollow",
		},
		func() proto.Message { return &crawlv1.DiscoveredURL{} },
	},
	{
		"crawler.v1.FetchRequest",
		&crawlv1.FetchRequest{
			CrawlId: "c1", Url: "http://example.com/a", UrlFp: 0xfedcba9876543210, Depth: 2,
			ParentUrl: "http://example.com/", DiscoveredAt: at, ScheduledAt: at, Attempt: 1,
			NotBefore: at, Etag: `"abc"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT", AnchorText: "a",
		},
		func() proto.Message { return &crawlv1.FetchRequest{} },
	},
	{
		"crawler.v1.FetchedPage",
		&crawlv1.FetchedPage{
			CrawlId: "c1", Url: "http://example.com/a", UrlFp: 1, Depth: 2, ParentUrl: "p", FetchedAt: at,
			StatusCode: 200, ErrorKind: "", ErrorMessage: "", ContentType: "text/html", Charset: "gbk",
			Headers:         map[string]string{"etag": `"x"`, "content-length": "5"},
			FetchDurationUs: 1234, TtfbUs: 56, Body: []byte("<p>\x00\xff</p>"), Truncated: true, BodyBytes: 11,
			RedirectLocation: "http://example.com/b", AnchorText: "t", Partition: 7,
		},
		func() proto.Message { return &crawlv1.FetchedPage{} },
	},
	{
		"crawler.v1.Proxy",
		&crawlv1.Proxy{Id: "p1", Url: "http://u:p@127.0.0.2:3128", CheckedAt: at, LatencyUs: 99, Score: 0.75},
		func() proto.Message { return &crawlv1.Proxy{} },
	},
	{
		"crawler.v1.ProxyFeedback",
		&crawlv1.ProxyFeedback{ProxyId: "p1", Host: "example.com", Outcome: "timeout", LatencyUs: 5, At: at},
		func() proto.Message { return &crawlv1.ProxyFeedback{} },
	},
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range messages {
		t.Run(tt.schema, func(t *testing.T) {
			value, schema, err := crawlmsg.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if schema != tt.schema || crawlmsg.SchemaOf(tt.msg) != tt.schema {
				t.Fatalf("schema = %q, SchemaOf = %q, want %q", schema, crawlmsg.SchemaOf(tt.msg), tt.schema)
			}
			got := tt.empty()
			if err := crawlmsg.Unmarshal(value, schema, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !proto.Equal(got, tt.msg) {
				t.Fatalf("round trip = %v, want %v", got, tt.msg)
			}
			// Records from tools that set no schema header are accepted.
			got = tt.empty()
			if err := crawlmsg.Unmarshal(value, "", got); err != nil || !proto.Equal(got, tt.msg) {
				t.Fatalf("Unmarshal without schema = %v, %v", got, err)
			}
		})
	}
}

func TestSchemaMismatch(t *testing.T) {
	value, schema, err := crawlmsg.Marshal(messages[0].msg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range messages[1:] {
		t.Run(tt.schema, func(t *testing.T) {
			err := crawlmsg.Unmarshal(value, schema, tt.empty())
			if !errors.Is(err, crawlmsg.ErrSchemaMismatch) {
				t.Fatalf("Unmarshal %s as %s: error = %v, want ErrSchemaMismatch", schema, tt.schema, err)
			}
		})
	}
	if err := crawlmsg.Unmarshal(value, "crawler.v2.DiscoveredURL", &crawlv1.DiscoveredURL{}); !errors.Is(err, crawlmsg.ErrSchemaMismatch) {
		t.Fatalf("future major version: error = %v, want ErrSchemaMismatch", err)
	}
}

func TestGarbage(t *testing.T) {
	tests := []struct {
		name  string
		value []byte
	}{
		{"truncated varint", []byte{0x08}},
		{"bad wire type", []byte{0x0f}},
		{"length past end", []byte{0x12, 0x7f, 'a'}},
		{"invalid utf-8 in string", []byte{0x12, 0x02, 0xff, 0xfe}},
		{"field number zero", []byte{0x00, 0x01}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := crawlmsg.Unmarshal(tt.value, "crawler.v1.FetchedPage", &crawlv1.FetchedPage{})
			if err == nil {
				t.Fatalf("Unmarshal(%x) succeeded", tt.value)
			}
			if errors.Is(err, crawlmsg.ErrSchemaMismatch) {
				t.Fatalf("Unmarshal(%x) = %v: garbage is not a schema mismatch", tt.value, err)
			}
		})
	}
}

// FuzzUnmarshalFetchedPage: Unmarshal never panics on any bytes and schema,
// rejects every schema other than "" and the FetchedPage name with
// ErrSchemaMismatch, and a value it accepts re-encodes to a message that
// decodes to an equal message.
func FuzzUnmarshalFetchedPage(f *testing.F) {
	for _, m := range messages {
		v, s, err := crawlmsg.Marshal(m.msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v, s)
	}
	f.Add([]byte{}, "")
	f.Add([]byte{0x12, 0x7f, 'a'}, "crawler.v1.FetchedPage")
	f.Fuzz(func(t *testing.T, value []byte, schema string) {
		var page crawlv1.FetchedPage
		err := crawlmsg.Unmarshal(value, schema, &page)
		want := crawlmsg.SchemaOf(&page)
		if schema != "" && schema != want {
			if !errors.Is(err, crawlmsg.ErrSchemaMismatch) {
				t.Fatalf("schema %q: error = %v, want ErrSchemaMismatch", schema, err)
			}
			return
		}
		if err != nil {
			return
		}
		again, _, err := crawlmsg.Marshal(&page)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		var page2 crawlv1.FetchedPage
		if err := crawlmsg.Unmarshal(again, want, &page2); err != nil || !proto.Equal(&page, &page2) {
			t.Fatalf("re-decode = %v, %v", &page2, err)
		}
	})
}

// pageBody is the field number of FetchedPage.body.
var pageBody = (&crawlv1.FetchedPage{}).ProtoReflect().Descriptor().Fields().ByName("body").Number()

// TestUnmarshalAliasing: the aliasing decoder gets what Unmarshal gets,
// for the full page, a page without a body, an empty page and a record
// with the body twice (the last wins); its body refers into the record.
func TestUnmarshalAliasing(t *testing.T) {
	full := messages[2].msg.(*crawlv1.FetchedPage)
	noBody := proto.Clone(full).(*crawlv1.FetchedPage)
	noBody.Body = nil
	value, _, err := crawlmsg.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	twice := append(append([]byte(nil), value...), protowireBytes(int(pageBody), "second body")...)
	for name, rec := range map[string][]byte{"full": value, "no body": mustMarshal(t, noBody), "empty": nil, "body twice": twice} {
		t.Run(name, func(t *testing.T) {
			want := &crawlv1.FetchedPage{}
			if err := crawlmsg.Unmarshal(rec, "crawler.v1.FetchedPage", want); err != nil {
				t.Fatal(err)
			}
			got := &crawlv1.FetchedPage{}
			if err := crawlmsg.UnmarshalAliasing(rec, "crawler.v1.FetchedPage", got, pageBody); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("aliasing decode = %v, want %v", got, want)
			}
			if b := got.GetBody(); len(b) > 0 && !aliases(b, rec) {
				t.Fatal("body was copied, not left in the record")
			}
		})
	}
}

func TestUnmarshalAliasingErrors(t *testing.T) {
	value := mustMarshal(t, messages[2].msg)
	if err := crawlmsg.UnmarshalAliasing(value, "crawler.v1.Proxy", &crawlv1.FetchedPage{}, pageBody); !errors.Is(err, crawlmsg.ErrSchemaMismatch) {
		t.Errorf("wrong schema: %v, want ErrSchemaMismatch", err)
	}
	url := (&crawlv1.FetchedPage{}).ProtoReflect().Descriptor().Fields().ByName("url").Number()
	if err := crawlmsg.UnmarshalAliasing(value, "", &crawlv1.FetchedPage{}, url); err == nil {
		t.Error("aliasing a string field: no error")
	}
	for _, garbage := range [][]byte{{0x08}, {0x0f}, {0x12, 0x7f, 'a'}, {0x00, 0x01}, value[:len(value)-1]} {
		if err := crawlmsg.UnmarshalAliasing(garbage, "", &crawlv1.FetchedPage{}, pageBody); err == nil {
			t.Errorf("UnmarshalAliasing(%x) succeeded", garbage)
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, _, err := crawlmsg.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// protowireBytes encodes one bytes field.
func protowireBytes(num int, v string) []byte {
	b := protowire.AppendTag(nil, protowire.Number(num), protowire.BytesType)
	return protowire.AppendString(b, v)
}

// aliases reports whether b lies inside rec's memory.
func aliases(b, rec []byte) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(rec)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p < start+uintptr(len(rec))
}

// TestMarshalAppend: the encoding lands after b's bytes, in b's array when
// it has room, and decodes to m.
func TestMarshalAppend(t *testing.T) {
	page := messages[2].msg.(*crawlv1.FetchedPage)
	b := make([]byte, 2, 2+proto.Size(page))
	b[0], b[1] = 'h', 'i'
	value, schema, err := crawlmsg.MarshalAppend(b, page)
	if err != nil || schema != "crawler.v1.FetchedPage" {
		t.Fatalf("MarshalAppend: %q, %v", schema, err)
	}
	if string(value[:2]) != "hi" || unsafe.SliceData(value) != unsafe.SliceData(b) {
		t.Fatalf("encoding not appended in b's array")
	}
	got := &crawlv1.FetchedPage{}
	if err := crawlmsg.Unmarshal(value[2:], schema, got); err != nil || !proto.Equal(got, page) {
		t.Fatalf("round trip = %v, %v; want %v", got, err, page)
	}
}

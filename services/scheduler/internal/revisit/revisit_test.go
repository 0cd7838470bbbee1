package revisit

import (
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestFromSpec(t *testing.T) {
	tests := []struct {
		name   string
		in     *crawlv1.Revisit
		want   Policy
		wantOK bool
	}{
		{name: "disabled", in: &crawlv1.Revisit{MinInterval: durationpb.New(time.Second)}},
		{name: "nil", in: nil},
		{name: "defaults", in: &crawlv1.Revisit{Enabled: true}, want: Policy{Min: DefaultMinInterval, Max: DefaultMaxInterval, Initial: DefaultMinInterval}, wantOK: true},
		{name: "set", in: &crawlv1.Revisit{Enabled: true, MinInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(8 * time.Second), InitialInterval: durationpb.New(2 * time.Second)},
			want: Policy{Min: time.Second, Max: 8 * time.Second, Initial: 2 * time.Second}, wantOK: true},
		{name: "sub-second min raised", in: &crawlv1.Revisit{Enabled: true, MinInterval: durationpb.New(time.Millisecond), MaxInterval: durationpb.New(4 * time.Second)},
			want: Policy{Min: time.Second, Max: 4 * time.Second, Initial: time.Second}, wantOK: true},
		{name: "max below min", in: &crawlv1.Revisit{Enabled: true, MinInterval: durationpb.New(10 * time.Second), MaxInterval: durationpb.New(time.Second), InitialInterval: durationpb.New(time.Hour)},
			want: Policy{Min: 10 * time.Second, Max: 10 * time.Second, Initial: 10 * time.Second}, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FromSpec(tt.in)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("FromSpec = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestObserveSequence follows one URL through visits: the interval starts
// at Initial, doubles while unchanged (body equal or 304) up to Max, halves
// on a change down to Min; validators are kept across a 304 without them.
func TestObserveSequence(t *testing.T) {
	p := Policy{Min: time.Second, Max: 8 * time.Second, Initial: 2 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	page := func(status uint32, body string, unchanged bool, etag string) *crawlv1.FetchedPage {
		h := map[string]string{}
		if etag != "" {
			h["etag"] = etag
			h["last-modified"] = "Thu, 01 Jan 2026 00:00:00 GMT"
		}
		return &crawlv1.FetchedPage{CrawlId: "c", Url: "http://a.example/", UrlFp: 7, Depth: 2, StatusCode: status,
			Body: []byte(body), Unchanged: unchanged, Headers: h}
	}
	steps := []struct {
		name         string
		page         *crawlv1.FetchedPage
		wantInterval uint32
		wantChanged  uint8
		wantNotMod   uint8
		wantETag     string
		wantChanges  uint32
	}{
		{name: "first visit", page: page(200, "v1", false, `"a"`), wantInterval: 2, wantETag: `"a"`},
		{name: "same body", page: page(200, "v1", false, `"a"`), wantInterval: 4, wantETag: `"a"`},
		{name: "304 keeps validators", page: page(304, "", true, ""), wantInterval: 8, wantNotMod: 1, wantETag: `"a"`},
		{name: "capped at max", page: page(304, "", true, ""), wantInterval: 8, wantNotMod: 1, wantETag: `"a"`},
		{name: "changed halves", page: page(200, "v2", false, `"b"`), wantInterval: 4, wantChanged: 1, wantETag: `"b"`, wantChanges: 1},
		{name: "changed again", page: page(200, "v3", false, ""), wantInterval: 2, wantChanged: 1, wantETag: "", wantChanges: 2},
		{name: "floored at min", page: page(200, "v4", false, ""), wantInterval: 1, wantChanged: 1, wantChanges: 3},
		{name: "floored stays", page: page(200, "v5", false, ""), wantInterval: 1, wantChanged: 1, wantChanges: 4},
	}
	var prev *rows.RevisitRow
	now := t0
	for i, st := range steps {
		now = now.Add(10 * time.Second)
		st.page.FetchedAt = timestamppb.New(now)
		next, ch := Observe(p, prev, st.page, 3, "a.example", now)
		if next.IntervalS != st.wantInterval || ch.IntervalS != st.wantInterval {
			t.Errorf("%s: interval %d (history %d), want %d", st.name, next.IntervalS, ch.IntervalS, st.wantInterval)
		}
		if !next.NextVisit.Equal(now.Add(time.Duration(st.wantInterval) * time.Second)) {
			t.Errorf("%s: next visit %v, want fetched_at + %ds", st.name, next.NextVisit, st.wantInterval)
		}
		if ch.Changed != st.wantChanged || ch.NotModified != st.wantNotMod {
			t.Errorf("%s: changed %d not modified %d, want %d %d", st.name, ch.Changed, ch.NotModified, st.wantChanged, st.wantNotMod)
		}
		if next.ETag != st.wantETag {
			t.Errorf("%s: etag %q, want %q", st.name, next.ETag, st.wantETag)
		}
		if next.Visits != uint32(i+1) || ch.Visit != uint32(i+1) || next.Changes != st.wantChanges {
			t.Errorf("%s: visits %d changes %d, want %d %d", st.name, next.Visits, next.Changes, i+1, st.wantChanges)
		}
		if next.Partition != 3 || next.Host != "a.example" || next.URLFP != 7 || next.Depth != 2 || next.CrawlID != "c" {
			t.Errorf("%s: identity not carried: %+v", st.name, next)
		}
		prev = &next
	}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		name string
		page *crawlv1.FetchedPage
		want bool
	}{
		{name: "200", page: &crawlv1.FetchedPage{StatusCode: 200}, want: true},
		{name: "304", page: &crawlv1.FetchedPage{StatusCode: 304, Unchanged: true}, want: true},
		{name: "404", page: &crawlv1.FetchedPage{StatusCode: 404}},
		{name: "redirect", page: &crawlv1.FetchedPage{StatusCode: 301}},
		{name: "timeout", page: &crawlv1.FetchedPage{ErrorKind: "timeout"}},
		{name: "will retry", page: &crawlv1.FetchedPage{StatusCode: 200, WillRetry: true}},
		{name: "200 cut off", page: &crawlv1.FetchedPage{StatusCode: 200, ErrorKind: "body_too_large"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Counts(tt.page); got != tt.want {
				t.Errorf("Counts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFolded(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 500e6, time.UTC)
	page := &crawlv1.FetchedPage{FetchedAt: timestamppb.New(at)}
	state := func(last time.Time) *rows.RevisitRow { return &rows.RevisitRow{LastVisit: last} }
	for _, tt := range []struct {
		name string
		prev *rows.RevisitRow
		want bool
	}{
		{"no state", nil, false},
		{"state from before last_visit existed", state(time.Unix(0, 0)), false},
		{"zero time", state(time.Time{}), false},
		{"the same fetch (stored in whole seconds)", state(at.Truncate(time.Second)), true},
		{"a later fetch folded", state(at.Add(time.Minute)), true},
		{"an earlier fetch folded", state(at.Add(-time.Second)), false},
	} {
		if got := Folded(tt.prev, page, at); got != tt.want {
			t.Errorf("%s: Folded = %v, want %v", tt.name, got, tt.want)
		}
	}
}

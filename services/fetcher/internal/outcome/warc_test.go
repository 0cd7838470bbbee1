package outcome

import (
	"testing"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// TestFetchLogRowWarc: the WARC location a page carries reaches the row
// built from it, so a row rebuilt from a read-back page after a crash
// points at the archived record like the row written with the page.
func TestFetchLogRowWarc(t *testing.T) {
	page := &crawlv1.FetchedPage{CrawlId: "c1", Url: "http://a.example/p", StatusCode: 200,
		WarcFile: "trawl-20261125100000-00001-f1.warc.gz", WarcOffset: 123456}
	row := FetchLogRow(page, "a.example", "f-1")
	if row.WarcFile != page.GetWarcFile() || row.WarcOffset != 123456 {
		t.Fatalf("row warc location %q@%d, want the page's", row.WarcFile, row.WarcOffset)
	}
	if row := FetchLogRow(&crawlv1.FetchedPage{Url: "http://a.example/q"}, "a.example", "f-1"); row.WarcFile != "" || row.WarcOffset != 0 {
		t.Fatalf("unarchived page: row warc location %q@%d", row.WarcFile, row.WarcOffset)
	}
}

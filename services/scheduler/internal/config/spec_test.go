package config

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/priority"
)

func TestSpecPriority(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	specs := crawlcontrol.NewSpecs()
	rulesOf := SpecPriority(specs, zap.New(core))
	if r := rulesOf("c1"); r != nil {
		t.Fatalf("no specification: rules %v, want nil (the default signals)", r)
	}
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c1", Revision: 1, Priority: &crawlv1.Priority{Rules: []*crawlv1.PriorityRule{
		{Pattern: `(`, Delta: 5},
		{Pattern: `/product/`, Delta: 50},
	}}})
	in := priority.Input{URL: "http://a.example/product/1", Host: "a.example"}
	for range 3 {
		if p, why := rulesOf("c1").Of(in); p != 50 || why != priority.Rule {
			t.Fatalf("priority %d (%v), want 50 by the valid rule", p, why)
		}
	}
	if n := logs.Len(); n != 1 {
		t.Errorf("%d warnings for one revision with an invalid rule, want 1", n)
	}
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c1", Revision: 2, Priority: &crawlv1.Priority{BreadthFirst: true}})
	if !rulesOf("c1").BreadthFirst() {
		t.Error("revision 2 is breadth-first, rules are not")
	}
}

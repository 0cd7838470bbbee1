package chstore_test

import (
	"os"
	"testing"

	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

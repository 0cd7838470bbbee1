package chstore_test

import (
	"os"
	"testing"

	"github.com/trawl-crawler/trawl/libs/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

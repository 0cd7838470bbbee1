package chstore

import (
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
)

// The row types, table descriptions and schema constants live in
// libs/chstore/rows, which does not import the ClickHouse driver, so that
// packages that only build rows do not link it. They are re-exported here
// for the adapters that insert and query them.
type (
	FetchLogRow      = rows.FetchLogRow
	SeenRow          = rows.SeenRow
	DocumentRow      = rows.DocumentRow
	RobotsRow        = rows.RobotsRow
	AttemptKey       = rows.AttemptKey
	DocumentMetaRow  = rows.DocumentMetaRow
	ContentSeenRow   = rows.ContentSeenRow
	LinksDroppedRow  = rows.LinksDroppedRow
	FrontierRow      = rows.FrontierRow
	URLEventRow      = rows.URLEventRow
	RevisitRow       = rows.RevisitRow
	ChangeRow        = rows.ChangeRow
	LinkRow          = rows.LinkRow
	SimhashBandRow   = rows.SimhashBandRow
	NearDuplicateRow = rows.NearDuplicateRow
)

// Table describes how rows of type T are inserted (rows.Table).
type Table[T any] = rows.Table[T]

// The crawler's tables (rows).
var (
	FetchLog       = rows.FetchLog
	URLSeen        = rows.URLSeen
	Documents      = rows.Documents
	RobotsTxt      = rows.RobotsTxt
	DocumentMeta   = rows.DocumentMeta
	ContentSeen    = rows.ContentSeen
	LinksDropped   = rows.LinksDropped
	Frontier       = rows.Frontier
	URLEvents      = rows.URLEvents
	Revisits       = rows.Revisits
	ChangeHistory  = rows.ChangeHistory
	Links          = rows.Links
	SimhashBands   = rows.SimhashBands
	NearDuplicates = rows.NearDuplicates
)

// Frontier states (frontier_v2.state; rows).
const (
	FrontierPending   = rows.FrontierPending
	FrontierReleased  = rows.FrontierReleased
	FrontierCancelled = rows.FrontierCancelled
)

// Millis returns the millisecond part of t (rows.Millis).
func Millis(t time.Time) uint16 { return rows.Millis(t) }

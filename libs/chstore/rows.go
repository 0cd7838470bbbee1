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
	// FetchLogRow is rows.FetchLogRow.
	FetchLogRow = rows.FetchLogRow
	// SeenRow is rows.SeenRow.
	SeenRow = rows.SeenRow
	// DocumentRow is rows.DocumentRow.
	DocumentRow = rows.DocumentRow
	// RobotsRow is rows.RobotsRow.
	RobotsRow = rows.RobotsRow
	// AttemptKey is rows.AttemptKey.
	AttemptKey = rows.AttemptKey
	// DocumentMetaRow is rows.DocumentMetaRow.
	DocumentMetaRow = rows.DocumentMetaRow
	// ContentSeenRow is rows.ContentSeenRow.
	ContentSeenRow = rows.ContentSeenRow
	// LinksDroppedRow is rows.LinksDroppedRow.
	LinksDroppedRow = rows.LinksDroppedRow
	// FrontierRow is rows.FrontierRow.
	FrontierRow = rows.FrontierRow
	// URLEventRow is rows.URLEventRow.
	URLEventRow = rows.URLEventRow
	// RevisitRow is rows.RevisitRow.
	RevisitRow = rows.RevisitRow
	// ChangeRow is rows.ChangeRow.
	ChangeRow = rows.ChangeRow
	// LinkRow is rows.LinkRow.
	LinkRow = rows.LinkRow
	// SimhashBandRow is rows.SimhashBandRow.
	SimhashBandRow = rows.SimhashBandRow
	// NearDuplicateRow is rows.NearDuplicateRow.
	NearDuplicateRow = rows.NearDuplicateRow
	// CarriedRow is rows.CarriedRow.
	CarriedRow = rows.CarriedRow
	// WarcFileRow is rows.WarcFileRow.
	WarcFileRow = rows.WarcFileRow
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
	// DocumentsCarried is rows.DocumentsCarried.
	DocumentsCarried = rows.DocumentsCarried
	WarcFiles        = rows.WarcFiles
)

// Frontier states (frontier_v2.state; rows).
const (
	FrontierPending   = rows.FrontierPending
	FrontierReleased  = rows.FrontierReleased
	FrontierCancelled = rows.FrontierCancelled
)

// Millis returns the millisecond part of t (rows.Millis).
func Millis(t time.Time) uint16 { return rows.Millis(t) }

package chstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/backoff"
)

// One service migrates at a time. ClickHouse 18.16 checks an ALTER TABLE
// against the table's columns before it locks the table, so two services
// adding the same column at the same moment (every service migrates when
// it starts) can read the columns while the other ALTER rewrites them:
// the second ALTER then fails with a nonsense error ("Different
// expressions with the same alias priority_tmp", std::bad_alloc) or the
// server dies of a segmentation fault (TestMigrateManyAtOnce reproduced
// both). The idempotent statements cover a migration applied twice, one
// after the other; this lock keeps them one after the other.
//
// The lock is a table: CREATE TABLE (without IF NOT EXISTS) succeeds for
// one caller and answers "already exists" to every other, on 18.16 and
// current releases alike. Its holder inserts a heartbeat row every
// migrationLockBeat and drops the table when it is done. A holder that
// died (killed mid-migration, its server connection lost) leaves the
// table behind: once neither a heartbeat nor the table itself is younger
// than migrationLockStale, a waiter breaks it and tries again. Server
// time on both sides, so the services' clocks do not matter.
//
// Breaking is a RENAME, not a DROP: waiters that saw the same stale lock
// rename it to the same name, taken from what they saw (its holder and
// its last sign of life), so one succeeds and the others find that name
// taken, even when the winner has created the next lock meanwhile. A
// DROP could not tell that lock from the stale one: the second waiter
// dropped the winner's live lock, and both migrated at once. Broken
// locks are dropped by a later holder once they are brokenLockKeep old.
//
// In cluster mode the lock lives on the cluster's first server (lowest
// shard and replica), the one every service's ALTERs of the first shard
// meet on (cluster_alter.go).
const (
	migrationLockTable = "schema_migrations_lock"
	migrationLockBeat  = 2 * time.Second
	brokenLockPrefix   = migrationLockTable + "_broken_"
)

// brokenLockKeep is how long a broken lock's table is kept, so that a
// waiter that saw the lock stale an instant before another broke it
// still finds its name taken.
var brokenLockKeep = time.Hour

// migrationLockStale is how long a lock without a heartbeat is waited
// for: fifteen beats. A variable for the tests of a dead holder.
var migrationLockStale = 30 * time.Second

// migrationLock is a held lock; release drops it.
type migrationLock struct {
	conn   driver.Conn
	db     string
	owner  string
	cancel context.CancelFunc
	beats  chan struct{} // closed when the heartbeat has stopped
}

// lockOwner names the caller in the lock's rows and in the logs of the
// services that wait for it: host, process, and a random suffix that
// tells two stores of one process apart.
func lockOwner() string {
	host, _ := os.Hostname() // a name for people; "" is fine
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// acquireMigrationLock takes the lock on conn's server, in database db,
// for owner (a Store's lockOwner), waiting while another live service
// holds it. A lock owner left behind (its release failed in an outage,
// and Migrate tries again) is broken at once. While it waits it asks
// needed whether there is still anything to apply, and returns a nil lock
// when the holder applied it all.
func acquireMigrationLock(ctx context.Context, conn driver.Conn, db, owner string, log *zap.Logger,
	needed func(context.Context) (bool, error)) (*migrationLock, error) {
	table := db + "." + migrationLockTable
	b := backoff.Jittered(50*time.Millisecond, time.Second)
	waiting := false
	for {
		err := conn.Exec(ctx, "CREATE TABLE "+table+" (owner String, beat DateTime) ENGINE = Memory")
		if err == nil {
			l := &migrationLock{conn: conn, db: db, owner: owner, beats: make(chan struct{})}
			if err := l.beat(ctx); err != nil {
				l.release(log)
				return nil, fmt.Errorf("schema migration lock: first heartbeat: %w", err)
			}
			var bctx context.Context
			bctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
			go l.heartbeat(bctx, log)
			if waiting {
				log.Info("schema migration lock taken", zap.String("owner", owner))
			}
			return l, nil
		}
		if !isAlreadyExists(err) {
			return nil, fmt.Errorf("schema migration lock: %w", err)
		}
		st, err := readLock(ctx, conn, db)
		if err != nil {
			return nil, fmt.Errorf("schema migration lock: read its holder: %w", err)
		}
		if st.stale() || st.exists && st.holder == owner {
			broke, err := breakLock(ctx, conn, db, st)
			if err != nil {
				return nil, fmt.Errorf("schema migration lock: break the stale lock: %w", err)
			}
			if broke {
				log.Warn("broke a stale schema migration lock",
					zap.String("holder", st.holder), zap.Duration("silent_for", st.age))
			}
			continue
		}
		if !waiting {
			waiting = true
			log.Info("waiting for another service's schema migrations", zap.String("holder", st.holder))
		}
		if err := b.Wait(ctx); err != nil {
			return nil, err
		}
		if more, err := needed(ctx); err != nil || !more {
			return nil, err
		}
	}
}

// lockState is what a waiter reads of the lock.
type lockState struct {
	exists bool
	holder string        // the owner of its last heartbeat
	last   int64         // server time (Unix seconds) of its last sign of life
	age    time.Duration // how long ago that was
}

// stale reports whether the lock exists and its holder has been silent
// past migrationLockStale: a waiter breaks it.
func (st lockState) stale() bool { return st.exists && st.age > migrationLockStale }

// readLock reads the lock: its last sign of life is its last heartbeat,
// or the table's creation when it has none yet (its holder is between
// CREATE and its first beat, or the server restarted and the Memory
// table lost its rows). A lock dropped or broken while it is read does
// not exist: the next CREATE will tell.
func readLock(ctx context.Context, conn driver.Conn, db string) (lockState, error) {
	var (
		st  lockState
		n   uint64
		now int64
	)
	lock := db + "." + migrationLockTable
	err := conn.QueryRow(ctx, `SELECT count(), toInt64(now()),
	toInt64(greatest(any(metadata_modification_time), (SELECT max(beat) FROM `+lock+`))),
	(SELECT argMax(owner, beat) FROM `+lock+`)
FROM system.tables WHERE database = ? AND name = ?`, db, migrationLockTable).Scan(&n, &now, &st.last, &st.holder)
	if isMissing(err) || isDropped(err) {
		return lockState{}, nil
	}
	if err != nil || n == 0 {
		return lockState{}, err
	}
	st.exists = true
	st.age = time.Duration(now-st.last) * time.Second
	return st, nil
}

// breakLock renames the lock st describes out of the way, and reports
// whether it did: not when another waiter broke that lock first (its
// name is taken) or it is gone.
func breakLock(ctx context.Context, conn driver.Conn, db string, st lockState) (bool, error) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d", st.holder, st.last)
	broken := db + "." + brokenLockPrefix + hex.EncodeToString(h.Sum(nil))
	err := conn.Exec(ctx, "RENAME TABLE "+db+"."+migrationLockTable+" TO "+broken)
	switch {
	case err == nil:
		return true, nil
	case isAlreadyExists(err) || isMissing(err) || isDropped(err):
		return false, nil
	}
	return false, err
}

// dropBrokenLocks drops the broken locks' tables older than
// brokenLockKeep (as the server dates their metadata).
func dropBrokenLocks(ctx context.Context, conn driver.Conn, db string) error {
	rows, err := conn.Query(ctx, `SELECT name FROM system.tables WHERE database = ? AND startsWith(name, ?)
	AND metadata_modification_time < now() - ?`, db, brokenLockPrefix, uint32(brokenLockKeep/time.Second))
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		names = append(names, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range names {
		if err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+db+"."+name); err != nil {
			return err
		}
	}
	return nil
}

// codeTableIsDropped (TABLE_IS_DROPPED) answers a query that reads a
// table while another drops it.
const codeTableIsDropped = 218

// isDropped reports an error of a table dropped while the query read it.
func isDropped(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == codeTableIsDropped
}

// beat inserts one heartbeat row, stamped with the server's clock.
func (l *migrationLock) beat(ctx context.Context) error {
	return l.conn.Exec(ctx, "INSERT INTO "+l.db+"."+migrationLockTable+" SELECT ?, now()", l.owner)
}

// heartbeat beats every migrationLockBeat until ctx is cancelled. A
// failed beat is logged and the next one tried: the lock only goes stale
// after migrationLockStale without any.
func (l *migrationLock) heartbeat(ctx context.Context, log *zap.Logger) {
	defer close(l.beats)
	t := time.NewTicker(migrationLockBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.beat(ctx); err != nil && ctx.Err() == nil {
				log.Warn("schema migration lock: heartbeat failed", zap.Error(err))
			}
		}
	}
}

// release stops the heartbeat and drops the lock, if it is still this
// holder's (a holder silent past migrationLockStale may have lost it to a
// waiter). A drop that fails (the server went away) leaves the lock to go
// stale, which the next service to migrate breaks.
func (l *migrationLock) release(log *zap.Logger) {
	if l.cancel != nil {
		l.cancel()
		<-l.beats
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := readLock(ctx, l.conn, l.db)
	if err == nil && st.exists && st.holder == l.owner {
		err = l.conn.Exec(ctx, "DROP TABLE IF EXISTS "+l.db+"."+migrationLockTable)
	}
	if err != nil {
		log.Warn("schema migration lock: not released; it goes stale and the next service breaks it",
			zap.Duration("after", migrationLockStale), zap.Error(err))
		return
	}
	if err := dropBrokenLocks(ctx, l.conn, l.db); err != nil {
		log.Warn("schema migration lock: old broken locks not dropped", zap.Error(err))
	}
}

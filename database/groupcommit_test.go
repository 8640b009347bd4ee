package database

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"
)

// groupDB is an SQLite database with group commit up to max, and a table
// of rows, one with a deferred foreign key (checked only at COMMIT).
func groupDB(t *testing.T, max int) (*gorm.DB, *groupCommitter) {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "group.db"), Options{GroupCommit: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Close(db) })
	for _, ddl := range []string{
		`CREATE TABLE parents (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE rows (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parents(id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if err := db.Exec(ddl).Error; err != nil {
			t.Fatal(err)
		}
	}
	return db, db.ConnPool.(*sqlitePools).group
}

// waiters is how many wait for the token.
func (g *groupCommitter) waiters() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// untilWaiting returns once n transactions wait for the token.
func untilWaiting(t *testing.T, g *groupCommitter, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for int64(g.waiters()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions waiting, want %d", g.waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// insertThen begins a transaction, inserts row id (with parent, if not 0)
// and ends it by commit or rollback, on its own goroutine; the result
// comes on the channel.
func insertThen(db *gorm.DB, id, parent int, commit bool) <-chan error {
	done := make(chan error, 1)
	go func() {
		tx := db.Begin()
		if tx.Error != nil {
			done <- tx.Error
			return
		}
		var p any
		if parent != 0 {
			p = parent
		}
		if err := tx.Exec(`INSERT INTO rows (id, parent) VALUES (?, ?)`, id, p).Error; err != nil {
			tx.Rollback()
			done <- err
			return
		}
		if commit {
			done <- tx.Commit().Error
		} else {
			done <- tx.Rollback().Error
		}
	}()
	return done
}

func ids(t *testing.T, db *gorm.DB) []int {
	t.Helper()
	var got []int
	if err := db.Raw(`SELECT id FROM rows ORDER BY id`).Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	return got
}

// Three transactions queued behind each other share one COMMIT; the one
// that rolls back undoes only its own row; a commit is not visible to a
// reader — nor returned to its caller — before the shared COMMIT.
func TestGroupCommitSharesACommitAndRollsBackOnlyItsOwn(t *testing.T) {
	db, g := groupDB(t, 8)
	first := db.Begin()
	if err := first.Exec(`INSERT INTO rows (id) VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	second, third := insertThen(db, 2, 0, false), insertThen(db, 3, 0, true)
	untilWaiting(t, g, 2)
	committed := make(chan error, 1)
	go func() { committed <- first.Commit().Error }()
	for _, done := range []<-chan error{second, third} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("rows %v, want [1 3]: the rolled-back one alone undone", got)
	}
	if commits, ops := g.commits.Load(), g.operations.Load(); commits != 1 || ops != 2 {
		t.Fatalf("%d commits for %d transactions, want 1 for 2", commits, ops)
	}
}

// A committed member waits for the shared COMMIT: while a later member of
// its batch runs, a reader does not see its row and its Commit has not
// returned.
func TestAMemberIsAnsweredOnlyAfterTheSharedCommit(t *testing.T) {
	db, g := groupDB(t, 8)
	first := db.Begin()
	if err := first.Exec(`INSERT INTO rows (id) VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	later := make(chan *gorm.DB, 1)
	go func() { later <- db.Begin() }()
	untilWaiting(t, g, 1)
	committed := make(chan error, 1)
	go func() { committed <- first.Commit().Error }()
	second := <-later // the token passed on: first has released its savepoint, the transaction is open
	select {
	case err := <-committed:
		t.Fatalf("first's Commit returned (%v) before the shared COMMIT", err)
	default:
	}
	if got := ids(t, db); len(got) != 0 {
		t.Fatalf("a reader sees %v before the shared COMMIT", got)
	}
	if err := second.Exec(`INSERT INTO rows (id) VALUES (2)`).Error; err != nil {
		t.Fatal(err)
	}
	if err := second.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db); len(got) != 2 {
		t.Fatalf("rows %v after the shared COMMIT, want [1 2]", got)
	}
}

// A shared COMMIT that fails fails every member that committed in it: none
// is told its write is kept, and none is.
func TestAFailedSharedCommitFailsEveryMember(t *testing.T) {
	db, g := groupDB(t, 8)
	first := db.Begin()
	if err := first.Exec(`INSERT INTO rows (id) VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	orphan := insertThen(db, 2, 99, true) // no parent 99: COMMIT refuses
	untilWaiting(t, g, 1)
	firstErr := first.Commit().Error
	if err := <-orphan; err == nil || firstErr == nil {
		t.Fatalf("commits returned %v and %v, want both to fail with the shared COMMIT", firstErr, err)
	}
	if got := ids(t, db); len(got) != 0 {
		t.Fatalf("rows %v kept by a failed COMMIT", got)
	}
	if err := <-insertThen(db, 3, 0, true); err != nil {
		t.Fatalf("the next transaction after a failed batch: %v", err)
	}
}

// A member whose context ends is rolled back alone; the batch goes on
// without it, and its Commit reports the context's end.
func TestAMemberWhoseContextEndsIsRolledBackAlone(t *testing.T) {
	db, g := groupDB(t, 8)
	ctx, cancel := context.WithCancel(context.Background())
	gone := db.WithContext(ctx).Begin()
	if err := gone.Exec(`INSERT INTO rows (id) VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	next := insertThen(db, 2, 0, true)
	untilWaiting(t, g, 1)
	cancel()
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	if err := gone.Commit().Error; !errors.Is(err, context.Canceled) && !errors.Is(err, errMemberDone) {
		t.Fatalf("the ended member's Commit: %v, want its context's end", err)
	}
	if got := ids(t, db); len(got) != 1 || got[0] != 2 {
		t.Fatalf("rows %v, want [2]", got)
	}
}

// With GroupCommit 1 every transaction is its own commit, however many
// wait: the same binary without group commit.
func TestGroupCommitOfOneCommitsEachAlone(t *testing.T) {
	db, g := groupDB(t, 1)
	first := db.Begin()
	if err := first.Exec(`INSERT INTO rows (id) VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	second := insertThen(db, 2, 0, true)
	untilWaiting(t, g, 1)
	if err := first.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if commits, ops := g.commits.Load(), g.operations.Load(); commits != 2 || ops != 2 {
		t.Fatalf("%d commits for %d transactions, want 2 for 2", commits, ops)
	}
}

// A waiter that gives up leaves the line: the member before it, finding
// nobody waiting, commits its batch and is answered — the token is not left
// free with the batch open.
func TestAWaiterThatGivesUpDoesNotHoldUpTheBatch(t *testing.T) {
	db, g := groupDB(t, 8)
	first := db.Begin()
	if err := first.Exec(`INSERT INTO rows (id) VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- db.WithContext(ctx).Begin().Error }()
	untilWaiting(t, g, 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter's begin: %v, want its context's end", err)
	}
	if err := first.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db); len(got) != 1 {
		t.Fatalf("rows %v after first's Commit, want [1]", got)
	}
	if err := <-insertThen(db, 2, 0, true); err != nil {
		t.Fatalf("the next transaction: %v", err)
	}
}

// row is a row of the table rows, for Chained.
type row struct {
	ID     int
	Parent *int
}

// A batch is one Exec in its member's savepoint: one that fails midway (a
// duplicate key, after an insert that succeeded) is undone by its member's
// rollback alone, and the batch of the member queued behind it commits.
func TestABatchThatFailsMidwayIsUndoneWithItsMemberAlone(t *testing.T) {
	db, g := groupDB(t, 8)
	if err := db.Exec(`INSERT INTO rows (id) VALUES (1)`).Error; err != nil {
		t.Fatal(err)
	}
	batch := func(tx *gorm.DB, ids ...int) error {
		inserts, send := Chained(tx)
		for _, id := range ids {
			if err := inserts.Create(&row{ID: id}).Error; err != nil {
				return err
			}
		}
		_, err := send()
		return err
	}
	first := db.Begin()
	later := make(chan error, 1)
	go func() { later <- db.Transaction(func(tx *gorm.DB) error { return batch(tx, 4, 5) }) }()
	untilWaiting(t, g, 1)
	if err := batch(first, 2, 1, 3); !errors.Is(err, gorm.ErrDuplicatedKey) {
		t.Fatalf("a batch with a duplicate key: %v, want %v", err, gorm.ErrDuplicatedKey)
	}
	if err := first.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-later; err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db); fmt.Sprint(got) != "[1 4 5]" {
		t.Fatalf("rows %v, want [1 4 5]: the failed batch undone, the later one kept", got)
	}
	if commits, ops := g.commits.Load(), g.operations.Load(); commits != 1 || ops != 1 {
		t.Fatalf("%d commits for %d transactions, want 1 for 1", commits, ops)
	}
}

// Both pools keep SQLite's temporary files in memory, the sub-journals of a
// batch's savepoints among them: PRAGMA temp_store reads 2 (MEMORY) in a
// member's transaction on the writer and on a reader.
func TestSavepointJournalsStayInMemory(t *testing.T) {
	db, _ := groupDB(t, 4)
	var onReader, inMember int
	if err := db.ConnPool.(*sqlitePools).readers.QueryRow("PRAGMA temp_store").Scan(&onReader); err != nil {
		t.Fatal(err)
	}
	err := db.Transaction(func(tx *gorm.DB) error { return tx.Raw("PRAGMA temp_store").Scan(&inMember).Error })
	if err != nil {
		t.Fatal(err)
	}
	if onReader != 2 || inMember != 2 {
		t.Fatalf("temp_store: %d on a reader, %d in a member; want 2 (MEMORY) on both", onReader, inMember)
	}
}

// A member whose context ends while the shared transaction waits for the writer's
// connection gives up at once, with its context's error, and the next member begins.
func TestAMemberWhoseContextEndsWhileBeginningGivesUp(t *testing.T) {
	db, g := groupDB(t, 8)
	conn, err := g.writer.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waits := g.writer.Stats().WaitCount
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	began := make(chan error, 1)
	go func() { began <- db.WithContext(ctx).Begin().Error }()
	for deadline := time.Now().Add(10 * time.Second); g.writer.Stats().WaitCount == waits; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the begin never waited for the writer's connection")
		}
	}
	cancel()
	select {
	case err := <-began:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the begin cut off: %v, want its context's end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the begin waits on after its context ended")
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-insertThen(db, 1, 0, true); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db); len(got) != 1 || got[0] != 1 {
		t.Fatalf("rows %v, want [1]", got)
	}
}

// A member that ends while a writing statement of its own is still open (an
// INSERT … RETURNING whose row was not read yet, as when the middleware's
// claim is given up between its query and its Scan) is rolled back alone:
// SQLite aborts the statement with the savepoint, and releasing a nested
// savepoint commits nothing, so it is not refused and the batch goes on.
func TestAMemberEndingWithAWriteStillOpenIsRolledBackAlone(t *testing.T) {
	db, g := groupDB(t, 8)
	ctx, cancel := context.WithCancel(context.Background())
	gone := db.WithContext(ctx).Begin()
	rows, err := gone.Raw(`INSERT INTO rows (id) VALUES (1) RETURNING id`).Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	next := insertThen(db, 2, 0, true)
	untilWaiting(t, g, 1)
	cancel()
	if err := <-next; err != nil {
		t.Fatalf("the other member: %v", err)
	}
	if got := ids(t, db); len(got) != 1 || got[0] != 2 {
		t.Fatalf("rows %v, want [2]", got)
	}
}

package database_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
)

type parent struct {
	ID       string `gorm:"primaryKey"`
	Children []child
}

type child struct {
	ID       uint `gorm:"primaryKey"`
	ParentID string
	Name     string
}

// batchedDB is a fresh database, SQLite or PostgreSQL (TEST_DATABASE_URL).
func batchedDB(t *testing.T) *gorm.DB {
	t.Helper()
	db := testkit.NewDB(t)
	if err := db.AutoMigrate(&parent{}, &child{}); err != nil {
		t.Fatal(err)
	}
	return db
}

// The inserts of a batch, associations and conflict clauses included, are
// written by send, in one statement on PostgreSQL, in one Exec on SQLite.
// A failing batch's error is the database's, translated; its transaction
// rolled back, nothing of it is written. (Two inserts of one key in a batch
// are one statement's on PostgreSQL, which ON CONFLICT does not resolve: a
// batch's conflicts are with rows written before.)
func TestBatchedInsertsAreOneStatement(t *testing.T) {
	db := batchedDB(t)
	var sent []string
	if err := db.Callback().Raw().After("gorm:raw").Register("test:raw", func(tx *gorm.DB) {
		sent = append(sent, strings.Fields(tx.Statement.SQL.String())[0])
	}); err != nil {
		t.Fatal(err)
	}
	count := func(table string) (n int64) {
		t.Helper()
		if err := db.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := db.Create(&parent{ID: "before"}).Error; err != nil {
		t.Fatal(err)
	}
	sent = nil
	err := db.Transaction(func(tx *gorm.DB) error {
		inserts, send := database.Chained(tx)
		if err := inserts.Create(&parent{ID: "p", Children: []child{{Name: "a"}, {Name: "b"}}}).Error; err != nil {
			return err
		}
		if err := inserts.Clauses(clause.OnConflict{DoNothing: true}).Create(&parent{ID: "before"}).Error; err != nil {
			return err
		}
		if count("children") != 0 {
			t.Error("a batched insert was written before send")
		}
		_, err := send()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, c := count("parents"), count("children"); p != 2 || c != 2 {
		t.Fatalf("%d parents and %d children, want 2 and 2", p, c)
	}
	if want := map[bool]string{true: "WITH", false: "INSERT"}[database.IsPostgres(db)]; strings.Join(sent, " ") != want {
		t.Fatalf("sent %v, want [%s]", sent, want)
	}

	// The same with a step after the inserts: on PostgreSQL then one statement that returns a count.
	step := database.Step{SQL: "UPDATE parents SET id = id WHERE id = ?", Vars: []any{"before"}}
	for _, c := range []struct {
		name  string
		rows  []any // created in this order
		steps []database.Step
		want  error
	}{
		{"an orphan child", []any{&parent{ID: "q"}, &child{ParentID: "none", Name: "orphan"}, &parent{ID: "r"}}, nil, gorm.ErrForeignKeyViolated},
		{"a parent written before", []any{&parent{ID: "q", Children: []child{{Name: "c"}}}, &parent{ID: "before"}, &parent{ID: "r"}}, nil, gorm.ErrDuplicatedKey},
		{"an orphan child, then a step", []any{&parent{ID: "q"}, &child{ParentID: "none", Name: "orphan"}}, []database.Step{step}, gorm.ErrForeignKeyViolated},
		{"a parent written before, then a step", []any{&parent{ID: "q"}, &parent{ID: "before"}}, []database.Step{step}, gorm.ErrDuplicatedKey},
	} {
		err = db.Transaction(func(tx *gorm.DB) error {
			inserts, send := database.Chained(tx)
			for _, row := range c.rows {
				if err := inserts.Create(row).Error; err != nil {
					return err
				}
			}
			_, err := send(c.steps...)
			return err
		})
		if !errors.Is(err, c.want) || count("parents") != 2 || count("children") != 2 {
			t.Fatalf("%s: %v, %d parents and %d children; want %v, 2 and 2", c.name, err, count("parents"), count("children"), c.want)
		}
	}
}

// Steps sent after a batch's inserts run in turn, each only once the one
// before it changed its row: the first that changes none stops the rest
// (changed counts those before it). On PostgreSQL the inserts and the steps
// are one statement, the steps' values bound after the inserts'; on SQLite
// each step is a statement after the inserts'. The steps are built as GORM
// builds them (on PostgreSQL with $n placeholders).
func TestChainedStepsRunInTurnUntilOneChangesNone(t *testing.T) {
	db := batchedDB(t)
	var sent []string
	record := func(tx *gorm.DB) {
		if !tx.DryRun {
			sent = append(sent, strings.Fields(tx.Statement.SQL.String())[0])
		}
	}
	for _, err := range []error{
		db.Callback().Raw().After("gorm:raw").Register("test:raw", record),
		db.Callback().Row().After("gorm:row").Register("test:row", record),
		db.Callback().Query().After("gorm:query").Register("test:query", record),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Create(&parent{ID: "shelf", Children: []child{{Name: "free"}, {Name: "gone"}, {Name: "free"}}}).Error; err != nil {
		t.Fatal(err)
	}
	var ids []uint
	if err := db.Model(&child{}).Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	take := func(i int) database.Step {
		st := db.Session(&gorm.Session{DryRun: true}).Model(&child{}).Where("id = ? AND name = ?", ids[i], "free").Update("name", "taken").Statement
		return database.Step{SQL: st.SQL.String(), Vars: st.Vars}
	}
	for _, c := range []struct {
		takes   []int
		changed int
		names   string // the children's after it
		sent    map[bool]string
	}{
		{[]int{1, 2}, 0, "free gone free", map[bool]string{true: "WITH", false: "INSERT UPDATE"}},
		{[]int{0, 1, 2}, 1, "taken gone free", map[bool]string{true: "WITH", false: "INSERT UPDATE UPDATE"}},
		{[]int{2}, 1, "taken gone taken", map[bool]string{true: "WITH", false: "INSERT UPDATE"}},
	} {
		var steps []database.Step
		for _, i := range c.takes {
			steps = append(steps, take(i))
		}
		sent = nil
		var changed int
		order := fmt.Sprintf("order-%v", c.takes)
		err := db.Transaction(func(tx *gorm.DB) (err error) {
			inserts, send := database.Chained(tx)
			if err := inserts.Create(&parent{ID: order}).Error; err != nil {
				return err
			}
			changed, err = send(steps...)
			return err
		})
		got := strings.Join(sent, " ") // before the reads below, which are queries too
		var names []string
		var parents int64
		if err == nil {
			err = errors.Join(db.Model(&child{}).Order("id").Pluck("name", &names).Error,
				db.Model(&parent{}).Where("id = ?", order).Count(&parents).Error)
		}
		if err != nil || changed != c.changed || strings.Join(names, " ") != c.names || parents != 1 {
			t.Fatalf("steps %v: %d changed, children %v, %d parents (%v); want %d, [%s], 1", c.takes, changed, names, parents, err, c.changed, c.names)
		}
		if want := c.sent[database.IsPostgres(db)]; got != want {
			t.Fatalf("steps %v: sent [%s], want [%s]", c.takes, got, want)
		}
	}
	if database.IsPostgres(db) {
		chainedStepLocksNothingOutOfTurn(t, db, take)
	}
}

// On PostgreSQL a step whose turn never comes does not touch its row: with
// that row locked by another transaction, the chain ends at once (were the
// step run, it would wait for the lock, and the lock timeout end it).
func chainedStepLocksNothingOutOfTurn(t *testing.T, db *gorm.DB, take func(int) database.Step) {
	var ids []uint
	if err := db.Model(&child{}).Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Model(&child{}).Where("id = ?", ids[2]).Update("name", "free").Error; err != nil {
		t.Fatal(err)
	}
	other := db.Begin()
	defer other.Rollback()
	if err := other.Exec("SELECT id FROM children WHERE id = ? FOR UPDATE", ids[2]).Error; err != nil {
		t.Fatal(err)
	}
	steps := []database.Step{take(1), take(2)} // the first finds its child gone
	changed := -1
	err := db.Transaction(func(tx *gorm.DB) (err error) {
		if err := tx.Exec("SET LOCAL lock_timeout = '2s'").Error; err != nil {
			return err
		}
		_, send := database.Chained(tx)
		changed, err = send(steps...)
		return err
	})
	if err != nil || changed != 0 {
		t.Fatalf("%d changed (%v), want 0 at once: the second step must not wait for its row", changed, err)
	}
}

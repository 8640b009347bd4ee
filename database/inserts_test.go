package database_test

import (
	"errors"
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
		inserts, send := database.Batched(tx)
		if err := inserts.Create(&parent{ID: "p", Children: []child{{Name: "a"}, {Name: "b"}}}).Error; err != nil {
			return err
		}
		if err := inserts.Clauses(clause.OnConflict{DoNothing: true}).Create(&parent{ID: "before"}).Error; err != nil {
			return err
		}
		if count("children") != 0 {
			t.Error("a batched insert was written before send")
		}
		return send()
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

	for _, c := range []struct {
		name string
		rows []any // created in this order
		want error
	}{
		{"an orphan child", []any{&parent{ID: "q"}, &child{ParentID: "none", Name: "orphan"}, &parent{ID: "r"}}, gorm.ErrForeignKeyViolated},
		{"a parent written before", []any{&parent{ID: "q", Children: []child{{Name: "c"}}}, &parent{ID: "before"}, &parent{ID: "r"}}, gorm.ErrDuplicatedKey},
	} {
		err = db.Transaction(func(tx *gorm.DB) error {
			inserts, send := database.Batched(tx)
			for _, row := range c.rows {
				if err := inserts.Create(row).Error; err != nil {
					return err
				}
			}
			return send()
		})
		if !errors.Is(err, c.want) || count("parents") != 2 || count("children") != 2 {
			t.Fatalf("%s: %v, %d parents and %d children; want %v, 2 and 2", c.name, err, count("parents"), count("children"), c.want)
		}
	}
}

// Steps sent after a batch's inserts run in turn, each only once the one
// before it changed its row: the first that changes none stops the rest
// (taken counts those before it). On PostgreSQL the inserts and the steps
// are one statement; on SQLite each step is a statement after the inserts'.
func TestChainedStepsRunInTurnUntilOneChangesNone(t *testing.T) {
	db := batchedDB(t)
	var sent []string
	record := func(tx *gorm.DB) { sent = append(sent, strings.Fields(tx.Statement.SQL.String())[0]) }
	for _, err := range []error{
		db.Callback().Raw().After("gorm:raw").Register("test:raw", record),
		db.Callback().Row().After("gorm:row").Register("test:row", record),
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
	take := func(id uint) database.Step {
		return database.Step{SQL: "UPDATE children SET name = 'taken' WHERE id = ? AND name = 'free'", Vars: []any{id}}
	}
	sent = nil
	var taken int
	err := db.Transaction(func(tx *gorm.DB) (err error) {
		inserts, send := database.Chained(tx)
		if err := inserts.Create(&parent{ID: "order"}).Error; err != nil {
			return err
		}
		taken, err = send(take(ids[0]), take(ids[1]), take(ids[2]))
		return err
	})
	if err != nil || taken != 1 {
		t.Fatalf("taken %d (%v), want 1: the second step changes no row", taken, err)
	}
	var names []string
	if err := db.Model(&child{}).Order("id").Pluck("name", &names).Error; err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "taken gone free" {
		t.Fatalf("children %v, want [taken gone free]: the third step must not run", names)
	}
	var parents int64
	if err := db.Model(&parent{}).Where("id = ?", "order").Count(&parents).Error; err != nil || parents != 1 {
		t.Fatalf("the batch's insert: %d rows (%v), want 1", parents, err)
	}
	if want := map[bool]string{true: "WITH", false: "INSERT UPDATE UPDATE"}[database.IsPostgres(db)]; strings.Join(sent, " ") != want {
		t.Fatalf("sent %v, want [%s]", sent, want)
	}
}

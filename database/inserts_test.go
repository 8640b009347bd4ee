package database_test

import (
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
// written by send: on PostgreSQL in one statement, sent then; elsewhere
// each at once. A failing batch writes nothing of itself. (Two inserts of
// one key in a batch are one statement's on PostgreSQL, which ON CONFLICT
// does not resolve: a batch's conflicts are with rows written before.)
func TestBatchedInsertsAreOneStatementOnPostgreSQL(t *testing.T) {
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
		if database.IsPostgres(db) && count("children") != 0 {
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
	if want := map[bool]string{true: "[WITH]", false: "[]"}[database.IsPostgres(db)]; strings.Join(sent, " ") != strings.Trim(want, "[]") {
		t.Fatalf("sent %v, want %s", sent, want)
	}

	err = db.Transaction(func(tx *gorm.DB) error {
		inserts, send := database.Batched(tx)
		if err := inserts.Create(&child{ParentID: "none", Name: "orphan"}).Error; err != nil {
			return err
		}
		return send()
	})
	if err == nil || count("children") != 2 {
		t.Fatalf("an orphan child: %v, %d children; want an error and 2", err, count("children"))
	}
}

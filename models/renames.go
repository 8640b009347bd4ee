package models

import "gorm.io/gorm"

// renamedColumns are columns whose names changed: a database made by an
// earlier version keeps its data under the new names.
var renamedColumns = []struct{ table, from, to, oldIndex string }{
	{"orders", "idempotency_ref", "derived_key", "idx_orders_idempotency_ref"},
	{"orders", "payment_lock", "held_by", ""},
	{"orders", "payment_locked_until", "held_until", ""},
	{"payment_attempts", "operation", "derived_key", "idx_payment_attempts_operation"},
}

// renameColumns renames, before AutoMigrate runs, the columns of an earlier
// schema, and drops their indexes, which AutoMigrate makes anew under the
// new names. On a new or already renamed database it does nothing.
func renameColumns(tx *gorm.DB) error {
	m := tx.Migrator()
	for _, r := range renamedColumns {
		if !m.HasTable(r.table) || !m.HasColumn(r.table, r.from) || m.HasColumn(r.table, r.to) {
			continue
		}
		if r.oldIndex != "" && m.HasIndex(r.table, r.oldIndex) {
			if err := m.DropIndex(r.table, r.oldIndex); err != nil {
				return err
			}
		}
		if err := m.RenameColumn(r.table, r.from, r.to); err != nil {
			return err
		}
	}
	return nil
}

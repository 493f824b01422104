package sqlitedb_test

import (
	"context"
	"fmt"
	"os"

	"github.com/forkline/forkline/driver/sqlitedb"
)

// A database is checkpointed and restored into a fork, which does not see
// later changes to the original.
func Example() {
	store, _ := os.MkdirTemp("", "sqlitedb-example")
	defer os.RemoveAll(store)
	ctx := context.Background()
	d := sqlitedb.New(sqlitedb.Config{Store: store, Schema: `CREATE TABLE notes (body TEXT)`})

	db, _, err := d.Create(ctx, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	_, _ = db.ExecContext(ctx, `INSERT INTO notes VALUES ('first')`)
	ref, err := d.Checkpoint(ctx, db)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = db.ExecContext(ctx, `INSERT INTO notes VALUES ('second')`)

	fork, _, err := d.Create(ctx, ref)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fork.Close()
	var inFork, inOriginal int
	_ = fork.QueryRowContext(ctx, `SELECT count(*) FROM notes`).Scan(&inFork)
	_ = db.QueryRowContext(ctx, `SELECT count(*) FROM notes`).Scan(&inOriginal)
	fmt.Println(inFork, inOriginal)
	// Output: 1 2
}

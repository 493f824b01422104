package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/eventlog/storetest"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestLimiter runs the kit's limiter checks alone (TestConformance runs
// them with the rest).
func TestLimiter(t *testing.T) {
	storetest.TestLimiter(t, func(t *testing.T) eventlog.Log { return openStore(t, pgstore.WithoutSync()) })
}

// BenchmarkTakeLimit compares one TakeLimit (admitted, or refused on a
// full window) with one raw INSERT of a row into a table of two columns, each one statement
// on one connection, with commits synchronous (synced) or not (unsynced).
// The ratio is the limiter's cost over the cheapest write a store makes.
func BenchmarkTakeLimit(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []pgstore.Option
		set  string
	}{
		{"synced", nil, "on"},
		{"unsynced", []pgstore.Option{pgstore.WithoutSync()}, "off"},
	} {
		// admitted: a window of 5 ms, so nearly every take is admitted and
		// keeps a few times; full: 100 a minute, so past the first 100
		// every take is refused after reading a full window.
		for _, tc := range []struct {
			name   string
			max    int
			window time.Duration
		}{{"admitted", 1000, 5 * time.Millisecond}, {"full", 100, time.Minute}} {
			b.Run("take-"+tc.name+"/"+mode.name, func(b *testing.B) {
				s := openStore(b, mode.opts...)
				for b.Loop() {
					if _, _, err := s.TakeLimit(b.Context(), "bench", tc.max, tc.window); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run("insert/"+mode.name, func(b *testing.B) {
			s := openStore(b, mode.opts...)
			conn, err := pgx.Connect(b.Context(), pgtest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(context.Background())
			table := pgx.Identifier{s.Schema(), "raw"}.Sanitize()
			for _, sql := range []string{"SET synchronous_commit = " + mode.set,
				"CREATE TABLE " + table + " (key text NOT NULL, at timestamptz NOT NULL)"} {
				if _, err := conn.Exec(b.Context(), sql); err != nil {
					b.Fatal(err)
				}
			}
			insert := "INSERT INTO " + table + " (key, at) VALUES ($1, now())"
			for b.Loop() {
				if _, err := conn.Exec(b.Context(), insert, "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

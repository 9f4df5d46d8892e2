package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/internal/testsupport/testdb"
)

// S8 measures what fence.Admit costs the write it guards: one-row write
// transactions (BEGIN, INSERT, COMMIT) on one connection to a throwaway
// PostgreSQL and MariaDB, without and with fence.Admit before the INSERT.
// The two variants alternate in rounds, their order rotating, so that the
// machine's noise falls on both alike. Round trips are counted on the
// connection itself (roundTrips), not inferred from the statements.

// fenceTarget is the most the fence may add to a transaction's time.
const fenceTarget = 1.15

// fenceToken is the token every fenced transaction carries: past 2^63, as
// tokens are from 2038 on, and the same each time (one holder writing many
// times is admitted again).
const fenceToken = 1<<63 + 1

// fenceDB is one database of S8.
type fenceDB struct {
	name    string
	dialect fence.Dialect
	srv     *testdb.Server
	db      *sql.DB
	trips   *roundTrips
	insert  string
}

const (
	fenceBenchTablePG    = `CREATE TABLE IF NOT EXISTS bench_fence_writes (id bigserial PRIMARY KEY, v bigint NOT NULL)`
	fenceBenchTableMySQL = `CREATE TABLE IF NOT EXISTS bench_fence_writes (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB`
)

// startFenceDB starts the database d on one connection whose round trips
// are counted, with the fence table and the table written to.
func startFenceDB(d fence.Dialect, opts ...testdb.Option) (*fenceDB, error) {
	f := &fenceDB{dialect: d, trips: &roundTrips{}}
	var err error
	if d == fence.PostgreSQL {
		f.name, f.insert = "PostgreSQL", `INSERT INTO bench_fence_writes (v) VALUES ($1)`
		if f.srv, err = testdb.StartPostgres(opts...); err != nil {
			return nil, err
		}
		cfg, perr := pgx.ParseConfig(f.srv.URL)
		if perr != nil {
			_ = f.srv.Close()
			return nil, perr
		}
		cfg.DialFunc = f.trips.dial
		f.db = stdlib.OpenDB(*cfg)
	} else {
		f.name, f.insert = "MariaDB", `INSERT INTO bench_fence_writes (v) VALUES (?)`
		if f.srv, err = testdb.StartMariaDB(opts...); err != nil {
			return nil, err
		}
		cfg := mysql.NewConfig()
		cfg.User, cfg.Net, cfg.Addr, cfg.DBName = testdb.MySQLUser, "tcp", fmt.Sprintf("127.0.0.1:%d", f.srv.Port), testdb.MySQLDatabase
		// One round trip per statement with arguments, as on PostgreSQL;
		// without it the driver prepares every such statement first.
		cfg.InterpolateParams = true
		cfg.DialFunc = f.trips.dial
		conn, cerr := mysql.NewConnector(cfg)
		if cerr != nil {
			_ = f.srv.Close()
			return nil, cerr
		}
		f.db = sql.OpenDB(conn)
	}
	f.db.SetMaxOpenConns(1)
	f.db.SetMaxIdleConns(1)
	table := fenceBenchTablePG
	if d == fence.MySQL {
		table = fenceBenchTableMySQL
	}
	for _, ddl := range []string{fence.Schema(d), table} {
		if _, err := f.db.Exec(ddl); err != nil {
			f.close()
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return f, nil
}

func (f *fenceDB) close() {
	_ = f.db.Close()
	_ = f.srv.Close()
}

// txn runs one write transaction, fenced or not.
func (f *fenceDB) txn(ctx context.Context, fenced bool, v int) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if fenced {
		if err := fence.Admit(ctx, tx, f.dialect, "bench", fenceToken); err != nil {
			return err // Admit rolled tx back
		}
	}
	if _, err := tx.ExecContext(ctx, f.insert, v); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// fenceRun is what one variant measured over all rounds.
type fenceRun struct {
	lat     Histogram
	trips   int64
	txns    int64
	medians []float64 // per round, µs
}

// runBatch runs n transactions of one variant and records them.
func (f *fenceDB) runBatch(ctx context.Context, fenced bool, n int, r *fenceRun) error {
	round := &Histogram{}
	before := f.trips.count()
	for i := range n {
		start := time.Now()
		if err := f.txn(ctx, fenced, i); err != nil {
			return err
		}
		round.RecordDuration(time.Since(start))
	}
	r.trips += f.trips.count() - before
	r.txns += int64(n)
	r.lat.Merge(round)
	r.medians = append(r.medians, float64(round.Percentile(50))/1e3)
	return nil
}

func (b *bench) s8() *Scenario {
	sz := b.sz
	sc := &Scenario{ID: "S8", Name: "fence cost", Desc: fmt.Sprintf(
		"one-row write transactions (BEGIN, INSERT, COMMIT) on one connection to a throwaway PostgreSQL and MariaDB, each as testdb runs it (no flush at commit) and durable, without and with fence.Admit before the INSERT; %d rounds of %d transactions of each, alternating, after %d of each to warm up",
		sz.s8Rounds, sz.s8Txns, sz.s8Txns/10)}
	ctx := context.Background()
	for _, p := range fencePasses() {
		b.step("S8 " + p.name)
		var opts []testdb.Option
		if p.durable {
			opts = append(opts, testdb.Durable())
		}
		f, err := startFenceDB(p.dialect, opts...)
		if err != nil {
			b.failRow(sc, p.name, "write transaction", "S8 "+p.name, err)
			continue
		}
		runs, err := f.measure(ctx, sz.s8Rounds, sz.s8Txns)
		if err != nil {
			b.failRow(sc, p.name, "write transaction", "S8 "+p.name, err)
		} else {
			addFenceRows(sc, p.name, runs)
		}
		f.close()
	}
	sc.Note("round trips are counted on the connection: a write after a read begins one; MariaDB through go-sql-driver/mysql with interpolateParams (one round trip per statement), PostgreSQL through pgx's database/sql driver (statements cached after the warm-up)")
	sc.Note("testdb's throwaway servers run without flushing at commit (PostgreSQL fsync, synchronous_commit and full_page_writes off; MariaDB innodb_flush_log_at_trx_commit=0), so there a transaction's time is its round trips and the server's work; the durable passes run a server started with testdb.Durable, which flushes and syncs its log at each commit as a production server does (PostgreSQL's defaults, innodb_flush_log_at_trx_commit=1), to the temporary directory's disk")
	return sc
}

// fencePass is one server that S8 measures.
type fencePass struct {
	name    string // its rows' system
	dialect fence.Dialect
	durable bool // started with testdb.Durable
}

// fencePasses are S8's servers: each database as testdb runs it (no flush
// at commit), then started durable (its log flushed and synced at each
// commit, as in production).
func fencePasses() []fencePass {
	return []fencePass{
		{"PostgreSQL", fence.PostgreSQL, false},
		{"PostgreSQL durable", fence.PostgreSQL, true},
		{"MariaDB", fence.MySQL, false},
		{"MariaDB durable", fence.MySQL, true},
	}
}

// addFenceRows adds one pass's rows and the fence's cost in it.
func addFenceRows(sc *Scenario, name string, runs [2]*fenceRun) {
	plain, fenced := runs[0], runs[1]
	for i, r := range runs {
		sys := name
		if i == 1 {
			sys += " +fence"
		}
		sc.Add(&Row{System: sys, Figure: "write transaction (median)", Value: float64(r.lat.Percentile(50)) / 1e3, Unit: "µs",
			Lat: summaryOf(&r.lat), Lower: true,
			Note: fmt.Sprintf("%.2f round trips per transaction over %d", float64(r.trips)/float64(r.txns), r.txns)})
	}
	ratio := float64(fenced.lat.Percentile(50)) / float64(plain.lat.Percentile(50))
	sc.Note("%s: the fence adds %.2f round trips per transaction (target: its one statement) and %+.1f %% to the median transaction (%.3f×; per round: %s; target at most %.2f×)",
		name, float64(fenced.trips)/float64(fenced.txns)-float64(plain.trips)/float64(plain.txns),
		(ratio-1)*100, ratio, roundRatios(plain.medians, fenced.medians), fenceTarget)
}

// measure warms up, then runs rounds of n transactions of each variant
// (0: without the fence, 1: with it), their order rotating.
func (f *fenceDB) measure(ctx context.Context, rounds, n int) ([2]*fenceRun, error) {
	runs := [2]*fenceRun{{}, {}}
	for _, fenced := range []bool{false, true} {
		for i := range max(n/10, 1) {
			if err := f.txn(ctx, fenced, i); err != nil {
				return runs, err
			}
		}
	}
	for round := range rounds {
		for _, i := range rotation(2, round) {
			if err := f.runBatch(ctx, i == 1, n, runs[i]); err != nil {
				return runs, err
			}
		}
	}
	return runs, nil
}

// roundRatios lists the per-round ratios of fenced to plain medians, and
// their median.
func roundRatios(plain, fenced []float64) string {
	rs := make([]float64, len(plain))
	s := ""
	for i := range plain {
		rs[i] = fenced[i] / plain[i]
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.2f", rs[i])
	}
	slices.Sort(rs)
	return fmt.Sprintf("%s, median %.3f×", s, rs[len(rs)/2])
}

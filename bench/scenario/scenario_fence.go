package scenario

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/internal/testsupport/testdb"
)

// S8 measures what fencing costs the write it guards: one-row write
// transactions (BEGIN, the write, COMMIT) on one connection to a throwaway
// PostgreSQL and MariaDB, in five forms (fenceForms): an INSERT without a
// fence, with fence.Admit before it, and as one INSERT … SELECT whose WHERE
// calls the admit function (fence.ExecAdmitted); and an UPDATE of one row
// without a fence and as the row-level variant (… WHERE fence <= token).
// The forms alternate in rounds, their order rotating, so that the
// machine's noise falls on all alike. Round trips are counted on the
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
	sql     fenceSQL
}

// fenceSQL is the statements of one dialect S8 runs.
type fenceSQL struct {
	tables   []string // created after the fence table and the admit function
	insert   string   // the write without a fence: its parameter is v
	admitted string   // the same write, admitted in its WHERE: v, then the admit's two
	update   string   // an UPDATE of row 1 without a fence: v
	rowFence string   // the same UPDATE as the row-level variant: v, token (, token)
}

var fenceSQLs = map[fence.Dialect]fenceSQL{
	fence.PostgreSQL: {
		tables: []string{
			`CREATE TABLE IF NOT EXISTS bench_fence_writes (id bigserial PRIMARY KEY, v bigint NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS bench_fence_rows (id bigint PRIMARY KEY, v bigint NOT NULL, fence numeric(20,0) NOT NULL DEFAULT 0)`,
			`INSERT INTO bench_fence_rows (id, v) VALUES (1, -1) ON CONFLICT DO NOTHING`,
		},
		insert:   `INSERT INTO bench_fence_writes (v) VALUES ($1)`,
		admitted: `INSERT INTO bench_fence_writes (v) SELECT $1::bigint WHERE ` + fence.AdmitCall(fence.PostgreSQL, 2),
		update:   `UPDATE bench_fence_rows SET v = $1 WHERE id = 1`,
		rowFence: `UPDATE bench_fence_rows SET v = $1, fence = $2::numeric(20,0) WHERE id = 1 AND fence <= $2::numeric(20,0)`,
	},
	fence.MySQL: {
		tables: []string{
			`CREATE TABLE IF NOT EXISTS bench_fence_writes (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB`,
			`CREATE TABLE IF NOT EXISTS bench_fence_rows (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB`,
			`INSERT IGNORE INTO bench_fence_rows (id, v) VALUES (1, -1)`,
		},
		insert:   `INSERT INTO bench_fence_writes (v) VALUES (?)`,
		admitted: `INSERT INTO bench_fence_writes (v) SELECT ? FROM DUAL WHERE ` + fence.AdmitCall(fence.MySQL, 2),
		update:   `UPDATE bench_fence_rows SET v = ? WHERE id = 1`,
		rowFence: `UPDATE bench_fence_rows SET v = ?, fence = CAST(? AS UNSIGNED) WHERE id = 1 AND fence <= CAST(? AS UNSIGNED)`,
	},
}

// startFenceDB starts the database d on one connection whose round trips
// are counted, with the fence table, the admit function and the tables
// written to.
func startFenceDB(d fence.Dialect, opts ...testdb.Option) (*fenceDB, error) {
	f := &fenceDB{dialect: d, trips: &roundTrips{}, sql: fenceSQLs[d]}
	var err error
	if d == fence.PostgreSQL {
		f.name = "PostgreSQL"
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
		f.name = "MariaDB"
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
	ddls := append(append([]string{fence.Schema(d)}, fence.AdmitFunction(d)...), f.sql.tables...)
	for _, ddl := range ddls {
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

// fenceForm is one way S8 writes: a write transaction fenced or not.
type fenceForm int

const (
	formInsert      fenceForm = iota // INSERT, no fence
	formAdmit                        // fence.Admit, then the INSERT
	formInStatement                  // the INSERT admitted in its own WHERE (fence.ExecAdmitted)
	formUpdate                       // UPDATE of one row, no fence
	formRowFence                     // the same UPDATE as the row-level variant
	fenceForms
)

// formNames are the forms' row labels, after the database's name.
var formNames = [fenceForms]string{"", " +fence.Admit", " +monolock_admit in the INSERT", " UPDATE", " UPDATE +row fence"}

// formBase is the form each form's cost is measured against.
var formBase = [fenceForms]fenceForm{formInsert, formInsert, formInsert, formUpdate, formUpdate}

// baseNames say what a fenced form is measured against.
var baseNames = map[fenceForm]string{formInsert: "the unfenced INSERT", formUpdate: "the unfenced UPDATE"}

// txn runs one write transaction of form.
func (f *fenceDB) txn(ctx context.Context, form fenceForm, v int) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	var res sql.Result
	switch form {
	case formInsert:
		res, err = tx.ExecContext(ctx, f.sql.insert, v)
	case formAdmit:
		if err := fence.Admit(ctx, tx, f.dialect, "bench", fenceToken); err != nil {
			return err // Admit rolled tx back
		}
		res, err = tx.ExecContext(ctx, f.sql.insert, v)
	case formInStatement:
		if res, err = fence.ExecAdmitted(ctx, tx, f.dialect, "bench", fenceToken, f.sql.admitted, v); err != nil {
			return err // ExecAdmitted rolled tx back
		}
	case formUpdate:
		res, err = tx.ExecContext(ctx, f.sql.update, v)
	case formRowFence:
		token := strconv.FormatUint(fenceToken, 10)
		args := []any{v, token}
		if f.dialect == fence.MySQL {
			args = append(args, token)
		}
		res, err = tx.ExecContext(ctx, f.sql.rowFence, args...)
	}
	if err == nil {
		err = oneRow(res)
	}
	if err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("%s%s: %w", f.name, formNames[form], err)
	}
	return tx.Commit()
}

// oneRow checks that a write wrote its one row: a fenced write that wrote
// none was refused, and S8 would measure nothing.
func oneRow(res sql.Result) error {
	n, err := res.RowsAffected()
	if err == nil && n != 1 {
		err = fmt.Errorf("the write changed %d rows, want 1", n)
	}
	return err
}

// fenceRun is what one variant measured over all rounds.
type fenceRun struct {
	lat     hist.Histogram
	trips   int64
	txns    int64
	medians []float64 // per round, µs
}

// runBatch runs n transactions of one form and records them.
func (f *fenceDB) runBatch(ctx context.Context, form fenceForm, n int, r *fenceRun) error {
	round := &hist.Histogram{}
	before := f.trips.count()
	for i := range n {
		start := time.Now()
		if err := f.txn(ctx, form, i); err != nil {
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

func (b *Run) s8() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S8", Name: "fence cost", Desc: fmt.Sprintf(
		"one-row write transactions (BEGIN, the write, COMMIT) on one connection to a throwaway PostgreSQL and MariaDB, each as testdb runs it (no flush at commit) and durable: an INSERT without a fence, with fence.Admit before it, and admitted in its own WHERE by monolock_admit (fence.ExecAdmitted); an UPDATE of one row without a fence and as the row-level variant (WHERE fence <= token); %d rounds of %d transactions of each, their order rotating, after %d of each to warm up",
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

// addFenceRows adds one pass's rows and each fenced form's cost in it.
func addFenceRows(sc *report.Scenario, name string, runs [fenceForms]*fenceRun) {
	for form, r := range runs {
		sc.Add(&report.Row{System: name + formNames[form], Figure: "write transaction (median)", Value: float64(r.lat.Percentile(50)) / 1e3, Unit: "µs",
			Lat: summaryOf(&r.lat), Lower: true,
			Note: fmt.Sprintf("%.2f round trips per transaction over %d", r.tripsPerTxn(), r.txns)})
	}
	for form, r := range runs {
		base := runs[formBase[form]]
		if r == base {
			continue
		}
		ratio := float64(r.lat.Percentile(50)) / float64(base.lat.Percentile(50))
		sc.Note("%s%s: %+.2f round trips per transaction and %+.1f %% to the median transaction (%.3f×; per round: %s; target at most %.2f×) against %s",
			name, formNames[form], r.tripsPerTxn()-base.tripsPerTxn(),
			(ratio-1)*100, ratio, roundRatios(base.medians, r.medians), fenceTarget, baseNames[formBase[form]])
	}
}

func (r *fenceRun) tripsPerTxn() float64 { return float64(r.trips) / float64(r.txns) }

// measure warms up, then runs rounds of n transactions of each form, their
// order rotating.
func (f *fenceDB) measure(ctx context.Context, rounds, n int) ([fenceForms]*fenceRun, error) {
	var runs [fenceForms]*fenceRun
	for form := range runs {
		runs[form] = &fenceRun{}
		for i := range max(n/10, 1) {
			if err := f.txn(ctx, fenceForm(form), i); err != nil {
				return runs, err
			}
		}
	}
	for round := range rounds {
		for _, form := range rotation(int(fenceForms), round) {
			if err := f.runBatch(ctx, fenceForm(form), n, runs[form]); err != nil {
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

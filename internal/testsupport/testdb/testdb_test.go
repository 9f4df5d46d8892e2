package testdb

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"slices"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestServersServeAndLeaveNothing starts each server, fast and durable,
// reads through the URL it gives the settings that decide whether a commit
// is flushed, and checks that Close removes its data.
func TestServersServeAndLeaveNothing(t *testing.T) {
	type durability struct {
		query string // one row per setting: on (flushed at commit) or not
		fast  []string
		sync  []string
	}
	pg := durability{
		query: `SELECT setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes') ORDER BY name`,
		fast:  []string{"off", "off", "off"},
		sync:  []string{"on", "on", "on"},
	}
	maria := durability{query: `SELECT @@innodb_flush_log_at_trx_commit`, fast: []string{"0"}, sync: []string{"1"}}
	cases := []struct {
		name    string
		bin     string
		start   func(...Option) (*Server, error)
		open    func(u *url.URL) (*sql.DB, error)
		durable bool
		want    durability
	}{
		{"postgres", "initdb", StartPostgres, openPostgres, false, pg},
		{"postgres durable", "initdb", StartPostgres, openPostgres, true, pg},
		{"mariadb", "mariadb-install-db", StartMariaDB, openMariaDB, false, maria},
		{"mariadb durable", "mariadb-install-db", StartMariaDB, openMariaDB, true, maria},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if _, err := binary(c.bin, pgBin); err != nil {
				if os.Getenv(EnvPostgres) != "" { // under withdb, as in make test: the servers are there
					t.Fatal(err)
				}
				t.Skip(err)
			}
			var opts []Option
			want := c.want.fast
			if c.durable {
				opts, want = []Option{Durable()}, c.want.sync
			}
			s, err := c.start(opts...)
			if err != nil {
				t.Fatal(err)
			}
			dir := s.dir
			u, err := url.Parse(s.URL)
			if err != nil {
				t.Fatal(err)
			}
			db, err := c.open(u)
			if err != nil {
				t.Fatal(err)
			}
			got, err := column(db, c.want.query)
			if err != nil {
				t.Fatalf("%s through %s: %v\n%s", c.want.query, s.URL, err, s.Log())
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s = %q, want %q (durable: %v)", c.want.query, got, want, c.durable)
			}
			db.Close()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("after Close, %s: %v (want it removed)", dir, err)
			}
		})
	}
}

func openPostgres(u *url.URL) (*sql.DB, error) { return sql.Open("pgx", u.String()) }

func openMariaDB(u *url.URL) (*sql.DB, error) {
	return sql.Open("mysql", fmt.Sprintf("%s@tcp(%s)%s", u.User.Username(), u.Host, u.Path))
}

// column runs query and returns its one column, row by row.
func column(db *sql.DB, query string) ([]string, error) {
	rows, err := db.Query(query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

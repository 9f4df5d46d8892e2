package testdb

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestServersServeAndLeaveNothing starts each server, runs a query through
// the URL it gives, and checks that Close removes its data.
func TestServersServeAndLeaveNothing(t *testing.T) {
	cases := []struct {
		name  string
		bin   string
		start func() (*Server, error)
		open  func(u *url.URL) (*sql.DB, error)
	}{
		{"postgres", "initdb", StartPostgres, func(u *url.URL) (*sql.DB, error) { return sql.Open("pgx", u.String()) }},
		{"mariadb", "mariadb-install-db", StartMariaDB, func(u *url.URL) (*sql.DB, error) {
			return sql.Open("mysql", fmt.Sprintf("%s@tcp(%s)%s", u.User.Username(), u.Host, u.Path))
		}},
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
			s, err := c.start()
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
			var one int
			if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1 through %s = %d, %v\n%s", s.URL, one, err, s.Log())
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

package testdb

// Option changes how a test server runs.
type Option func(*options)

type options struct {
	durable        bool
	maxConnections int // PostgreSQL's max_connections; 0: 50
}

// Durable starts the server with commits flushed and synced to disk, as a
// production server runs (PostgreSQL: fsync, synchronous_commit and
// full_page_writes on; MariaDB: innodb_flush_log_at_trx_commit=1). Without
// it the server skips those, since its data is thrown away: tests run
// faster, and a benchmark measures round trips and the server's work
// rather than the disk.
func Durable() Option { return func(o *options) { o.durable = true } }

// MaxConnections lets a PostgreSQL server take n client connections at
// once instead of 50, for a benchmark that opens one per worker.
func MaxConnections(n int) Option { return func(o *options) { o.maxConnections = n } }

func optionsOf(opts []Option) options {
	o := options{maxConnections: 50}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

package protocol_test

import (
	"bytes"
	"testing"

	"github.com/monolock/monolock/protocol"
)

var (
	benchAcquire   = protocol.AppendAcquire(nil, 2000, "nightly-import")
	benchHeartbeat = protocol.AppendHeartbeat(nil)
	benchAcquired  = protocol.AppendAcquired(nil, 0x0000000100000002)
	benchError     = protocol.AppendError(nil, protocol.CodeShuttingDown, "server shutting down")
)

// hotPaths are the per-frame operations of the server and the client. Each
// must not allocate: TestHotPathsDoNotAllocate checks it and the benchmarks
// report it.
func hotPaths(tb testing.TB) map[string]func() {
	var f protocol.Frame
	buf := make([]byte, 0, protocol.MaxErrorLen)
	var fb protocol.FrameBuffer
	rd := bytes.NewReader(nil)
	check := func(ok bool) {
		if !ok {
			tb.Fatal("hot path produced a wrong result")
		}
	}
	return map[string]func(){
		"DecodeClientAcquire": func() {
			n, err := protocol.DecodeClient(benchAcquire, &f)
			check(n == len(benchAcquire) && err == nil && f.LeaseMS == 2000)
		},
		"DecodeClientHeartbeat": func() {
			n, err := protocol.DecodeClient(benchHeartbeat, &f)
			check(n == 1 && err == nil && f.Type == protocol.TypeHeartbeat)
		},
		"DecodeServerAcquired": func() {
			n, err := protocol.DecodeServer(benchAcquired, &f)
			check(n == len(benchAcquired) && err == nil && f.Token == 0x0000000100000002)
		},
		"DecodeServerError": func() {
			n, err := protocol.DecodeServer(benchError, &f)
			check(n == len(benchError) && err == nil && f.Code == protocol.CodeShuttingDown)
		},
		"AppendAcquired": func() {
			buf = protocol.AppendAcquired(buf[:0], 0x0000000100000002)
			check(len(buf) == protocol.AcquiredLen)
		},
		"AppendAcquire": func() {
			buf = protocol.AppendAcquire(buf[:0], 2000, "nightly-import")
			check(len(buf) == len(benchAcquire))
		},
		"AppendError": func() {
			buf = protocol.AppendError(buf[:0], protocol.CodeShuttingDown, "server shutting down")
			check(len(buf) == len(benchError))
		},
		"AppendHeartbeatWaiting": func() {
			buf = protocol.AppendWaiting(protocol.AppendHeartbeat(buf[:0]))
			check(len(buf) == 2)
		},
		"ReadServerFrameAcquired": func() {
			rd.Reset(benchAcquired)
			err := protocol.ReadServerFrame(rd, &fb, &f)
			check(err == nil && f.Token == 0x0000000100000002)
		},
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocation counts")
	}
	for name, fn := range hotPaths(t) {
		if allocs := testing.AllocsPerRun(1000, fn); allocs != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, allocs)
		}
	}
}

func BenchmarkDecodeClientAcquire(b *testing.B) {
	var f protocol.Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(benchAcquire)))
	for b.Loop() {
		if n, err := protocol.DecodeClient(benchAcquire, &f); n != len(benchAcquire) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkDecodeClientHeartbeat(b *testing.B) {
	var f protocol.Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(benchHeartbeat)))
	for b.Loop() {
		if n, err := protocol.DecodeClient(benchHeartbeat, &f); n != 1 || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkDecodeServerAcquired(b *testing.B) {
	var f protocol.Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(benchAcquired)))
	for b.Loop() {
		if n, err := protocol.DecodeServer(benchAcquired, &f); n != len(benchAcquired) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkDecodeServerError(b *testing.B) {
	var f protocol.Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(benchError)))
	for b.Loop() {
		if n, err := protocol.DecodeServer(benchError, &f); n != len(benchError) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkAppendAcquired(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchAcquired)))
	for b.Loop() {
		buf = protocol.AppendAcquired(buf[:0], 0x0000000100000002)
	}
	if !bytes.Equal(buf, benchAcquired) {
		b.Fatalf("% x", buf)
	}
}

func BenchmarkAppendAcquire(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchAcquire)))
	for b.Loop() {
		buf = protocol.AppendAcquire(buf[:0], 2000, "nightly-import")
	}
	if !bytes.Equal(buf, benchAcquire) {
		b.Fatalf("% x", buf)
	}
}

func BenchmarkAppendError(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchError)))
	for b.Loop() {
		buf = protocol.AppendError(buf[:0], protocol.CodeShuttingDown, "server shutting down")
	}
	if !bytes.Equal(buf, benchError) {
		b.Fatalf("% x", buf)
	}
}

func BenchmarkReadServerFrameAcquired(b *testing.B) {
	var f protocol.Frame
	var fb protocol.FrameBuffer
	rd := bytes.NewReader(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchAcquired)))
	for b.Loop() {
		rd.Reset(benchAcquired)
		if err := protocol.ReadServerFrame(rd, &fb, &f); err != nil {
			b.Fatal(err)
		}
	}
}

package inproc_test

import (
	"context"
	"net"
	"testing"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/testsupport/inproc"
)

func TestStartServesAndStopStops(t *testing.T) {
	s := inproc.Start(t, eventloop.Config{})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatalf("the started server does not accept: %v", err)
	}
	_ = c.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Fatal("the stopped server still accepts")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

func TestStopAfterTheTestsOwnShutdown(t *testing.T) {
	s := inproc.Start(t, eventloop.Config{})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}

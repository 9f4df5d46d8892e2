package eventloop

import (
	"testing"
	"time"
)

// Config.TestWallClockOffset moves the owner's wall clock by the offset it
// reads at each reading, never the monotonic offset every lease and
// deadline counts in.
func TestWallClockOffset(t *testing.T) {
	clk := newFakeClock()
	offset := -time.Hour
	o := newOwner(Config{TestWallClockOffset: func() time.Duration { return offset }}, clk)
	wall, mono := o.clk.Now()
	if !wall.Equal(clk.wall.Add(-time.Hour)) || mono != clk.mono {
		t.Fatalf("offset -1h: wall %v mono %v, want %v and %v", wall, mono, clk.wall.Add(-time.Hour), clk.mono)
	}
	offset = 0
	clk.advance(time.Second)
	if wall, mono := o.clk.Now(); !wall.Equal(clk.wall) || mono != clk.mono {
		t.Fatalf("offset back to 0: wall %v mono %v, want %v and %v", wall, mono, clk.wall, clk.mono)
	}
	if plain := newOwner(Config{}, clk); plain.clk != Clock(clk) {
		t.Error("without the offset the owner's clock is not the one it was given")
	}
}

// With HA the offset is not applied to the loop's clock (the etcd side
// applies it to the first block).
func TestWallClockOffsetNotWithHA(t *testing.T) {
	clk := newFakeClock()
	o := newOwner(Config{HA: &HAConfig{TTL: 2 * time.Second}, TestWallClockOffset: func() time.Duration { return -time.Hour }}, clk)
	if o.clk != Clock(clk) {
		t.Error("with HA the owner's clock is not the one it was given")
	}
}

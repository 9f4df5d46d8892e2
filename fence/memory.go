package fence

import (
	"context"
	"sync"
)

// Memory is a Fence held in process memory: the rule itself, for tests,
// harnesses and single-process resources. The zero value is ready to use and
// safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	highest map[string]uint64
}

// Admit implements Fence.
func (m *Memory) Admit(_ context.Context, resource string, token uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	hi := m.highest[resource]
	if token == 0 || token < hi {
		return &StaleError{Resource: resource, Token: token, Highest: hi}
	}
	if m.highest == nil {
		m.highest = make(map[string]uint64)
	}
	m.highest[resource] = token
	return nil
}

// Highest returns the largest token admitted for resource (0 before any).
func (m *Memory) Highest(resource string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.highest[resource]
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterHA adds the series of a node of a cluster led through etcd
// (-ha-etcd): monolock_ha_leader and monolock_ha_terms_total. status reads
// the node's role at scrape time: whether it leads, and the terms it has
// won since it started.
func RegisterHA(reg prometheus.Registerer, status func() (leading bool, terms uint64)) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "monolock_ha_leader", Help: "1 while this node leads its cluster (failover through etcd), from its election to the end of its term; 0 while it follows."},
			func() float64 {
				if leading, _ := status(); leading {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "monolock_ha_terms_total", Help: "Terms this node has won since it started (failover through etcd)."},
			func() float64 { _, terms := status(); return float64(terms) }),
	)
}

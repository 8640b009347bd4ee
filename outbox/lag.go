package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lag reads each consumer's backlog from the database at each scrape, so
// that every instance reports the same shared truth.
type lag struct {
	relay                   *Relay
	pending, oldest, parked *prometheus.Desc
}

// Collectors are the relay's series, per consumer: the events not handled
// yet, the age of the oldest, and the events parked.
func (r *Relay) Collectors() []prometheus.Collector {
	label := []string{"consumer"}
	return []prometheus.Collector{&lag{relay: r,
		pending: prometheus.NewDesc("shop_outbox_pending", "Events a consumer has not handled yet, parked ones aside.", label, nil),
		oldest:  prometheus.NewDesc("shop_outbox_oldest_age_seconds", "Age of the oldest event a consumer has not handled yet, parked ones aside; 0 when none.", label, nil),
		parked:  prometheus.NewDesc("shop_outbox_parked", "Events a consumer failed at every attempt, waiting for staff.", label, nil),
	}}
}

func (l *lag) Describe(ch chan<- *prometheus.Desc) { ch <- l.pending; ch <- l.oldest; ch <- l.parked }

func (l *lag) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, c := range l.relay.consumers {
		db := l.relay.db.WithContext(ctx)
		var waiting, parked int64
		var first Event
		err := errors.Join(unhandled(db, c).Where("r.parked_at IS NULL").Count(&waiting).Error,
			unhandled(db, c).Where("r.parked_at IS NULL").Select("events.created_at").Order("events.seq").Limit(1).Scan(&first).Error,
			unhandled(db, c).Where("r.parked_at IS NOT NULL").Count(&parked).Error)
		if err != nil { // this consumer's series only: the rest of the page still serves
			ch <- prometheus.NewInvalidMetric(l.pending, err)
			continue
		}
		age := 0.0
		if waiting > 0 {
			age = time.Since(first.CreatedAt).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(l.pending, prometheus.GaugeValue, float64(waiting), c.Name())
		ch <- prometheus.MustNewConstMetric(l.oldest, prometheus.GaugeValue, age, c.Name())
		ch <- prometheus.MustNewConstMetric(l.parked, prometheus.GaugeValue, float64(parked), c.Name())
	}
}

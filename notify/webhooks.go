package notify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
)

// Webhooks owes the merchant's endpoint every event: its Handle records a
// delivery, in the inbox's transaction, and a Sender posts it.
type Webhooks struct{}

// Name is the consumer's name in the inbox.
func (Webhooks) Name() string { return "webhooks" }

// Handle records the event's delivery, once whatever the redeliveries.
func (w Webhooks) Handle(ctx context.Context, db *gorm.DB, ev outbox.Event) error {
	_, err := outbox.Once(ctx, db, w.Name(), ev.ID, func(tx *gorm.DB) error {
		return tx.Clauses(newDelivery).Create(delivery(ev, time.Now().UTC())).Error
	})
	return err
}

// HandleBatch records the events' deliveries in one statement; the relay
// records them in the inbox after. A delivery's id is its event's, so an
// event handed again (a crash before the inbox's mark) adds nothing.
func (w Webhooks) HandleBatch(ctx context.Context, db *gorm.DB, events []outbox.Event) []error {
	now := time.Now().UTC()
	rows := make([]*models.WebhookDelivery, len(events))
	for i, ev := range events {
		rows[i] = delivery(ev, now)
	}
	err := db.WithContext(ctx).Clauses(newDelivery).Create(&rows).Error
	outcomes := make([]error, len(events))
	if err != nil { // each on its own, so that one the database refuses holds up no other
		for i, ev := range events {
			outcomes[i] = w.Handle(ctx, db, ev)
		}
	}
	return outcomes
}

// newDelivery inserts a delivery unless its event has one: HandleBatch's,
// recorded before a crash kept the relay from marking the event.
var newDelivery = clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}

// delivery is the event's delivery, due at now.
func delivery(ev outbox.Event, now time.Time) *models.WebhookDelivery {
	return &models.WebhookDelivery{ID: ev.ID, EventType: ev.Type, OrderID: ev.OrderID, Body: ev.Body,
		State: models.DeliveryPending, NextAttemptAt: now, CreatedAt: now}
}

// Sender posts the deliveries that are due to the merchant's endpoint,
// signed, each by one sender at a time (a claim, until the attempt's
// timeout is past); a refusal (non-2xx) or a timeout is tried again after a
// capped exponential backoff, until MaxAttempts.
type Sender struct {
	DB  *gorm.DB
	URL string
	Key []byte
	// MaxAttempts, Timeout (of one POST), Backoff (before the second
	// attempt) and MaxBackoff (between any two).
	MaxAttempts         int
	Timeout             time.Duration
	Backoff, MaxBackoff time.Duration
	Logger              *slog.Logger
	Client              *http.Client
	// Now is the clock of claims and backoffs (not of the signatures'
	// timestamps, which the merchant checks); time.Now when nil.
	Now  func() time.Time
	name string
}

func (s *Sender) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC()
	}
	return s.Now().UTC()
}

// batch is how many due deliveries one pass reads.
const batch = 20

// Run sends what is due every interval until ctx ends.
func (s *Sender) Run(ctx context.Context, every time.Duration) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		if _, err := s.SendDue(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Error("send webhooks", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// SendDue makes one attempt of each delivery due now that no other sender
// holds, and reports how many it made.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	if s.name == "" {
		s.name = "sender-" + uuid.NewString()[:8]
	}
	now := s.now()
	var ids []string
	err := due(s.DB.WithContext(ctx), now).Where(deliveryClaim.Free(s.name, now)).
		Order("next_attempt_at").Limit(batch).Pluck("id", &ids).Error
	sent := 0
	for _, id := range ids {
		if err != nil || ctx.Err() != nil {
			break
		}
		var d *models.WebhookDelivery
		if d, err = s.claim(ctx, id); d != nil && err == nil {
			err = s.attempt(ctx, *d)
			sent++
		}
	}
	return sent, err
}

// due selects the pending deliveries whose attempt is due at now.
func due(db *gorm.DB, now time.Time) *gorm.DB {
	return db.Model(&models.WebhookDelivery{}).Where("state = ? AND next_attempt_at <= ?", models.DeliveryPending, now)
}

// deliveryClaim is a delivery's claim by the one sender that posts it.
var deliveryClaim = outbox.Lease{Holder: "claimed_by", Until: "claimed_until"}

// claim takes the delivery for this sender until its attempt is over, and
// reads it as it stands once taken; nil when it is not due any more (another
// sender took it, or made its attempt meanwhile).
func (s *Sender) claim(ctx context.Context, id string) (*models.WebhookDelivery, error) {
	now := s.now()
	until := now.Add(2*s.Timeout + 5*time.Second)
	taken, err := deliveryClaim.Take(due(s.DB.WithContext(ctx), now).Where("id = ?", id), s.name, now, until)
	if err != nil || taken == 0 {
		return nil, err
	}
	var d models.WebhookDelivery
	return &d, s.DB.WithContext(ctx).Take(&d, "id = ?", id).Error
}

// attempt posts the delivery once and records the attempt and the
// delivery's new state.
func (s *Sender) attempt(ctx context.Context, d models.WebhookDelivery) error {
	at := time.Now().UTC() // the signature's timestamp: the receiver holds it to its own clock
	status, postErr := s.post(ctx, d, at)
	record := models.WebhookAttempt{DeliveryID: d.ID, AttemptedAt: at, StatusCode: status}
	if postErr != nil {
		record.Error = postErr.Error()
	}
	attempts := d.Attempts + 1
	// attempts+1 in SQL: a post that a redelivery let go of may count too.
	update := map[string]any{"attempts": gorm.Expr("attempts + 1"), "claimed_by": nil, "claimed_until": nil}
	switch now := s.now(); {
	case postErr == nil:
		update["state"], update["finished_at"] = models.DeliveryDelivered, now
	case attempts >= s.MaxAttempts:
		update["state"], update["finished_at"] = models.DeliveryFailed, now
		s.Logger.Warn("webhook delivery failed: no more attempts", "delivery", d.ID, "attempts", attempts, "err", postErr)
	default:
		update["next_attempt_at"] = now.Add(outbox.Backoff(attempts, s.Backoff, s.MaxBackoff))
	}
	return s.DB.WithContext(context.WithoutCancel(ctx)).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&record).Error; err != nil {
			return err
		}
		res := tx.Model(&models.WebhookDelivery{}).Where("id = ? AND claimed_by = ?", d.ID, s.name).Updates(update)
		if res.Error != nil || res.RowsAffected == 1 {
			return res.Error
		}
		// Staff redelivered it while it was being posted (Redeliver lets go
		// of the claim): it stays due, to be posted again; the attempt counts.
		return tx.Model(&models.WebhookDelivery{}).Where("id = ?", d.ID).Update("attempts", gorm.Expr("attempts + 1")).Error
	})
}

// post sends the delivery, signed at, and reports the status answered;
// anything but a 2xx is an error.
func (s *Sender) post(ctx context.Context, d models.WebhookDelivery, at time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader([]byte(d.Body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	signedHeaders(req.Header, s.Key, d.ID, at, []byte(d.Body))
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the endpoint answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

package notify

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
)

// Webhooks owes the merchant's endpoint every event: its Handle records a
// delivery, in the inbox's transaction, and a Sender posts it.
type Webhooks struct{}

func (Webhooks) Name() string { return "webhooks" }

// Handle records the event's delivery, once whatever the redeliveries.
func (w Webhooks) Handle(ctx context.Context, db *gorm.DB, ev outbox.Event) error {
	return outbox.Once(ctx, db, w.Name(), ev.ID, func(tx *gorm.DB) error {
		return tx.Clauses(newDelivery).Create(delivery(ev, time.Now().UTC())).Error
	})
}

// HandleBatch records the events' deliveries in one statement, the relay
// the inbox after: a delivery's id is its event's, so one handed again adds nothing.
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

// newDelivery inserts a delivery unless its event has one already.
var newDelivery = clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}

func delivery(ev outbox.Event, now time.Time) *models.WebhookDelivery {
	return &models.WebhookDelivery{ID: ev.ID, EventType: ev.Type, OrderID: ev.OrderID, Body: ev.Body,
		State: models.DeliveryPending, NextAttemptAt: now, CreatedAt: now}
}

// Sender posts the deliveries due, signed, each claimed by one sender; a
// refusal (non-2xx) or a timeout is tried again after a Backoff, MaxAttempts times.
type Sender struct {
	DB                  *gorm.DB
	URL                 string
	Key                 []byte
	MaxAttempts         int
	Timeout             time.Duration // of one POST
	Backoff, MaxBackoff time.Duration // before the second attempt; between any two
	Logger              *slog.Logger
	Client              *http.Client
	// Now (required: time.Now in production) is the clock of claims and
	// backoffs, not of the signatures' timestamps, which the merchant holds to its own clock.
	Now  func() time.Time
	name string
}

// SendDue makes one attempt of each delivery due now (up to 20) that no
// other sender holds, and reports how many it made.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	if s.name == "" {
		s.name = "sender-" + uuid.NewString()[:8]
	}
	now := s.Now().UTC()
	var ids []string
	err := s.claimable(ctx, now).Order("next_attempt_at").Limit(20).Pluck("id", &ids).Error
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

// claimable selects the pending deliveries due at now that no other sender holds.
func (s *Sender) claimable(ctx context.Context, now time.Time) *gorm.DB {
	return s.DB.WithContext(ctx).Model(&models.WebhookDelivery{}).
		Where("state = ? AND next_attempt_at <= ?", models.DeliveryPending, now).Where(deliveryClaim.Free(s.name, now))
}

var deliveryClaim = outbox.Lease{Holder: "claimed_by", Until: "claimed_until"}

// claim takes the delivery until its attempt is over and reads it; nil when
// it is not due any more (another sender took it, or made its attempt).
func (s *Sender) claim(ctx context.Context, id string) (*models.WebhookDelivery, error) {
	now := s.Now().UTC()
	res := s.claimable(ctx, now).Where("id = ?", id).
		Updates(map[string]any{"claimed_by": s.name, "claimed_until": now.Add(2*s.Timeout + 5*time.Second)})
	if res.Error != nil || res.RowsAffected == 0 {
		return nil, res.Error
	}
	var d models.WebhookDelivery
	return &d, s.DB.WithContext(ctx).Take(&d, "id = ?", id).Error
}

// attempt posts the delivery once and records the attempt and the delivery's new state.
func (s *Sender) attempt(ctx context.Context, d models.WebhookDelivery) error {
	at := time.Now().UTC() // the signature's timestamp
	status, postErr := s.post(ctx, d, at)
	record := models.WebhookAttempt{DeliveryID: d.ID, AttemptedAt: at, StatusCode: status}
	if postErr != nil {
		record.Error = postErr.Error()
	}
	attempts := d.Attempts + 1
	// attempts+1 in SQL: a post that a redelivery let go of may count too.
	update := map[string]any{"attempts": gorm.Expr("attempts + 1"), "claimed_by": nil, "claimed_until": nil}
	switch now := s.Now().UTC(); {
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
		// Redelivered while posted (Redeliver let go of the claim): it stays
		// due, to be posted again; the attempt counts.
		return tx.Model(&models.WebhookDelivery{}).Where("id = ?", d.ID).Update("attempts", gorm.Expr("attempts + 1")).Error
	})
}

// post sends the delivery, signed at, and reports the status; anything but a 2xx is an error.
func (s *Sender) post(ctx context.Context, d models.WebhookDelivery, at time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader([]byte(d.Body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", d.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", Sign(s.Key, d.ID, at, []byte(d.Body)))
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

// Deliveries lists up to limit webhook deliveries, newest first, each with
// its attempts in order, from after p; more says whether any follow.
func Deliveries(ctx context.Context, db *gorm.DB, p *database.Position, limit int) ([]models.WebhookDelivery, bool, error) {
	return database.Page[models.WebhookDelivery](db.WithContext(ctx).Preload("AttemptLog", attemptsInOrder), p, limit)
}

func attemptsInOrder(db *gorm.DB) *gorm.DB { return db.Order("id") }

// Redeliver makes a delivery due at once, whatever its state, and lets go of
// a sender's claim: a post in flight records its attempt but cannot mark the
// delivery done over the redelivery. Unknown: models.ErrNotFound.
func Redeliver(ctx context.Context, tx *gorm.DB, id string) (models.WebhookDelivery, error) {
	var d models.WebhookDelivery
	res := tx.WithContext(ctx).Model(&d).Where("id = ?", id).Updates(map[string]any{"state": models.DeliveryPending,
		"next_attempt_at": time.Now().UTC(), "finished_at": nil, "claimed_by": nil, "claimed_until": nil})
	if res.Error != nil || res.RowsAffected == 0 {
		return d, cmp.Or(res.Error, error(models.ErrNotFound))
	}
	err := tx.WithContext(ctx).Preload("AttemptLog", attemptsInOrder).Take(&d, "id = ?", id).Error
	return d, err
}

// ParseSecret reads a Standard Webhooks secret: "whsec_" and the base64 of
// the key, at least 24 bytes of it.
func ParseSecret(s string) ([]byte, error) {
	raw, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New(`want "whsec_" followed by the base64 of a random key (e.g. whsec_$(head -c 32 /dev/urandom | base64))`)
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, errors.New(`the part after "whsec_" is not standard base64`)
	}
	if len(key) < 24 {
		return nil, errors.New("the key is shorter than 24 bytes: make it of at least 24 random bytes (32 is usual)")
	}
	return key, nil
}

// Sign is the Standard Webhooks signature (held to the specification's test
// vector): "v1," and the base64 of HMAC-SHA256, keyed, of "id.timestamp.body".
func Sign(key []byte, id string, at time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

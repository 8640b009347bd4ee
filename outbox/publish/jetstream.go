// Package publish holds the outbox's consumer that publishes events to NATS
// JetStream, so that the outbox, and what records events, needs no broker's client.
package publish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/shop/shop/outbox"
)

// JetStream publishes every event on <prefix>.<type> (shop.order.paid), its id
// as Nats-Msg-Id: a publish repeated after a crash between the ack and the
// inbox's mark is dropped by the stream's duplicate window.
type JetStream struct {
	conn   *nats.Conn
	js     jetstream.JetStream
	prefix string
}

// JetStreamConsumer is the JetStream consumer's name in the inbox.
const JetStreamConsumer = "nats"

// NewJetStream connects to NATS at url and creates the stream (subjects
// <prefix>.>) if missing. It reconnects for ever, backing off to 15 s, and
// buffers no publish meanwhile: the relay publishes again once NATS is back.
func NewJetStream(ctx context.Context, url, stream, prefix string, opts ...nats.Option) (*JetStream, error) {
	reconnect := func(n int) time.Duration { return outbox.Backoff(n, 250*time.Millisecond, 15*time.Second) }
	conn, err := nats.Connect(url, append([]nats.Option{nats.Name("shop outbox"), nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnect), nats.ReconnectBufSize(-1)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(conn, jetstream.WithPublishAsyncTimeout(10*time.Second))
	var found jetstream.Stream
	if err == nil {
		found, err = js.Stream(ctx, stream)
	}
	if err == nil { // a stream made for another prefix would refuse every publish, and hold up every event
		if s := found.CachedInfo().Config.Subjects; !slices.Contains(s, prefix+".>") && !slices.Contains(s, ">") {
			err = fmt.Errorf("the stream takes the subjects %v, not %s.>: "+
				"set NATS_SUBJECT_PREFIX to its prefix, or NATS_STREAM to another stream", s, prefix)
		}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil // another instance created it meanwhile
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("NATS stream %s: %w", stream, err)
	}
	return &JetStream{conn: conn, js: js, prefix: prefix}, nil
}

func (j *JetStream) Name() string { return JetStreamConsumer }

func (j *JetStream) Handle(ctx context.Context, db *gorm.DB, ev outbox.Event) error {
	return j.HandleBatch(ctx, db, []outbox.Event{ev})[0]
}

// HandleBatch publishes the events asynchronously, in order, and waits for
// the stream's acks until ctx ends (the relay's lease: sooner than the acks'
// timeout). While the server is away it answers outbox.ErrUnavailable for
// each, as for a publish the server's loss cut short.
func (j *JetStream) HandleBatch(ctx context.Context, _ *gorm.DB, events []outbox.Event) []error {
	outcomes := make([]error, len(events))
	if !j.conn.IsConnected() {
		for i := range outcomes {
			outcomes[i] = fmt.Errorf("NATS is %s: %w", j.conn.Status(), outbox.ErrUnavailable)
		}
		return outcomes
	}
	pause("before-publish", events[0].ID)
	acks := make([]jetstream.PubAckFuture, len(events))
	for i, ev := range events {
		msg := &nats.Msg{Subject: j.prefix + "." + ev.Type, Data: []byte(ev.Body)}
		acks[i], outcomes[i] = j.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID))
	}
	for i, ack := range acks {
		if ack != nil {
			outcomes[i] = j.acked(ctx, ack)
		}
	}
	pause("after-publish", events[0].ID)
	return outcomes
}

// acked is what came of one publish: nil once acked, even when ctx has
// ended meanwhile (an answer that came is read before the deadline is).
func (j *JetStream) acked(ctx context.Context, ack jetstream.PubAckFuture) error {
	var err error
	select {
	case <-ack.Ok():
		return nil
	case err = <-ack.Err():
	default:
		select {
		case <-ack.Ok():
			return nil
		case err = <-ack.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if !j.conn.IsConnected() {
		return fmt.Errorf("NATS is %s: %w: %w", j.conn.Status(), outbox.ErrUnavailable, err)
	}
	return err
}

func (j *JetStream) Close() { j.conn.Close() }

package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	settings "github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/payments"
)

// The instances of the shop that measure starts in the harness's own process,
// each on a loopback port. -shop and -peer drive a process of their own
// instead, through a shop that has only its url.

// shop is one server on a loopback port.
type shop struct {
	url    string
	server *handlers.Server
	http   *http.Server
	db     *gorm.DB     // its own connection pool, closed with it; nil when shared
	served atomic.Int64 // requests it has answered
}

// start serves the server, through handler when it is not nil.
func start(server *handlers.Server, handler http.Handler) (*shop, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &shop{url: "http://" + ln.Addr().String(), server: server}
	if handler == nil {
		handler = server
	}
	s.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.served.Add(1)
		handler.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

func (s *shop) stop(ctx context.Context) error {
	err := errors.Join(s.http.Shutdown(ctx), s.server.Close(ctx))
	if s.db != nil {
		err = errors.Join(err, database.Close(s.db))
	}
	return err
}

// startInstances starts the instance with the middleware that makes the
// keys (pushing its answers, as main runs the shop), with -instances the
// more that place orders, and the other instance that replays them. It
// returns those it started, also with an error.
func (b *bench) startInstances() (servers []*shop, err error) {
	pushing := b.deps
	pushing.PushAnswers = true // as main runs the shop
	if b.once, err = start(handlers.NewServer(pushing), nil); err != nil {
		return nil, err
	}
	servers = append(servers, b.once)
	b.placing = []*shop{b.once}
	for range b.cfg.Instances - 1 {
		s, err := b.startSecond(true)
		if err != nil {
			return servers, err
		}
		servers = append(servers, s)
		b.placing = append(b.placing, s)
	}
	if b.other, err = b.startSecond(true); err != nil {
		return servers, err
	}
	return append(servers, b.other), nil
}

// startReplayers starts, once the warm-up made its first order, the
// ceiling, which answers what that order was answered byte for byte, and
// the cold instance, and connects the client to the other and the cold
// one. It returns those it started, also with an error.
func (b *bench) startReplayers(ctx context.Context) (servers []*shop, err error) {
	ceiling := handlers.NewServer(b.deps)
	if b.ceiling, err = start(ceiling, ceilingOf(ceiling, b.first)); err != nil {
		return nil, err
	}
	servers = append(servers, b.ceiling)
	if b.cold, err = b.startSecond(false); err != nil {
		return servers, err
	}
	servers = append(servers, b.cold)
	return servers, b.connect(ctx, b.other, b.cold)
}

// startSecond starts another instance with the middleware: over the same
// database, on a connection pool of its own, as another process would be;
// taking the answers once pushes, or not.
func (b *bench) startSecond(push bool) (*shop, error) {
	db, err := b.cfg.open()
	if err != nil {
		return nil, err
	}
	deps := b.deps
	deps.DB, deps.Payments, deps.PushAnswers = db, simulated(db), push
	s, err := start(handlers.NewServer(deps), nil)
	if err != nil {
		return nil, errors.Join(err, database.Close(db))
	}
	s.db = db
	return s, nil
}

// stop stops the servers, which flushes the replay counts they keep.
func (b *bench) stop(servers []*shop) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.stop(ctx))
	}
	return errors.Join(errs...)
}

// shopDeps are an instance's over db, with the settings main runs with
// when none is set, and one SESSION_SECRET for every instance, as a
// deployment has (pushes are signed with a key derived from it).
func shopDeps(db *gorm.DB) handlers.Deps {
	def := settings.Default()
	return handlers.Deps{
		DB: db, Payments: simulated(db), TTL: def.IdempotencyTTL, Lease: def.IdempotencyLease, Wait: def.IdempotencyWait,
		ReplayCacheBytes: def.ReplayCacheBytes(), OrderExpiry: def.OrderExpiry, TokenTTL: def.TokenTTL,
		TokenCacheTTL: def.TokenCacheTTL, SessionIdle: def.SessionIdle, SessionMaxAge: def.SessionMaxAge,
		BcryptCost: bcrypt.MinCost, Logger: slog.New(slog.DiscardHandler), SessionSecret: []byte(uuid.NewString()),
	}
}

// simulated is a payments service on the simulated provider over db, as
// main builds one: the provider answers at once, so the phases measure the
// shop.
func simulated(db *gorm.DB) *billing.Service {
	def := settings.Default()
	return billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db, AuthExpiry: def.AuthExpiry},
		Lease: def.IdempotencyLease, AttemptTimeout: def.AttemptTimeout(), RollForward: def.RollForward,
		AuthExpiry: def.AuthExpiry, Logger: slog.New(slog.DiscardHandler)})
}

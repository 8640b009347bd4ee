package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"

	settings "github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
)

// fleet is the two instances, each on its own database link, the
// database, and what the faults and the RSS sampler saw.
type fleet struct {
	dir       string
	binary    string
	admin, db *gorm.DB
	schema    string
	instances [2]*instance

	mu       sync.Mutex
	faults   map[string]int
	problems []string
	rssPeak  [2]int64
	samples  int
}

// instance is one server process, restarted on a new port after each
// fault; traffic reaches whichever runs now.
type instance struct {
	name     string
	settings []string
	link     *testkit.Link
	current  atomic.Pointer[testkit.Process]
}

// normalLatency and spikeLatency are the provider's round trip, usually and
// during a spike.
const normalLatency, spikeLatency = "30ms", "1500ms"

func newFleet(cfg config) (*fleet, error) {
	f := &fleet{faults: map[string]int{}}
	var err error
	if f.dir, err = os.MkdirTemp("", "shop-soak-"); err != nil {
		return nil, err
	}
	log.Printf("building the server")
	if f.binary, err = testkit.Build(f.dir, false); err != nil {
		return nil, err
	}
	databaseURL, err := f.freshSchema(cfg.database)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(databaseURL)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	for i, name := range []string{"A", "B"} {
		in := &instance{name: name}
		if in.link, err = testkit.Listen(u.Host); err != nil {
			return nil, err
		}
		viaLink := *u
		viaLink.Host = in.link.Addr
		in.settings = []string{"DATABASE_URL=" + viaLink.String(), "SESSION_SECRET=" + hex.EncodeToString(secret),
			"IDEMPOTENCY_LEASE=3s", "IDEMPOTENCY_WAIT=2s", "PAYMENT_RECONCILE_EVERY=2s", "CREDENTIALS_PER_MINUTE=0", "MAX_PENDING_ORDERS=1000000",
			fmt.Sprintf("IDEMPOTENCY_CACHE_BYTES=%d", cfg.cacheBytes)}
		f.instances[i] = in
		if err := f.start(in, normalLatency); err != nil {
			return nil, err
		}
	}
	f.db, err = database.Open(databaseURL, database.Options{GroupCommit: settings.Default().GroupCommit})
	return f, err
}

// freshSchema makes a schema of its own in the database and returns the
// URL that uses it.
func (f *fleet) freshSchema(base string) (string, error) {
	var err error
	if f.admin, err = database.Open(base, database.Options{}); err != nil {
		return "", err
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	f.schema = "soak_" + hex.EncodeToString(suffix)
	if err := f.admin.Exec("CREATE SCHEMA " + f.schema).Error; err != nil {
		return "", err
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", f.schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (f *fleet) start(in *instance, latency string) error {
	p, err := testkit.Start(f.binary, f.dir, append(in.settings, "PAYMENT_LATENCY="+latency)...)
	if err != nil {
		return fmt.Errorf("instance %s: %w", in.name, err)
	}
	in.current.Store(p)
	return nil
}

// addr is where an instance serves now.
func (in *instance) addr() string { return in.current.Load().URL[len("http://"):] }

// dial connects to instance i, or to the other when i does not answer
// (it is being restarted).
func (f *fleet) dial(ctx context.Context, network string, i int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, f.instances[i].addr())
	if err != nil {
		return d.DialContext(ctx, network, f.instances[1-i].addr())
	}
	return c, nil
}

func (f *fleet) close() {
	for _, in := range f.instances {
		if in != nil {
			in.current.Load().Kill()
			in.link.Close()
		}
	}
	if f.db != nil {
		if sqlDB, err := f.db.DB(); err == nil {
			sqlDB.Close()
		}
	}
	if f.admin != nil {
		f.admin.Exec("DROP SCHEMA IF EXISTS " + f.schema + " CASCADE")
	}
	os.RemoveAll(f.dir)
}

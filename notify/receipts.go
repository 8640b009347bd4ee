// Package notify holds the outbox's consumers that tell people: the
// shopper's receipt email and the merchant's signed webhooks. Neither can be
// taken back, so each is sent at least once, with a stable id (Message-ID,
// webhook-id) derived from the event's, that makes a duplicate detectable.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/wneessen/go-mail"
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
)

//go:embed templates
var templateFiles embed.FS

var (
	textReceipt = texttemplate.Must(texttemplate.ParseFS(templateFiles, "templates/receipt.txt"))
	htmlReceipt = htmltemplate.Must(htmltemplate.ParseFS(templateFiles, "templates/receipt.html"))
)

// Receipts emails the shopper a receipt for each paid order and each succeeded refund.
type Receipts struct {
	Logger *slog.Logger // nil: slog.Default()
	Mailer Mailer
	// From is the sender's address; Domain the right-hand side of every
	// Message-ID; PublicURL where the shopper's order pages are.
	From, Domain, PublicURL string
}

// Types are the events a receipt is owed for (outbox.Selective).
func (Receipts) Types() []string { return []string{outbox.OrderPaid, outbox.OrderRefunded} }

func (Receipts) Name() string { return "receipts" }

// Handle sends the receipt, then records it (the inbox and a receipts row):
// a crash between the two sends it again, as the same message (Message-ID).
func (r Receipts) Handle(ctx context.Context, db *gorm.DB, ev outbox.Event) error {
	if !slices.Contains(r.Types(), ev.Type) {
		return nil
	}
	if done, err := outbox.Processed(ctx, db, r.Name(), ev.ID); err != nil || done {
		return err
	}
	msg, receipt, err := r.compose(ctx, db, ev)
	if err != nil {
		return err
	}
	if err := r.Mailer.Send(ctx, msg); err != nil {
		var refused *mail.SendError
		if errors.As(err, &refused) && !refused.IsTemp() && ctx.Err() == nil {
			// Refused for good (a 5xx: no such mailbox): sending it again would
			// only hold up later receipts; no receipt row says it was sent.
			cmp.Or(r.Logger, slog.Default()).Error("notify: the mail server refused a receipt for good; not sending it again",
				"event", ev.ID, "err", err)
			return nil
		}
		return fmt.Errorf("send the receipt of %s: %w", ev.ID, err)
	}
	afterSend(ev.ID)
	return outbox.Once(ctx, db, r.Name(), ev.ID, func(tx *gorm.DB) error { return tx.Create(&receipt).Error })
}

// MessageID is the Message-ID of the email for an event, without its
// angle brackets: the event's id in the characters a Message-ID allows.
func MessageID(eventID, domain string) string {
	return strings.NewReplacer(":", ".", "@", ".").Replace(eventID) + "@" + domain
}

type receiptData struct {
	Subject, Amount, Total, Refunded, OrderURL string
	Number                                     int64
	Refund                                     bool
	Lines                                      []receiptLine
}

type receiptLine struct {
	Quantity     int
	Name, Amount string
}

// compose writes the email of the event, and the row that records it.
func (r Receipts) compose(ctx context.Context, db *gorm.DB, ev outbox.Event) (*mail.Msg, models.Receipt, error) {
	data, to, err := r.read(ctx, db, ev)
	if err != nil {
		return nil, models.Receipt{}, fmt.Errorf("read the receipt of %s: %w", ev.ID, err)
	}
	var text, html bytes.Buffer
	if err := errors.Join(textReceipt.Execute(&text, data), htmlReceipt.Execute(&html, data)); err != nil {
		return nil, models.Receipt{}, err
	}
	msg := mail.NewMsg()
	if err := msg.From(r.From); err != nil {
		return nil, models.Receipt{}, fmt.Errorf("the sender %q: %w", r.From, err)
	}
	if err := msg.To(to); err != nil {
		return nil, models.Receipt{}, fmt.Errorf("the shopper's address %q: %w", to, err)
	}
	id := MessageID(ev.ID, r.Domain)
	msg.SetMessageIDWithValue(id)
	msg.SetDateWithValue(ev.CreatedAt)
	msg.Subject(data.Subject)
	msg.SetBodyString(mail.TypeTextPlain, text.String())
	msg.AddAlternativeString(mail.TypeTextHTML, html.String())
	return msg, models.Receipt{EventID: ev.ID, OrderID: ev.OrderID, MessageID: id, Recipient: to, SentAt: time.Now().UTC()}, nil
}

// read gathers the receipt's words: the order, its shopper, and the event's payment or refund.
func (r Receipts) read(ctx context.Context, db *gorm.DB, ev outbox.Event) (receiptData, string, error) {
	db = db.WithContext(ctx)
	var order models.Order
	var user models.User
	err := db.Preload("Items").Take(&order, "id = ?", ev.OrderID).Error
	if err == nil {
		err = db.Take(&user, "id = ?", order.UserID).Error
	}
	if err != nil {
		return receiptData{}, "", err
	}
	_, factID, _ := outbox.SplitEventID(ev.ID)
	data := receiptData{Number: order.Number, Total: models.Money(order.TotalCents, order.Currency),
		OrderURL: r.PublicURL + "/orders/" + order.ID, Refund: ev.Type == outbox.OrderRefunded}
	for _, it := range order.Items {
		data.Lines = append(data.Lines, receiptLine{it.Quantity, it.Name, models.Money(it.UnitPriceCents*int64(it.Quantity), order.Currency)})
	}
	if data.Refund {
		var refund models.Refund
		err = db.Take(&refund, "id = ? AND order_id = ?", factID, order.ID).Error
		data.Amount, data.Refunded = models.Money(refund.AmountCents, refund.Currency), models.Money(order.RefundedCents, order.Currency)
		data.Subject = fmt.Sprintf("Your refund of %s for order #%d", data.Amount, order.Number)
	} else {
		var payment models.Payment
		err = db.Take(&payment, "id = ? AND order_id = ?", factID, order.ID).Error
		data.Amount = models.Money(payment.AmountCents, payment.Currency)
		data.Subject = fmt.Sprintf("Your receipt for order #%d", order.Number)
	}
	return data, user.Email, err
}

// Mailer sends one message; sending it again sends the same, with the same Message-ID.
type Mailer interface {
	Send(ctx context.Context, msg *mail.Msg) error
}

// NewMailer is the mailer SMTP_URL names (smtp://[user:password@]host[:port],
// or smtps:// for TLS from the first byte); with none, the mail directory.
func NewMailer(smtpURL, dir string) (Mailer, error) {
	if smtpURL == "" {
		return Dir(dir), nil
	}
	u, err := url.Parse(smtpURL)
	if err != nil || u.Hostname() == "" || (u.Scheme != "smtp" && u.Scheme != "smtps") {
		return nil, errors.New("want smtp://[user:password@]host[:port] or smtps://…, such as smtp://127.0.0.1:2525")
	}
	opts := []mail.Option{mail.WithTimeout(30 * time.Second), mail.WithTLSPolicy(mail.TLSOpportunistic), mail.WithPort(25)}
	if u.Scheme == "smtps" {
		opts = append(opts, mail.WithSSL(), mail.WithPort(465))
	}
	if p := u.Port(); p != "" {
		port, _ := strconv.Atoi(p) // url.Parse lets only digits through; mail.WithPort refuses a port out of range
		opts = append(opts, mail.WithPort(port))
	}
	if u.User != nil {
		password, _ := u.User.Password()
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(u.User.Username()), mail.WithPassword(password))
	}
	client, err := mail.NewClient(u.Hostname(), opts...)
	if err != nil {
		return nil, err
	}
	return smtpMailer{client}, nil
}

type smtpMailer struct{ client *mail.Client }

func (m smtpMailer) Send(ctx context.Context, msg *mail.Msg) error {
	return m.client.DialAndSendWithContext(ctx, msg)
}

// Dir writes each message as an .eml file named by its Message-ID: a resend overwrites it.
type Dir string

func (d Dir) Send(_ context.Context, msg *mail.Msg) error {
	if err := os.MkdirAll(string(d), 0o750); err != nil {
		return err
	}
	name := strings.Trim(msg.GetMessageID(), "<>")
	name = strings.NewReplacer("/", "_", "\\", "_", "@", "_at_").Replace(name)
	return msg.WriteToFile(filepath.Join(string(d), name+".eml"))
}

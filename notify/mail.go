package notify

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"
)

// Mailer sends one message; sending it again sends the same message, with
// the same Message-ID.
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

// Dir writes each message as an .eml file, named by its Message-ID: a
// resend overwrites the file it wrote before.
type Dir string

func (d Dir) Send(_ context.Context, msg *mail.Msg) error {
	if err := os.MkdirAll(string(d), 0o750); err != nil {
		return err
	}
	name := strings.Trim(msg.GetMessageID(), "<>")
	name = strings.NewReplacer("/", "_", "\\", "_", "@", "_at_").Replace(name)
	return msg.WriteToFile(filepath.Join(string(d), name+".eml"))
}

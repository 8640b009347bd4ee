package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Setting is one row of the table: a field of Config and its tags.
type Setting struct {
	Name, Default, Doc string
	field              reflect.StructField
}

// Settings are the table's rows, in the order Config declares them.
func Settings() []Setting {
	t := reflect.TypeFor[Config]()
	var rows []Setting
	for i := range t.NumField() {
		f := t.Field(i)
		if name := f.Tag.Get("env"); name != "-" {
			rows = append(rows, Setting{Name: name, Default: f.Tag.Get("envDefault"), Doc: f.Tag.Get("doc"), field: f})
		}
	}
	return rows
}

// Load reads the settings from getenv and checks them. A value that is
// empty or blank is unset: the default applies. Every problem is reported
// at once, in one error of one line, each naming its setting.
func Load(getenv func(string) string) (Config, error) {
	rows := Settings()
	values := map[string]string{}
	for _, s := range rows {
		if v := strings.TrimSpace(getenv(s.Name)); v != "" {
			values[s.Name] = v
		}
	}
	var c Config
	var errs []error
	bad := map[string]bool{}
	var parse env.ParseError
	for _, e := range flatten(env.ParseWithOptions(&c, env.Options{Environment: values})) {
		if !errors.As(e, &parse) {
			errs = append(errs, e)
			continue
		}
		s := rows[slices.IndexFunc(rows, func(s Setting) bool { return s.field.Name == parse.Name })]
		bad[s.Name] = true
		errs = append(errs, s.refuse(values[s.Name], parse.Err)...)
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.PublicURL == "" {
		c.PublicURL = "http://localhost:" + strconv.Itoa(c.Port)
	}
	v := reflect.ValueOf(c)
	for _, s := range rows {
		if !bad[s.Name] && !s.valid(v.FieldByIndex(s.field.Index)) {
			bad[s.Name] = true
			errs = append(errs, s.refuse(values[s.Name], nil)...)
		}
	}
	errs = append(errs, flatten(c.check())...)
	if len(bad) == 0 {
		// How settings bound one another means something only once each parsed.
		errs = append(errs, flatten(c.checkTogether())...)
	}
	if len(errs) > 0 {
		return c, settingErrors(errs)
	}
	return c, nil
}

// refuse says why raw is not a value of s: want, when the row says what it
// wants, or else why (a list's errors, one per item), each naming s.
func (s Setting) refuse(raw string, why error) []error {
	if want := s.want(); want != "" || why == nil {
		return []error{fmt.Errorf("%s=%q: want %s", s.Name, raw, want)}
	}
	var errs []error
	for _, e := range flatten(why) {
		errs = append(errs, fmt.Errorf("%s: %w", s.Name, e))
	}
	return errs
}

// want is what a value of s should be: the want tag, or for a duration
// the kind its bound allows, with the default as an example.
func (s Setting) want() string {
	switch {
	case s.field.Tag.Get("want") != "":
		return s.field.Tag.Get("want")
	case s.field.Tag.Get("oneof") != "":
		words := strings.Fields(s.field.Tag.Get("oneof"))
		return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
	case s.field.Type == reflect.TypeFor[time.Duration]() && s.field.Tag.Get("min") == "1":
		return "a positive duration such as " + s.Default
	case s.field.Type == reflect.TypeFor[time.Duration]():
		return "a non-negative duration such as " + s.Default
	}
	return ""
}

// valid reports whether v keeps the row's tags: a number or duration within
// min (0 unless set) and max; a string one of oneof's words and of the is
// tag's format. (A log level, an int of its own type, has its own words.)
func (s Setting) valid(v reflect.Value) bool {
	switch {
	case v.CanInt() && (v.Type() == reflect.TypeFor[time.Duration]() || v.Type().PkgPath() == ""):
		lowest, highest := int64(0), int64(1<<63-1)
		if m, err := strconv.ParseInt(s.field.Tag.Get("min"), 10, 64); err == nil {
			lowest = m
		}
		if m, err := strconv.ParseInt(s.field.Tag.Get("max"), 10, 64); err == nil {
			highest = m
		}
		return v.Int() >= lowest && v.Int() <= highest
	case v.Kind() == reflect.String:
		words, is := s.field.Tag.Get("oneof"), s.field.Tag.Get("is")
		return (words == "" || slices.Contains(strings.Fields(words), v.String())) &&
			(is == "" || v.String() == "" || formats[is](v.String()))
	}
	return true
}

// flatten is err's errors, one by one, however they were joined.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var errs []error
	for _, e := range joined.Unwrap() {
		errs = append(errs, flatten(e)...)
	}
	return errs
}

// settingErrors are every configuration error at once, on one line, so
// that start-up fails with a single clear message.
type settingErrors []error

func (e settingErrors) Error() string {
	return strings.ReplaceAll(errors.Join(e...).Error(), "\n", "; ")
}

func (e settingErrors) Unwrap() []error { return e }

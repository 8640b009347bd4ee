package middleware

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"
)

// recorder buffers the handler's whole response: status, headers and body.
// Nothing reaches the client until the middleware has committed the outcome,
// so a client never sees an answer the server could forget.
type recorder struct {
	gin.ResponseWriter // the real writer, for what is not buffered
	header             http.Header
	status             int
	body               bytes.Buffer
	written            bool
}

func newRecorder(w gin.ResponseWriter) *recorder {
	return &recorder{ResponseWriter: w, header: http.Header{}, status: http.StatusOK}
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if code > 0 && !r.written {
		r.status = code
	}
}

func (r *recorder) WriteHeaderNow() { r.written = true }

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	return r.body.Write(b)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.written = true
	return r.body.WriteString(s)
}

func (r *recorder) Status() int { return r.status }

func (r *recorder) Size() int {
	if !r.written {
		return -1
	}
	return r.body.Len()
}

func (r *recorder) Written() bool { return r.written }

// Flush does nothing: the response is sent whole after the commit.
func (r *recorder) Flush() {}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("idempotent responses are buffered and cannot be hijacked")
}

func (r *recorder) Pusher() http.Pusher { return nil }

// replayedHeaders are the only headers stored for replay (never
// Set-Cookie). Cache-Control is part of the answer: a problem's no-store
// must hold for its replay too.
var replayedHeaders = []string{"Content-Type", "Location", "ETag", "Link", "Cache-Control"}

// replayable is what of header a replay may send, named as
// replayedHeaders spells them: what is stored, or pushed.
func replayable(header http.Header) http.Header {
	h := http.Header{}
	for _, name := range replayedHeaders {
		v := header[name] // as stored ("ETag")
		if len(v) == 0 {
			v = header.Values(name) // as a handler sets it ("Etag")
		}
		if len(v) > 0 {
			h[name] = v
		}
	}
	return h
}

func (r *recorder) stored() storedResponse {
	return storedResponse{Status: r.status, Headers: replayable(r.header), Body: r.body.Bytes()}
}

// send writes a response to the real writer.
func send(w gin.ResponseWriter, header http.Header, mark string, status int, body []byte) {
	dst := w.Header()
	for name, values := range header {
		dst[name] = slices.Clip(values) // an append by whoever comes next copies, never writes into a cached answer
	}
	if mark != "" {
		dst[mark] = replayedValue // header is a cached answer's: never set on it
	}
	dst.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.WriteHeaderNow()
	_, _ = w.Write(body)
}

// replayedValue is the value of ReplayedHeader; shared, never modified.
var replayedValue = []string{"true"}

package shopclient

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
)

// DecodeProblem reads an error answer as the one Problem type. Every answer
// of the API that is not 2xx is an RFC 9457 problem document; the generated
// response fields narrow it per status (KeyOrBodyMalformed, NotFound, …),
// and all of them decode as a Problem too, so one error path serves every
// call:
//
//	rsp, err := c.CreateOrderWithResponse(ctx, params, body)
//	if err == nil && rsp.JSON201 == nil {
//		p, err := shopclient.DecodeProblem(rsp.HTTPResponse, rsp.Body)
//		…
//	}
func DecodeProblem(rsp *http.Response, body []byte) (*Problem, error) {
	if rsp.StatusCode < 400 {
		return nil, fmt.Errorf("shopclient: %d is not an error answer", rsp.StatusCode)
	}
	if mediaType, _, _ := mime.ParseMediaType(rsp.Header.Get("Content-Type")); mediaType != "application/problem+json" {
		return nil, fmt.Errorf("shopclient: %d came as %q, not as a problem document", rsp.StatusCode, mediaType)
	}
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("shopclient: %d: the problem document does not decode: %w", rsp.StatusCode, err)
	}
	return &p, nil
}

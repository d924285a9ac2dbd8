package evaluation_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"

	"github.com/patchflow/patchflow/proving/platform"
)

// setFaults changes the mock's faults through its admin endpoint.
func (f *fixture) setFaults(faults platform.Faults) error {
	body, _ := json.Marshal(faults)
	req := httptest.NewRequest("POST", "/admin/faults", bytes.NewReader(body))
	w := httptest.NewRecorder()
	f.mock.ServeHTTP(w, req)
	if w.Code != 200 {
		return &faultError{w.Body.String()}
	}
	return nil
}

type faultError struct{ msg string }

func (e *faultError) Error() string { return e.msg }

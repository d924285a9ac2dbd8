package clients

import "encoding/json"

// UnmarshalUpdates is unmarshalUpdates, for the tests of package clients_test.
var UnmarshalUpdates = unmarshalUpdates

// The answer shapes' bounds: what a body of n bytes is expected to need
// before it is read, and what a body read into a buffer of capacity bytes
// needs decoded.
var (
	VMaaSAnticipate     = vmaasShape.anticipate
	VMaaSNeed           = vmaasShape.need
	InventoryAnticipate = inventoryShape.anticipate
	InventoryNeed       = inventoryShape.need
)

// DecodeProfilePage decodes an inventory answer as SystemProfile does and
// returns the page, for its live set to be measured.
func DecodeProfilePage(body []byte) (any, error) {
	var page systemProfilePage
	err := json.Unmarshal(body, &page)
	return &page, err
}

// MaxAnswerBytes is maxAnswerBytes.
const MaxAnswerBytes = maxAnswerBytes

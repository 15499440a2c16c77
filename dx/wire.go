package dx

import (
	"encoding/json"
	"fmt"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

// What crosses the wire: payloads as duroxide encodes them, versions.

// DuroxideVersion is the version of duroxide's semantics this engine reproduces, stamped as
// duroxide_version on every event it writes (so capability filters see which engine wrote an
// execution). Releases of your own code are told apart by orchestration versions, not by this.
const DuroxideVersion = "0.1.30"

// Raw is a payload passed as it is: as an input it is sent without JSON encoding, as a result type it
// receives the stored text without decoding. Use it for payloads that are not JSON or that you
// decode yourself.
type Raw string

// encode encodes a payload as JSON text the way duroxide stores it (no HTML escaping).
func encode(v any) (string, error) {
	switch r := v.(type) {
	case Raw:
		return string(r), nil
	case json.RawMessage:
		return string(r), nil
	}
	b, err := provider.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("dx: input %T does not encode as JSON (%w): %w", v, ErrInvalidInput, err)
	}
	return string(b), nil
}

func parseVersion(v string) (*semver.Version, error) {
	sv, err := semver.StrictNewVersion(v)
	if err != nil {
		return nil, fmt.Errorf("dx: version %q is not a semantic version like 1.2.0: %w (%w)", v, err, ErrInvalidInput)
	}
	return sv, nil
}

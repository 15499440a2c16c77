// Package provider is the Go contract of duroxide's storage Provider: the interfaces a store
// implements (Provider, Admin), the values it stores and returns, and the errors it reports.
//
// It ports duroxide 0.1.29's providers module (plus 0.1.31's parent_execution_id fields and
// narrowed abandon) to idiomatic Go: context first, time.Duration for durations (0 = none),
// structs instead of tuples, (nil, nil) for "nothing to fetch".
//
// # Wire format
//
// Event and WorkItem (and ErrorDetails inside them) marshal with encoding/json to exactly the JSON
// duroxide's serde writes: Event is an envelope with its kind flattened under "type"; WorkItem and
// ErrorDetails are externally tagged ({"Variant":{...}}); null-versus-omitted follows duroxide
// field by field. Use Marshal instead of json.Marshal when the bytes must be identical to serde's
// (json.Marshal escapes '<', '>' and '&'). Unknown variants, unknown event types and malformed JSON
// are decode errors, never panics.
//
// # Choices where duroxide's texts leave behaviour open
//
//   - A DispatcherCapabilityFilter matches a version in any of its ranges (duroxide's providers
//     honour only the first range).
//   - A poll timeout of 0 asks a long-polling provider for an immediate answer.
//   - ExecutionMetadata uses empty strings for "not given"; only Output, which may legitimately be
//     empty, is a pointer.
package provider

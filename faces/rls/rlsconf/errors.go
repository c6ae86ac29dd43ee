package rlsconf

import "errors"

// The reasons a configuration file is rejected, one per rule of
// envoyproxy/ratelimit's loader. A [*FileError] wraps one of them with the
// details; test with errors.Is.
var (
	// ErrYAML: the file does not parse as YAML, or a field has the wrong
	// type for the typed form (requests_per_unit: -1, shadow_mode: "true").
	ErrYAML = errors.New("invalid yaml")
	// ErrNonStringKey: a mapping key is not a string (0.25:, true:, n:).
	ErrNonStringKey = errors.New("key is not a string")
	// ErrUnknownKey: a mapping key is not one of envoyproxy/ratelimit's keys.
	ErrUnknownKey = errors.New("unknown key")
	// ErrNonMapList: a list holds something other than mappings.
	ErrNonMapList = errors.New("list of something other than mappings")
	// ErrLeafType: a scalar is not a string, an integer, a boolean or null.
	ErrLeafType = errors.New("value of an unsupported type")
	// ErrEmptyDomain: the file has no domain, or an empty one.
	ErrEmptyDomain = errors.New("empty domain")
	// ErrEmptyKey: a descriptor has no key, or an empty one.
	ErrEmptyKey = errors.New("descriptor has empty key")
	// ErrDuplicateKey: two descriptors at one level share a composite key.
	ErrDuplicateKey = errors.New("duplicate descriptor composite key")
	// ErrBadUnit: a rate_limit without unlimited has no valid unit.
	ErrBadUnit = errors.New("invalid rate limit unit")
	// ErrUnlimitedWithUnit: an unlimited rate_limit names a valid unit.
	ErrUnlimitedWithUnit = errors.New("unit given with unlimited")
	// ErrEmptyReplaces: a replaces entry has an empty name.
	ErrEmptyReplaces = errors.New("empty replaces entry")
	// ErrSelfReplaces: a rule replaces its own name.
	ErrSelfReplaces = errors.New("rule replaces itself")
	// ErrShareThreshold: share_threshold on a descriptor without '*'.
	ErrShareThreshold = errors.New("share_threshold without a wildcard")
	// ErrMetadata: metadata that does not convert to a protobuf Struct.
	ErrMetadata = errors.New("invalid metadata")
)

// FileError is a configuration file that was rejected, or could not be
// read. Path is the file's path as given to [LoadDir] (joined with the
// directory) or its [File.Name]; Err wraps one of the sentinel errors of this
// package, or the error from the file system.
type FileError struct {
	Path string
	Err  error
}

// Error returns "path: reason".
func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *FileError) Unwrap() error { return e.Err }

package rlsconf

import (
	"fmt"
	"unicode/utf8"
)

// convertMetadata turns a descriptor's metadata into what a protobuf Struct
// is made of, as envoyproxy/ratelimit does before structpb.NewStruct: nested
// mappings get string keys (fmt %v), and every string, key or value, must be
// valid UTF-8 (a !!binary scalar may not be). Empty metadata is nil.
func convertMetadata(m map[string]any) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return convertMap(m)
}

// convertMap converts one mapping of metadata; see convertMetadata.
func convertMap[K comparable](m map[K]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		sk := fmt.Sprintf("%v", k)
		if !utf8.ValidString(sk) {
			return nil, fmt.Errorf("%w: key %q is not UTF-8", ErrMetadata, sk)
		}
		cv, err := convertValue(v)
		if err != nil {
			return nil, err
		}
		out[sk] = cv
	}
	return out, nil
}

// convertValue converts one metadata value; see convertMetadata.
func convertValue(v any) (any, error) {
	switch v := v.(type) {
	case string:
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: %q is not UTF-8", ErrMetadata, v)
		}
	case map[any]any:
		return convertMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			ce, err := convertValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = ce
		}
		return out, nil
	}
	return v, nil
}

// Package rlsconf reads envoyproxy/ratelimit's YAML configuration unchanged
// and answers which rule applies to a descriptor, exactly as
// envoyproxy/ratelimit (snapshot f2fb157) does.
//
// # Files
//
// [LoadDir] reads every *.yaml and *.yml file directly in a directory, in
// name order; names starting with '.' are skipped (so the ..data link and
// ..2024_… directory of a Kubernetes ConfigMap volume are not read twice),
// subdirectories are not read, and symbolic links to files are followed.
// envoyproxy/ratelimit itself reads every file below its runtime directory
// whatever its name, recursively, and skips dotfiles only with
// RUNTIME_IGNOREDOTFILES=true; tollgate's narrower rule loads the same
// configuration from any directory envoyproxy/ratelimit is normally given.
//
// Each file is parsed twice with gopkg.in/yaml.v2, the library and version
// envoyproxy/ratelimit uses: once into a generic map to check its keys, once
// into the typed form. So every scalar is read the same way: a string field
// keeps the raw text (value: 0123 is "0123", yes is "yes", 0x1F is "0x1F",
// ~ is empty), a repeated mapping key silently keeps the last value, and a
// key such as y or n is a boolean, not a string.
//
// # What a file must satisfy
//
// A file is rejected, with a [*FileError] naming it and wrapping one of the
// sentinel errors below, for: YAML that does not parse or does not fit the
// typed form ([ErrYAML], e.g. requests_per_unit: -1 or "5"); a mapping key
// that is not a string ([ErrNonStringKey]); a key outside envoyproxy/ratelimit's
// list of known keys, at any depth except inside metadata ([ErrUnknownKey]; the
// list is flat, so a known key in the wrong place, such as unit at the top,
// is accepted and ignored, as there); a list holding anything but mappings
// ([ErrNonMapList]); a scalar that is not a string, an integer, a boolean or
// null, such as 1.5, .inf or an integer above 2⁶³−1 ([ErrLeafType]); an
// empty or missing domain ([ErrEmptyDomain]); a descriptor with an empty key
// ([ErrEmptyKey]); two descriptors with the same composite key at one level
// ([ErrDuplicateKey]); a unit that is missing or not one of second, minute,
// hour, day, week, month, year in any case ([ErrBadUnit]); a valid unit
// together with unlimited: true ([ErrUnlimitedWithUnit]; an invalid or empty
// one is accepted there, as envoyproxy/ratelimit accepts it); an empty name
// in replaces ([ErrEmptyReplaces]) or the rule's own name ([ErrSelfReplaces]);
// share_threshold on a descriptor whose composite key has no '*'
// ([ErrShareThreshold]); metadata that cannot become a protobuf Struct, that
// is, a string or key that is not valid UTF-8 ([ErrMetadata]).
//
// Within one file the checks run in envoyproxy/ratelimit's order: keys
// first, then the typed parse, then the domain, then each descriptor in
// document order, depth first. envoyproxy/ratelimit walks a Go map for the
// key checks, so a file with two different key problems may name either;
// this package walks keys in sorted order and always names the same one.
//
// # One domain in several files
//
// Files that name the same domain are merged, as envoyproxy/ratelimit does
// with MERGE_DOMAIN_CONFIG=true (without it, it rejects the second file).
// The merge is shallow: each file's top-level descriptors are added to the
// domain's top level, and a composite key that an earlier file already
// defined there is a duplicate ([ErrDuplicateKey], naming the later file),
// even when the two would nest different children. Wildcard patterns at the
// top level are tried in the order their files were loaded (name order
// here). envoyproxy/ratelimit loads the files in Go map order, which changes
// from one load to the next, so a configuration whose answers depend on
// that order (two top-level patterns from different files matching one
// value) is ambiguous there; tollgate's name order makes it deterministic.
//
// # Matching
//
// [Config.Match] walks one descriptor's entries down the tree. At each level
// it tries the composite key entry.Key+"_"+entry.Value exactly, then the
// level's patterns (composite keys containing '*') in load order, each '*'
// matching any run of characters, then entry.Key alone. Patterns are matched
// against the whole composite string, key included, exactly as
// envoyproxy/ratelimit matches them. A rule applies only when it sits at the
// depth of the descriptor's last entry (README Example 4); a matched level
// with no rate_limit and no children whitelists the descriptor.
//
// Everything here is immutable after loading and safe for concurrent use.
package rlsconf

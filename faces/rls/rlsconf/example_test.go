package rlsconf_test

import (
	"fmt"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

func ExampleConfig_Match() {
	c, err := rlsconf.Parse([]rlsconf.File{{Name: "edge.yaml", Data: []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 100}
`)}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range []rlsconf.Entry{
		{Key: "remote_address", Value: "50.0.0.1"},
		{Key: "remote_address", Value: "50.0.0.5"},
		{Key: "path", Value: "/files/a.pdf"},
	} {
		es := []rlsconf.Entry{e}
		r, _ := c.Match("edge", es)
		fmt.Printf("%s=%s: %d per %v, counted under %s<window start>\n",
			e.Key, e.Value, r.RequestsPerUnit, r.Unit, rlsconf.AppendCounterKey(nil, "edge", es, r))
	}
	// Output:
	// remote_address=50.0.0.1: 10 per SECOND, counted under edge_remote_address_50.0.0.1_<window start>
	// remote_address=50.0.0.5: 0 per SECOND, counted under edge_remote_address_50.0.0.5_<window start>
	// path=/files/a.pdf: 100 per HOUR, counted under edge_path_/files/*_<window start>
}

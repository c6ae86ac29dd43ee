package rlsconf_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// readme reads files of testdata/readme: the configurations of
// envoyproxy/ratelimit's README, Examples 1 to 11 (the second form of
// Example 4 is in testdata/readme4b).
func readme(t *testing.T, names ...string) []rlsconf.File {
	t.Helper()
	return testFiles(t, "readme", names...)
}

func TestReadmeExamplesLoadTogether(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.LoadDir(filepath.Join("testdata", "readme"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"edge_proxy_per_ip", "example10", "example10_wildcard", "example11", "example11_metrics",
		"example4", "example6", "example7", "example8", "example9", "internal", "messaging", "mongo_cps"}
	if got := c.Domains(); !slices.Equal(got, want) {
		t.Errorf("Domains() = %q\nwant %q", got, want)
	}
}

func TestReadmeExamples(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files []rlsconf.File
		cases []matchCase
	}{
		{"1", readme(t, "example1.yaml"), []matchCase{
			{"mongo_cps", "database=users", "mongo_cps.database_users 500/SECOND"},
			{"mongo_cps", "database=default", "mongo_cps.database_default 500/SECOND"},
			{"mongo_cps", "database=other", "none"},
		}},
		{"2", readme(t, "example2.yaml"), []matchCase{
			{"messaging", "message_type=marketing,to_number=2061111111", "messaging.message_type_marketing.to_number 5/DAY"},
			{"messaging", "to_number=2061111111", "messaging.to_number 100/DAY"},
			{"messaging", "message_type=marketing", "none"},
			{"messaging", "message_type=other,to_number=2061111111", "none"},
		}},
		{"3", readme(t, "example3.yaml"), []matchCase{
			{"edge_proxy_per_ip", "remote_address=50.0.0.1", "edge_proxy_per_ip.remote_address 10/SECOND"},
			{"edge_proxy_per_ip", "remote_address=50.0.0.5", "edge_proxy_per_ip.remote_address_50.0.0.5 0/SECOND"},
		}},
		{"4, one level", readme(t, "example4.yaml"), []matchCase{
			{"example4", "key=value,subkey=subvalue", "none"},
			{"example4", "key=value", "example4.key_value 300/SECOND"},
		}},
		{"4, two levels", testFiles(t, "readme4b", "example4.yaml"), []matchCase{
			{"example4", "key=value,subkey=subvalue", "example4.key_value.subkey 300/SECOND"},
			{"example4", "key=value", "none"},
		}},
		{"5", readme(t, "example5.yaml"), []matchCase{
			{"internal", "ldap=anything", "unlimited internal.ldap"},
			{"internal", "azure=anything", "internal.azure 100/MINUTE"},
		}},
		{"6", readme(t, "example6.yaml"), []matchCase{
			{"example6", "service=auth-service,user=user-a", "example6.service.user_user-a 10/SECOND"},
			{"example6", "service=auth-service,user=user-b", "example6.service.user_user-b 20/SECOND"},
			{"example6", "service=auth-service,user=user-c", "none"},
		}},
		{"7", readme(t, "example7.yaml"), []matchCase{
			{"example7", "key_1=value_1,user=bkthomps", "example7.key_1_value_1.user_bkthomps 5/SECOND specific_limit"},
			{"example7", "key_2=value_2,user=bkthomps", "example7.key_2_value_2.user_bkthomps 10/SECOND"},
		}},
		{"8", readme(t, "example8.yaml"), []matchCase{
			{"example8", "key1=unspecified_value", "example8.key1 10/MINUTE"},
			{"example8", "key1=value1", "example8.key1_value1 20/MINUTE"},
		}},
		{"9", readme(t, "example9-1.yaml", "example9-2.yaml", "example9-3.yaml"), []matchCase{
			{"example9", "key1=value1", "example9.key1_value* 20/MINUTE"},
			{"example9", "key1=valueXYZ", "example9.key1_value* 20/MINUTE"},
			{"example9", "key1=valu", "none"},
			{"example9", "path=/api/123/action", "example9.path_/api/*/action 20/MINUTE"},
			{"example9", "path=/api/user-id/action", "example9.path_/api/*/action 20/MINUTE"},
			{"example9", "path=/api/123/other", "none"},
			{"example9", "route=/api/v1/resource/123/action", "example9.route_/api/*/resource/*/action 20/MINUTE"},
			{"example9", "route=/api/v2/resource/456/action", "example9.route_/api/*/resource/*/action 20/MINUTE"},
			{"example9", "route=/api/v2/resource/456", "none"},
		}},
		{"10", readme(t, "example10.yaml", "example10-wildcard.yaml"), []matchCase{
			{"example10", "route=api,http_method=GET,subject_id=123", "example10.route.http_method.subject_id 60/MINUTE"},
			{"example10_wildcard", "user=alice,action=readfile,resource=documents", "example10_wildcard.user.action_read*.resource 100/MINUTE"},
			{"example10_wildcard", "user=alice,action=write,resource=documents", "none"},
		}},
		{"11", readme(t, "example11.yaml", "example11-metrics.yaml"), []matchCase{
			{"example11", "files=files/a.pdf", "example11.files_files/* 10/HOUR"},
			{"example11", "files_no_share=files_no_share/a.pdf", "example11.files_no_share_files_no_share/* 10/HOUR"},
			{"example11_metrics", "route=api/v1,method=GET", "example11_metrics.route_api/*.method 60/MINUTE"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runMatches(t, tc.files, tc.cases)
		})
	}
}

func TestReadmeExample11SharesOneCounter(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.Parse(readme(t, "example11.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	key := func(e string) string {
		es := entries(e)
		r, _ := c.Match("example11", es)
		return string(rlsconf.AppendCounterKey(nil, "example11", es, r))
	}
	if a, b := key("files=files/a.pdf"), key("files=files/b.csv"); a != b {
		t.Errorf("shared: %q != %q", a, b)
	}
	if a, b := key("files_no_share=files_no_share/a.pdf"), key("files_no_share=files_no_share/b.csv"); a == b {
		t.Errorf("not shared, yet one counter %q", a)
	}
}

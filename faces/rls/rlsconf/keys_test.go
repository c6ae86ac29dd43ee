package rlsconf_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// keyCase is one descriptor with its counter key (envoyproxy/ratelimit's
// cache key without prefix and window start) and stats name.
type keyCase struct {
	entries, counter, stats string
}

// runKeys checks AppendCounterKey, KeyValues and StatsKey for each case.
func runKeys(t *testing.T, c *rlsconf.Config, domain string, cases []keyCase) {
	t.Helper()
	for _, tc := range cases {
		es := entries(tc.entries)
		r, _ := c.Match(domain, es)
		if r == nil {
			t.Errorf("%s: no rule", tc.entries)
			continue
		}
		if got := string(rlsconf.AppendCounterKey(nil, domain, es, r)); got != tc.counter {
			t.Errorf("%s: AppendCounterKey = %q, want %q", tc.entries, got, tc.counter)
		}
		var b strings.Builder
		b.WriteString(domain + "_")
		for i, v := range r.KeyValues(es) {
			b.WriteString(es[i].Key + "_" + v + "_")
		}
		if got := b.String(); got != tc.counter {
			t.Errorf("%s: KeyValues give %q, want %q", tc.entries, got, tc.counter)
		}
		if got := r.StatsKey(es); got != tc.stats {
			t.Errorf("%s: StatsKey = %q, want %q", tc.entries, got, tc.stats)
		}
	}
}

func TestKeysShareThreshold(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.Parse(fixture(t, "share_threshold.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runKeys(t, c, "test-domain", []keyCase{
		{"files=files/a.pdf", "test-domain_files_files/*_", "test-domain.files_files/*"},
		{"files=files/b.csv", "test-domain_files_files/*_", "test-domain.files_files/*"},
		{"route=api/v1,method=GET", "test-domain_route_api/*_method_GET_", "test-domain.route_api/*.method"},
		{"service=svc/user,endpoint=get", "test-domain_service_svc/*_endpoint_get_", "test-domain.service_svc/*.endpoint_get"},
		{"nested=parent,files=nested/file1.txt", "test-domain_nested_parent_files_nested/*_", "test-domain.nested_parent.files_nested/*"},
		{"files=top/file1.txt,files=nested/file1.txt", "test-domain_files_top/*_files_nested/*_", "test-domain.files_top/*.files_nested/*"},
		{"path=path/foo,file=file/doc1,type=pdf", "test-domain_path_path/*_file_file/doc1_type_pdf_", "test-domain.path_path/*.file_file/*.type"},
		{"user=user/alice,resource=res/file1,action=read", "test-domain_user_user/*_resource_res/*_action_read_", "test-domain.user_user/*.resource_res/*.action"},
		{"file=test1", "test-domain_file_test1_", "test-domain.file_test1"},
		{"file=test23", "test-domain_file_test*_", "test-domain.file_test*"},
		{"midpath=/api-beta-v1", "test-domain_midpath_/api*v1_", "test-domain.midpath_/api*v1"},
		{"multiroute=svceprpc", "test-domain_multiroute_svc*ep*rpc_", "test-domain.multiroute_svc*ep*rpc"},
		{"midroute=/api/v2", "test-domain_midroute_/api*v2_", "test-domain.midroute_/api*v2"},
		{"tenant=t99prod,resource=resBBBv2", "test-domain_tenant_t*prod_resource_res*v2_", "test-domain.tenant_t*prod.resource_res*v2"},
		// A value equal to the pattern matches exactly: the same key.
		{"files=files/*", "test-domain_files_files/*_", "test-domain.files_files/*"},
	})
}

func TestKeysWildcardAndMetrics(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.Parse(fixture(t, "wildcard.yaml", "basic_config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runKeys(t, c, "test-domain", []keyCase{
		// Without share_threshold every value has its own counter, and the
		// stats roll up under the pattern.
		{"wild=foo1", "test-domain_wild_foo1_", "test-domain.wild_foo*"},
		{"wild=foo2", "test-domain_wild_foo2_", "test-domain.wild_foo*"},
		{"nestedWild=val1,wild=goo2", "test-domain_nestedWild_val1_wild_goo2_", "test-domain.nestedWild_val1.wild_goo*"},
		{"noVal=foo1", "test-domain_noVal_foo1_", "test-domain.noVal"},
		{"midWild=bar123b", "test-domain_midWild_bar123b_", "test-domain.midWild_bar*b"},
		{"key1=value1,subkey1=something", "test-domain_key1_value1_subkey1_something_", "test-domain.key1_value1.subkey1"},
		{"key7=unspecified_value", "test-domain_key7_unspecified_value_", "test-domain.key7_unspecified_value"},
		{"key7=", "test-domain_key7__", "test-domain.key7_"},
	})
}

func TestKeysReadmeMetrics(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.Parse(readme(t, "example8.yaml", "example10.yaml", "example10-wildcard.yaml", "example11-metrics.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runKeys(t, c, "example8", []keyCase{
		{"key1=unspecified_value", "example8_key1_unspecified_value_", "example8.key1_unspecified_value"},
		{"key1=unspecified_value2", "example8_key1_unspecified_value2_", "example8.key1_unspecified_value2"},
		{"key1=value1", "example8_key1_value1_", "example8.key1_value1"},
	})
	runKeys(t, c, "example10", []keyCase{
		{"route=api,http_method=GET,subject_id=123", "example10_route_api_http_method_GET_subject_id_123_", "example10.route_api.http_method_GET.subject_id"},
		{"route=web,http_method=POST,subject_id=456", "example10_route_web_http_method_POST_subject_id_456_", "example10.route_web.http_method_POST.subject_id"},
	})
	runKeys(t, c, "example10_wildcard", []keyCase{
		{"user=alice,action=readfile,resource=documents", "example10_wildcard_user_alice_action_readfile_resource_documents_", "example10_wildcard.user_alice.action_readfile.resource"},
	})
	// The README says route_api.method_GET here; envoyproxy/ratelimit's code
	// and its own tests give the pattern, and the method only with
	// value_to_metric on that level.
	runKeys(t, c, "example11_metrics", []keyCase{
		{"route=api/v1,method=GET", "example11_metrics_route_api/*_method_GET_", "example11_metrics.route_api/*.method"},
	})
}

func TestKeysOverride(t *testing.T) {
	t.Parallel()
	// A limit override has no rule: every value is kept.
	got := string(rlsconf.AppendCounterKey([]byte("prefix:"), "d", entries("files=files/a,x="), nil))
	if want := "prefix:d_files_files/a_x__"; got != want {
		t.Errorf("AppendCounterKey = %q, want %q", got, want)
	}
	var r *rlsconf.Rule
	if got := strings.Join(r.KeyValues(entries("a=1,b=2")), ","); got != "1,2" {
		t.Errorf("nil rule KeyValues = %s", got)
	}
}

func TestKeysShareThresholdQuirks(t *testing.T) {
	t.Parallel()
	// A '*' in the key makes a pattern of the key alone. Reached as the key
	// alone (its pattern does not fit "a*b_v"), the level keeps the value;
	// reached through its pattern, the whole composite stands in.
	c, err := rlsconf.Parse([]rlsconf.File{yamlFile("q.yaml", `domain: q
descriptors:
  - key: a*b
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: x
    value: y*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`)})
	if err != nil {
		t.Fatal(err)
	}
	runKeys(t, c, "q", []keyCase{
		{"a*b=v", "q_a*b_v_", "q.a*b"},
		{"a-b=_b", "q_a-b_a*b_", "q.a-b_a*b"},
		{"x=yz", "q_x_y*_", "q.x_y*"},
		// "x_y" + "_" + "z" fits the pattern x_y*, whose prefix is not "x_y_".
		{"x_y=z", "q_x_y_x_y*_", "q.x_y_x_y*"},
	})
}

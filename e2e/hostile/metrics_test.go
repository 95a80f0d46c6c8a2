package hostile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestMetricsRefusesStrangers: the metrics endpoint answers 401 to a
// caller without a token or with a token the API server does not know, 403
// to an authenticated caller RBAC does not allow to get /metrics, and the
// metrics to one it allows.
func TestMetricsRefusesStrangers(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(suite.env.Config)
	ns := kube.NewNamespace(t, "scrapers")
	token := func(sa string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, nobody := token("scraper"), token("nobody")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hostile-metrics-reader-" + ns},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}}}
	for _, o := range []client.Object{role, binding} {
		if err := kube.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	c := metricsEndpoint().httpClient()
	scrape := func(authorization string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+suite.metrics+"/metrics", nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("scraping: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The authorizer caches a denial for 30s: wait longer than that, in case
	// the first scrape came before the binding reached the API server's
	// RBAC cache.
	if err := waitFor(45*time.Second, func() error {
		if code, body := scrape("Bearer " + scraper); code != http.StatusOK || !strings.Contains(body, "lockguard_admission_reviews_total") {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	}); err != nil {
		t.Fatalf("the authorized scraper cannot scrape: %v", err)
	}
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"NoToken", "", http.StatusUnauthorized},
		{"UnknownToken", "Bearer not-a-token", http.StatusUnauthorized},
		{"BasicAuth", "Basic YWRtaW46YWRtaW4=", http.StatusUnauthorized},
		{"Unauthorized", "Bearer " + nobody, http.StatusForbidden},
	} {
		if code, body := scrape(tc.authorization); code != tc.want || strings.Contains(body, "lockguard_") {
			t.Errorf("%s: HTTP %d %.200q, want %d without metrics", tc.name, code, body, tc.want)
		}
	}
}

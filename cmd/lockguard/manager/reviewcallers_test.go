package manager

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/navique/lockguard/certs"
)

// TestReviewCallersWrapper: off, the review paths' handlers are served as
// they are; on, behind certs.ReviewCallers (a call without a client
// certificate is refused 403 and never reaches the handler); a CA file
// that cannot be read stops the start.
func TestReviewCallersWrapper(t *testing.T) {
	reached := 0
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ })
	serve := func(o ReviewCallerOptions) int {
		t.Helper()
		wrap, err := o.wrapper()
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		wrap(h).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate-delete", strings.NewReader("{}")))
		return rec.Code
	}
	if code := serve(ReviewCallerOptions{}); code != http.StatusOK || reached != 1 {
		t.Errorf("off: HTTP %d, handler reached %d times; want 200, 1", code, reached)
	}
	ca, err := certs.NewAuthority("review-callers", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), certs.CAName)
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := serve(ReviewCallerOptions{CAFile: caFile, Name: "kube-apiserver"}); code != http.StatusForbidden || reached != 1 {
		t.Errorf("on, no certificate: HTTP %d, handler reached %d times; want 403, still 1", code, reached)
	}
	if _, err := (ReviewCallerOptions{CAFile: filepath.Join(t.TempDir(), "absent.crt")}).wrapper(); err == nil {
		t.Error("a CA file that does not exist: no error, want one (lockguard does not start)")
	}
}

package manager

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsAuth is the metrics endpoint's filter: the caller must present a
// token the API server authenticates (TokenReview) and be allowed to get
// the path (SubjectAccessReview).
//
// It is controller-runtime's filters.WithAuthenticationAndAuthorization
// with one difference: a token the API server rejects gets 401, as from
// kube-apiserver itself, where controller-runtime answers 500 and logs an
// error for every bad token (so any stranger could fill the logs and trip
// alerts on 5xx). Errors of the SubjectAccessReview stay 500.
func metricsAuth(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authnClient, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	authzClient, err := authorizationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	// The backoff of k8s.io/apiserver's options.DefaultAuthWebhookRetryBackoff.
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  authnClient,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the metrics authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authzClient,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the metrics authorizer: %w", err)
	}
	return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			res, ok, err := authn.AuthenticateRequest(req)
			if err != nil || !ok {
				log.V(1).Info("Refused an unauthenticated metrics request", "remote", req.RemoteAddr, "reason", err)
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
			decision, reason, err := authz.Authorize(req.Context(), attrs)
			if err != nil {
				log.Error(err, "Cannot authorize a metrics request", "user", res.User.GetName())
				http.Error(w, "Authorization failed", http.StatusInternalServerError)
				return
			}
			if decision != authorizer.DecisionAllow {
				log.V(1).Info("Refused an unauthorized metrics request", "user", res.User.GetName(), "reason", reason)
				http.Error(w, "Authorization denied for user "+res.User.GetName(), http.StatusForbidden)
				return
			}
			handler.ServeHTTP(w, req)
		}), nil
	}, nil
}

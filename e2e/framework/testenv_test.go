package framework_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/navique/lockguard/e2e/framework"
)

// TestStartAndRestart checks that the control plane starts, serves the
// requested version and runs the controller manager; then restarts
// kube-apiserver gracefully and with SIGKILL: the data survives (same
// etcd), and the admin and a user configuration made before the restarts
// still work (same port and CAs). One control plane for both.
func TestStartAndRestart(t *testing.T) {
	env := framework.StartForTest(t, framework.Options{ControllerManager: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := "v" + env.Version; v.GitVersion != want {
		t.Errorf("ServerVersion() = %s, want %s", v.GitVersion, want)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("getting namespace default: %v", err)
	}

	userCfg, err := env.UserConfig("restart-user", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	user := kubernetes.NewForConfigOrDie(userCfg)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survivor"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []framework.RestartOptions{{Down: 500 * time.Millisecond, GracePeriod: 10 * time.Second}, {Kill: true}} {
		if err := env.RestartAPIServer(ctx, o); err != nil {
			t.Fatalf("RestartAPIServer(%+v): %v", o, err)
		}
		for name, cs := range map[string]kubernetes.Interface{"admin": admin, "user": user} {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, "survivor", metav1.GetOptions{}); err != nil {
				t.Errorf("after RestartAPIServer(%+v), %s: getting the namespace created before: %v", o, name, err)
			}
		}
	}
}

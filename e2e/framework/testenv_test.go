package framework_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/navique/lockguard/e2e/framework"
)

// TestStart checks that the control plane starts, serves the requested
// version, and runs the controller manager.
func TestStart(t *testing.T) {
	env := framework.StartForTest(t, framework.Options{ControllerManager: true})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := "v" + env.Version; v.GitVersion != want {
		t.Errorf("ServerVersion() = %s, want %s", v.GitVersion, want)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("getting namespace default: %v", err)
	}
}

package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// scaleObject is an object of the template namespace as etcd holds it
// (custom resources are stored as JSON, under
// <prefix>/<group>/<resource>/<namespace>/<name>).
type scaleObject struct {
	// dir is its key without the namespace and name.
	dir   string
	value string
	uid   string
}

// scaleTemplate holds the template namespace's objects, as lockguard
// converged them: a targetRef Lock (lkzz) and its Stack (tgzz), a selector
// Lock (lszz) and the Stack it covers (svzz, labelled lszz), an unlocked
// Stack that owns (owzz) and one it owns (unzz, the leaf).
type scaleTemplate struct {
	refLock, refTarget, selLock, selTarget, owner, leaf scaleObject
}

func (t *scaleTemplate) stacks() []scaleObject {
	return []scaleObject{t.refTarget, t.selTarget, t.owner, t.leaf}
}

// lockBytes is the mean size in etcd of a Lock and its Stack.
func (t *scaleTemplate) lockBytes() int {
	return (len(t.refLock.value) + len(t.refTarget.value) + len(t.selLock.value) + len(t.selTarget.value)) / 2
}

// scaleTemplates creates the template objects through the API server,
// runs binary until it has converged them (both Locks active, then idle),
// stops it and reads the objects from etcd.
func (c *Cluster) scaleTemplates(ctx context.Context, binary string) (*scaleTemplate, error) {
	const ns = scaleTemplateNS
	if err := c.InstallWebhook(ctx); err != nil {
		return nil, err
	}
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return nil, err
	}
	lg, err := c.StartLockguard(binary)
	if err != nil {
		return nil, err
	}
	defer lg.Stop()
	if _, err := lg.WaitReady(ctx); err != nil {
		return nil, err
	}
	labelled := func(name string, labels map[string]string) *unstructured.Unstructured {
		s := Stack(ns, name, 64)
		s.SetLabels(labels)
		return s
	}
	owner := labelled("owzz", map[string]string{"app": "apzz", "tier": "backend"})
	if err := c.Client.Create(ctx, owner); err != nil {
		return nil, err
	}
	leaf := labelled("unzz", map[string]string{"app": "apzz", "tier": "backend"})
	leaf.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: ptr.To(true)}})
	sel := LockOn(ns, "lszz", "")
	sel.Spec.TargetRef = lockv1alpha1.TargetReference{}
	sel.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"bench.navique.com/lock": "lszz"}}
	for _, o := range []client.Object{
		leaf,
		labelled("tgzz", map[string]string{"app": "apzz", "tier": "db"}),
		labelled("svzz", map[string]string{"app": "apzz", "tier": "db", "bench.navique.com/lock": "lszz"}),
		LockOn(ns, "lkzz", "tgzz"),
		sel,
	} {
		if err := c.Client.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	if err := waitFor(ctx, func() error {
		for _, name := range []string{"lkzz", "lszz"} {
			var l lockv1alpha1.Lock
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
				return err
			}
			if !l.Status.Active {
				return fmt.Errorf("Lock %s is not active yet", name)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := lg.waitIdle(time.Minute); err != nil {
		return nil, err
	}
	lg.Stop()
	etcd := &etcdKV{url: c.Env.EtcdURL(), hc: &http.Client{Timeout: time.Minute}}
	t := &scaleTemplate{}
	for name, into := range map[string]*scaleObject{
		"locks/" + ns + "/lkzz": &t.refLock, "stacks/" + ns + "/tgzz": &t.refTarget,
		"locks/" + ns + "/lszz": &t.selLock, "stacks/" + ns + "/svzz": &t.selTarget,
		"stacks/" + ns + "/owzz": &t.owner, "stacks/" + ns + "/unzz": &t.leaf,
	} {
		found, err := etcd.keysWithSuffix(ctx, "/", "/"+lockv1alpha1.Group+"/"+name)
		if err != nil {
			return nil, err
		}
		if len(found) != 1 {
			return nil, fmt.Errorf("%d keys in etcd end with %s, want 1", len(found), name)
		}
		for k, v := range found {
			var m metav1.PartialObjectMetadata
			if err := json.Unmarshal(v, &m); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			*into = scaleObject{dir: strings.TrimSuffix(k, ns+"/"+name[strings.LastIndexByte(name, '/')+1:]), value: string(v), uid: string(m.UID)}
		}
	}
	return t, nil
}

// scaleUID is the UID of the i-th seeded object of kind tag.
func scaleUID(tag, i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", tag, i) }

// seed writes the Locks [from.Locks, to.Locks) and the unlocked objects
// [from.Objects, to.Objects) into etcd, copies of the templates. Lock i
// (l-<i>) covers Stack t-<i>, by targetRef for even i and by selector for
// odd i; unlocked object j is u-<j>, owned by u-<j - j%10> unless j%10 is
// 0. Locks go round robin over ns namespaces, unlocked objects too by
// tens (an owner and what it owns share a namespace).
func (t *scaleTemplate) seed(ctx context.Context, etcd *etcdKV, ns int, from, to ScaleSize) error {
	type item struct{ kind, i int }
	var items []item
	for i := from.Locks; i < to.Locks; i++ {
		items = append(items, item{0, i})
	}
	for j := from.Objects; j < to.Objects; j++ {
		items = append(items, item{1, j})
	}
	batches := (len(items) + etcdTxnOps - 1) / etcdTxnOps
	return Parallel(ctx, batches, 4, func(ctx context.Context, b int) error {
		var kvs [][2][]byte
		for _, it := range items[b*etcdTxnOps : min(len(items), (b+1)*etcdTxnOps)] {
			if it.kind == 0 {
				kvs = append(kvs, t.lockKVs(it.i, scaleNamespace(it.i%ns))...)
			} else {
				kvs = append(kvs, t.objectKV(it.i, scaleNamespace((it.i/10)%ns)))
			}
		}
		for len(kvs) > 0 {
			n := min(len(kvs), etcdTxnOps)
			if err := etcd.put(ctx, kvs[:n]); err != nil {
				return fmt.Errorf("writing into etcd: %w", err)
			}
			kvs = kvs[n:]
		}
		return nil
	})
}

// lockKVs are Lock i and its Stack in namespace ns.
func (t *scaleTemplate) lockKVs(i int, ns string) [][2][]byte {
	lock, target := t.refLock, t.refTarget
	placeholder := "lkzz"
	if i%2 == 1 {
		lock, target, placeholder = t.selLock, t.selTarget, "lszz"
	}
	r := strings.NewReplacer(scaleTemplateNS, ns, placeholder, fmt.Sprintf("l-%d", i), "tgzz", fmt.Sprintf("t-%d", i), "svzz", fmt.Sprintf("t-%d", i),
		lock.uid, scaleUID(1, i), target.uid, scaleUID(2, i), "apzz", fmt.Sprintf("app-%d", i%100))
	return [][2][]byte{
		{[]byte(lock.dir + ns + "/" + fmt.Sprintf("l-%d", i)), []byte(r.Replace(lock.value))},
		{[]byte(target.dir + ns + "/" + fmt.Sprintf("t-%d", i)), []byte(r.Replace(target.value))},
	}
}

// objectKV is unlocked object j in namespace ns.
func (t *scaleTemplate) objectKV(j int, ns string) [2][]byte {
	o := t.leaf
	owner := j - j%10
	if j%10 == 0 {
		o = t.owner
	}
	name := fmt.Sprintf("u-%d", j)
	r := strings.NewReplacer(scaleTemplateNS, ns, "unzz", name, "owzz", fmt.Sprintf("u-%d", owner),
		t.leaf.uid, scaleUID(3, j), t.owner.uid, scaleUID(3, owner), "apzz", fmt.Sprintf("app-%d", j%100))
	if j%10 == 0 {
		r = strings.NewReplacer(scaleTemplateNS, ns, "owzz", name, t.owner.uid, scaleUID(3, j), "apzz", fmt.Sprintf("app-%d", j%100))
	}
	return [2][]byte{[]byte(o.dir + ns + "/" + name), []byte(r.Replace(o.value))}
}

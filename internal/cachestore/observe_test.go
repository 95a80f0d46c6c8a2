package cachestore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// mirror keeps what an observer of a Store was told, as client-go's
// handlers would keep it: an add of an object it holds, or an update whose
// old object is not the one it holds, is an error.
type mirror struct {
	t       *testing.T
	step    *int
	objects map[string]metav1.Object
}

func (m *mirror) OnAdd(obj any, initial bool) {
	o := obj.(metav1.Object)
	k := storeKey(o.GetNamespace(), o.GetName())
	if _, ok := m.objects[k]; ok || initial {
		m.t.Errorf("step %d: add of %s (initial %t), which the observer holds: %t", *m.step, k, initial, ok)
	}
	m.objects[k] = o
}

func (m *mirror) OnUpdate(old, obj any) {
	o := obj.(metav1.Object)
	k := storeKey(o.GetNamespace(), o.GetName())
	if m.objects[k] != old.(metav1.Object) {
		m.t.Errorf("step %d: update of %s from an object the observer does not hold", *m.step, k)
	}
	m.objects[k] = o
}

func (m *mirror) OnDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		// A relist's tombstone holds the Store's object; the informer's
		// own may hold an older one.
		delete(m.objects, tomb.Key)
		return
	}
	o := obj.(metav1.Object)
	delete(m.objects, storeKey(o.GetNamespace(), o.GetName()))
}

// TestObserve: an observer added to a Store, given the objects stored then
// and told of every change after (adds, updates, deletes by object and by
// tombstone, replacements), holds what the Store holds after every step;
// once stopped it is told nothing.
func TestObserve(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := New(storeIndexers())
	step := 0
	m := &mirror{t: t, step: &step, objects: map[string]metav1.Object{}}
	var stop func()
	for step = range 3000 {
		if step == 300 {
			stop = s.observeEach(m, func(obj any) {
				o := obj.(metav1.Object)
				m.objects[storeKey(o.GetNamespace(), o.GetName())] = o
			})
		}
		switch n := r.IntN(100); {
		case n < 55:
			mustAgree(t, nil, s.Update(randomMeta(r)))
		case n < 80:
			mustAgree(t, nil, s.Delete(randomMeta(r)))
		case n < 95:
			o := randomMeta(r)
			key, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(o)
			mustAgree(t, nil, s.Delete(toolscache.DeletedFinalStateUnknown{Key: key, Obj: o}))
		default:
			var list []any
			for range r.IntN(150) {
				list = append(list, randomMeta(r))
			}
			mustAgree(t, nil, s.Replace(list, "9"))
		}
		if step < 300 {
			continue
		}
		held := map[string]metav1.Object{}
		for _, obj := range s.List() {
			o := obj.(metav1.Object)
			held[storeKey(o.GetNamespace(), o.GetName())] = o
		}
		if len(held) != len(m.objects) {
			t.Fatalf("step %d: the Store holds %d objects, its observer %d", step, len(held), len(m.objects))
		}
		for k, o := range held {
			if m.objects[k] != o {
				t.Fatalf("step %d: the observer's %s is not the Store's", step, k)
			}
		}
	}
	stop()
	told := len(m.objects)
	for i := range 50 {
		mustAgree(t, nil, s.Update(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("after-%d", i)}}))
	}
	if len(m.objects) != told {
		t.Errorf("a stopped observer was told of %d adds", len(m.objects)-told)
	}
}

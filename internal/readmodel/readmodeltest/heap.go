package readmodeltest

import "runtime"

// LiveHeap returns the heap's live bytes after two collections, for the
// heap benchmarks of the packages that keep the cache's objects.
func LiveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

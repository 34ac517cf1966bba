// goheap writes a real Go heap profile (gzipped profile.proto, as
// runtime/pprof writes it) with every allocation recorded
// (MemProfileRate = 1), along a few known call paths:
//
//	main.leakTabletSchema   keeps 64 x 4096 bytes
//	main.segmentCache       keeps 32 x 16384 bytes (inlined helper main.newSegment)
//	main.transient          allocates and drops 100 x 1024 bytes
//
// Usage: go run goheap.go OUT.pb.gz   (see tests/data/README.md)
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

var kept [][]byte

//go:noinline
func leakTabletSchema() {
	for i := 0; i < 64; i++ {
		kept = append(kept, make([]byte, 4096))
	}
}

func newSegment() []byte { return make([]byte, 16384) }

//go:noinline
func segmentCache() {
	for i := 0; i < 32; i++ {
		kept = append(kept, newSegment())
	}
}

var sink []byte

//go:noinline
func transient() {
	for i := 0; i < 100; i++ {
		sink = make([]byte, 1024)
	}
	sink = nil
}

func main() {
	runtime.MemProfileRate = 1
	kept = make([][]byte, 0, 256)
	leakTabletSchema()
	segmentCache()
	transient()
	runtime.GC()
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		panic(err)
	}
}

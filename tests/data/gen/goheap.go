// goheap writes a real Go heap profile (gzipped profile.proto, as
// runtime/pprof writes it) with every allocation recorded
// (MemProfileRate = 1), along a few known call paths:
//
//	main.leakTabletSchema   keeps 64 x 4096 bytes
//	main.segmentCache       keeps 32 x 16384 bytes (inlined helper main.newSegment)
//	main.transient          allocates and drops 100 x 1024 bytes
//
// Usage: go run goheap.go OUT.pb.gz [RATE SCALE]   (see tests/data/README.md)
//
// RATE sets runtime.MemProfileRate (default 1, every allocation); SCALE
// multiplies every count above, so that a sampled profile (Go's default
// rate, 524288) still has samples on each path.
package main

import (
	"os"
	"strconv"
	"runtime"
	"runtime/pprof"
)

var kept [][]byte

var scale = 1

//go:noinline
func leakTabletSchema() {
	for i := 0; i < 64*scale; i++ {
		kept = append(kept, make([]byte, 4096))
	}
}

func newSegment() []byte { return make([]byte, 16384) }

//go:noinline
func segmentCache() {
	for i := 0; i < 32*scale; i++ {
		kept = append(kept, newSegment())
	}
}

var sink []byte

//go:noinline
func transient() {
	for i := 0; i < 100*scale; i++ {
		sink = make([]byte, 1024)
	}
	sink = nil
}

func main() {
	runtime.MemProfileRate = 1
	if len(os.Args) > 3 {
		rate, err1 := strconv.Atoi(os.Args[2])
		n, err2 := strconv.Atoi(os.Args[3])
		if err1 != nil || err2 != nil || rate < 1 || n < 1 {
			panic("usage: goheap OUT.pb.gz [RATE SCALE]")
		}
		runtime.MemProfileRate = rate
		scale = n
	}
	kept = make([][]byte, 0, 256*scale)
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
